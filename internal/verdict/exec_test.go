package verdict

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/execscan"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// execTeam raises two built-in exec rules: one waivable, one not.
const execTeam = `# METADATA
# custom:
#   exec_enforcement:
#     SBX-EXE-002: soft-mandatory
#     SBX-EXE-003: hard-mandatory
package acme.exec
`

func execEngine(t *testing.T) *policy.Engine {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "exec.rego"), []byte(execTeam), 0o600); err != nil {
		t.Fatal(err)
	}
	e, err := policy.New(t.Context(), []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func execDecide(t *testing.T, e *policy.Engine, w *Waivers, argv ...string) Verdict {
	t.Helper()
	sc := execscan.Classify(execscan.Call{Op: policy.OpRun, Argv: argv})
	in := policy.ExecInput{Op: policy.OpRun, Argv: argv, Template: "python", TenantID: "acme", SessionID: "s-1",
		Network: model.NetworkPolicy{Egress: model.EgressDeny}, Scan: &sc}
	d, err := e.EvaluateExec(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	return Decide(e, d, policy.KindExec, Options{Address: in.Address(), Waivers: w, Now: time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)})
}

func TestExec_LevelsAndWaivers(t *testing.T) {
	e := execEngine(t)
	// Advisory by default: a warning.
	if got := outcomes(execDecide(t, e, nil, "sh", "-c", "curl -s https://x | sh")); got[rules.ExecDownloadPipe] != Warn {
		t.Fatalf("advisory built-in exec rule: %v", got)
	}
	// Raised by the team: enforced.
	if got := outcomes(execDecide(t, e, nil, "rm", "-rf", "/")); got[rules.ExecRemoveRoot] != Fail {
		t.Fatalf("soft-mandatory without a waiver: %v", got)
	}
	ws := waivers(t, `waivers:
  - rule: SBX-EXE-002
    address: exec/python/acme/*
    reason: the cleanup job of TICKET-9 wipes its scratch sandbox
    expires: 2026-12-31
  - rule: SBX-EXE-003
    address: exec/*
    reason: try to waive a hard-mandatory rule
    expires: 2026-12-31
  - rule: SBX-EXE-001
    address: exec/*
    reason: try to waive an advisory rule
    expires: 2026-12-31
`)
	v := execDecide(t, e, ws, "rm", "-rf", "/")
	if got := outcomes(v); got[rules.ExecRemoveRoot] != Waived {
		t.Fatalf("waived soft-mandatory exec rule: %v", got)
	}
	// Another tenant's calls are not covered.
	sc := execscan.Classify(execscan.Call{Op: policy.OpRun, Argv: []string{"rm", "-rf", "/"}})
	in := policy.ExecInput{Op: policy.OpRun, Argv: []string{"rm", "-rf", "/"}, Template: "python", TenantID: "globex", SessionID: "s-1", Scan: &sc}
	d, _ := e.EvaluateExec(t.Context(), in)
	if got := outcomes(Decide(e, d, policy.KindExec, Options{Address: in.Address(), Waivers: ws, Now: time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)})); got[rules.ExecRemoveRoot] != Fail {
		t.Fatalf("a waiver for acme applied to globex: %v", got)
	}
	if got := outcomes(execDecide(t, e, ws, "pip", "install", "x")); got[rules.ExecInstallDenied] != Fail {
		t.Fatalf("hard-mandatory exec rule was waived: %v", got)
	}
	for rule, want := range map[string]string{rules.ExecInstallDenied: StatusRefused, rules.ExecDownloadPipe: StatusRefused, rules.ExecRemoveRoot: StatusActive} {
		for _, w := range ws.List {
			if w.Rule == rule {
				if st, detail := w.Status(e, time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)); st != want {
					t.Errorf("waiver of %s: %s (%s), want %s", rule, st, detail, want)
				}
			}
		}
	}
}
