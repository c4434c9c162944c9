package policy_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/analysers"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/execscan"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// execRun is a run call's document as the hook builds it (the scan of
// its argv included: without one the built-in rules read a call they
// could not analyse).
func execRun(argv ...string) policy.ExecInput {
	sc := execscan.Classify(execscan.Call{Op: policy.OpRun, Argv: argv})
	return policy.ExecInput{Op: policy.OpRun, Argv: argv, Template: "python", TenantID: "acme", SessionID: "s-1",
		Backend: "docker", Network: model.NetworkPolicy{Egress: model.EgressDeny}, Scan: &sc, StdinBytes: -1}
}

func evalExec(t *testing.T, e *policy.Engine, in policy.ExecInput) policy.Decision {
	t.Helper()
	d, err := e.EvaluateExec(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func findingOf(d policy.Decision, id string) (policy.Finding, bool) {
	for _, f := range d.Denies {
		if f.ID == id {
			return f, true
		}
	}
	return policy.Finding{}, false
}

func TestExec_BuiltinRulesAreAdvisory(t *testing.T) {
	e, err := policy.New(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	d := evalExec(t, e, execRun("rm", "-rf", "/"))
	f, ok := findingOf(d, rules.ExecRemoveRoot)
	if !ok || f.Decision != policy.DecisionBlock || f.Class != string(model.ErrExecutionBlocked) || !f.Builtin {
		t.Fatalf("rm -rf /: %+v", d.Denies)
	}
	if lvl := e.RuleFor(f).Enforcement(); lvl != policy.Advisory {
		t.Fatalf("built-in exec rule is %s, want advisory", lvl)
	}
	if len(d.Warnings) != 0 {
		t.Fatalf("exec findings are all in Denies: %+v", d.Warnings)
	}
	if d := evalExec(t, e, execRun("echo", "hello")); len(d.Denies) != 0 {
		t.Fatalf("echo hello: %+v", d.Denies)
	}
}

// The exec packages decide calls only: a configuration document is never
// decided by them, and a call's document never by the configuration rules.
func TestExec_SeparateFromConfigurationRules(t *testing.T) {
	e, err := policy.New(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	d := eval(t, e, templateInput())
	for _, f := range append(d.Denies, d.Warnings...) {
		if strings.HasPrefix(f.Package, "sandboxio.exec") || f.Decision != "" {
			t.Fatalf("configuration evaluation returned an exec finding: %+v", f)
		}
	}
	x := evalExec(t, e, execRun("sh", "-c", "echo"))
	for _, f := range x.Denies {
		if f.Package != "sandboxio.exec" {
			t.Fatalf("exec evaluation returned %+v", f)
		}
	}
}

func TestExec_AnalyserStatusReachesTheRules(t *testing.T) {
	e, err := policy.New(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	sc := execscan.Classify(execscan.Call{Op: policy.OpRunCode, Language: "python", Code: "print(1)"})
	in := policy.ExecInput{Op: policy.OpRunCode, Language: "python", Code: "print(1)", Source: &policy.ExecSource{Language: "python", Text: "print(1)"},
		Network: model.NetworkPolicy{Egress: model.EgressDeny}, Scan: &sc}
	in.Analysers = map[string]analysers.Report{analysers.Bandit: {Tool: analysers.Bandit, Status: analysers.TimedOut, Findings: []analysers.Finding{}}}
	f, ok := findingOf(evalExec(t, e, in), rules.ExecBanditHigh)
	if !ok || f.Decision != policy.DecisionApproval || !strings.Contains(f.Message, "timeout") {
		t.Fatalf("bandit timed out: %+v", f)
	}
	in.Analysers[analysers.Bandit] = analysers.Report{Tool: analysers.Bandit, Status: analysers.OK,
		Findings: []analysers.Finding{{ID: "bandit:B602", Severity: "high", Confidence: "high", Line: 1}}}
	f, ok = findingOf(evalExec(t, e, in), rules.ExecBanditHigh)
	if !ok || !strings.Contains(f.Message, "bandit:B602") || strings.Contains(f.Message, "print(1)") {
		t.Fatalf("bandit high: %+v", f)
	}
	in.Analysers[analysers.Bandit] = analysers.Report{Tool: analysers.Bandit, Status: analysers.OK, Findings: []analysers.Finding{}}
	if _, ok := findingOf(evalExec(t, e, in), rules.ExecBanditHigh); ok {
		t.Fatal("clean bandit report still requires approval")
	}
}

const teamExec = `# METADATA
# custom:
#   exec_enforcement:
#     SBX-EXE-002: hard-mandatory
#     SBX-EXE-004: soft-mandatory
package acme.exec

import data.sandboxio.lib

# METADATA
# title: no network tools
# description: the team's own exec rule
# custom:
#   id: ACME-EXE-001
#   class: ExecutionBlocked
#   attribute: command
#   fix: do not call nc
block contains f if {
	input.exec.argv[0] == "nc"
	f := lib.finding(rego.metadata.rule(), "nc is not allowed")
}
`

func TestExec_TeamRaisesLevelsAndAddsRules(t *testing.T) {
	e, err := loadTeam(t, map[string]string{"exec.rego": teamExec})
	if err != nil {
		t.Fatal(err)
	}
	levels := e.ExecEnforcement()
	if levels[rules.ExecRemoveRoot] != policy.HardMandatory || levels[rules.ExecBanditHigh] != policy.SoftMandatory || len(levels) != 2 {
		t.Fatalf("levels %v", levels)
	}
	d := evalExec(t, e, execRun("rm", "-rf", "/"))
	f, _ := findingOf(d, rules.ExecRemoveRoot)
	if lvl := e.RuleFor(f).Enforcement(); lvl != policy.HardMandatory {
		t.Fatalf("raised rule is %s", lvl)
	}
	if info, _ := e.Rule(rules.ExecDownloadPipe); info.Enforcement() != policy.Advisory {
		t.Fatalf("a rule the team did not name is %s", info.Enforcement())
	}
	d = evalExec(t, e, execRun("nc", "-l", "8080"))
	f, ok := findingOf(d, "ACME-EXE-001")
	if !ok || f.Builtin || f.Decision != policy.DecisionBlock || e.RuleFor(f).Enforcement() != policy.HardMandatory {
		t.Fatalf("team exec rule: %+v", d.Denies)
	}
}

func TestExec_TeamMistakesRefused(t *testing.T) {
	for name, tc := range map[string]struct{ src, want string }{
		"deny in exec package": {`package acme.exec

deny contains "x" if { input.kind == "exec" }
`, "exec packages decide with block"},
		"block outside exec package": {`package acme.sandboxes

block contains "x" if { input.kind == "exec" }
`, "not an exec package"},
		"block as a complete rule": {`package acme.exec

block := {"x"}
`, "not a partial set rule"},
		"unknown rule raised": {`# METADATA
# custom:
#   exec_enforcement:
#     SBX-NET-003: hard-mandatory
package acme.exec
`, "not a built-in exec rule"},
		"bad level": {`# METADATA
# custom:
#   exec_enforcement:
#     SBX-EXE-001: mandatory
package acme.exec
`, "use advisory, soft-mandatory or hard-mandatory"},
		"two levels": {`# METADATA
# custom:
#   exec_enforcement:
#     SBX-EXE-001: hard-mandatory
package acme.exec

# METADATA
# custom:
#   exec_enforcement:
#     SBX-EXE-001: advisory
block contains "x" if { false }
`, "two levels"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := loadTeam(t, map[string]string{"p.rego": tc.src})
			if !errors.Is(err, model.ErrConfiguration) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// A team exec rule that loops is refused at its budget, never read as allow.
func TestExec_BudgetRefuses(t *testing.T) {
	e, err := loadTeam(t, map[string]string{"slow.rego": `package acme.exec

block contains "slow" if {
	some i in numbers.range(1, 100000000)
	i < 0
}
`})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.WithBudget(50*1e6).EvaluateExec(t.Context(), execRun("echo"))
	var me *model.Error
	if !errors.As(err, &me) || me.Rule != rules.PolicyTimedOut {
		t.Fatalf("err = %v, want %s", err, rules.PolicyTimedOut)
	}
}

// FuzzExecInput: no argv, code or analyser finding makes the evaluation
// panic or fail; the document holds whatever it is given.
func FuzzExecInput(f *testing.F) {
	e, err := policy.New(f.Context(), nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add("sh", "-c", "curl x | sh", "python", "print(1)", "bandit:B602")
	f.Add("rm", "-rf", "/", "sh", "\xff\x00", "")
	f.Fuzz(func(t *testing.T, a0, a1, a2, lang, code, finding string) {
		in := execRun(a0, a1, a2)
		in.Language, in.Code = lang, code
		in.Source = &policy.ExecSource{Language: lang, Text: code}
		in.Analysers = map[string]analysers.Report{lang: {Status: analysers.OK, Findings: []analysers.Finding{{ID: finding, Severity: "high"}}}}
		if _, err := e.EvaluateExec(t.Context(), in); err != nil {
			t.Fatalf("%v", err)
		}
	})
}

// BenchmarkEvaluateExec: the Rego part of the pre-execution hook on a
// command with no code to analyse, and on a shell script with a clean
// shellcheck report.
func BenchmarkEvaluateExec(b *testing.B) {
	e, err := policy.New(b.Context(), nil)
	if err != nil {
		b.Fatal(err)
	}
	plain := execRun("echo", "hi")
	script := execRun("sh", "-c", "for i in 1 2 3; do echo \"$i\"; done")
	script.Source = &policy.ExecSource{Language: "sh", Text: script.Argv[2]}
	script.Analysers = map[string]analysers.Report{analysers.ShellCheck: {Tool: analysers.ShellCheck, Status: analysers.OK, Findings: []analysers.Finding{}}}
	for _, tc := range []struct {
		name string
		in   policy.ExecInput
	}{{"argv", plain}, {"script", script}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				d, err := e.EvaluateExec(b.Context(), tc.in)
				if err != nil || len(d.Denies) != 0 {
					b.Fatalf("%v %+v", err, d.Denies)
				}
			}
		})
	}
}

// A call's document without the hook's scan is a call the rules could not
// analyse: each command rule reports it, none passes.
func TestExec_NoScanIsNotClean(t *testing.T) {
	e, err := policy.New(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	in := execRun("echo", "hello")
	in.Scan = nil
	d := evalExec(t, e, in)
	for _, id := range []string{rules.ExecDownloadPipe, rules.ExecRemoveRoot, rules.ExecInstallDenied} {
		if f, ok := findingOf(d, id); !ok || !strings.Contains(f.Message, "could not analyse") {
			t.Errorf("%s: %+v", id, d.Denies)
		}
	}
}
