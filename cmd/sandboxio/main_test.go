package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var testNow = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)

// callBudget is the --timeout of tests that want a command killed at its
// timeout (ExecutionTimeout). --timeout bounds each call made for the run,
// the create included (a caller's explicit bound holds for everything done
// on its behalf: a frozen daemon gives CreateTimeout within it). So it
// must leave room for a create on a busy host (a tight one gave
// CreateTimeout, exit 66, under load in CI).
const callBudget = "10s"

// cli runs the CLI in-process.
func cli(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(t.Context(), args, &env{stdout: &out, stderr: &errb, stdin: strings.NewReader(stdin), now: func() time.Time { return testNow }})
	return code, out.String(), errb.String()
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// plan renders a one-template plan as `terraform show -json` does.
func plan(name string, after map[string]any) string {
	a := map[string]any{
		"name": name, "backend": "docker://", "image": "registry.internal.example/python:3.12", "runtime": nil,
		"require_isolation": nil, "network": map[string]any{"egress": "deny", "allow": []any{}},
		"resources":       map[string]any{"cpu": 1, "memory_mb": 512, "disk_mb": 1024, "pids": 256},
		"timeout_seconds": 300, "lifetime_seconds": 300, "env": nil, "secret_names": nil, "labels": map[string]any{"team": "agents"},
	}
	for k, v := range after {
		a[k] = v
	}
	p := map[string]any{
		"format_version": "1.2",
		"planned_values": map[string]any{"root_module": map[string]any{}},
		"resource_changes": []any{map[string]any{
			"address": "sandboxio_template." + name, "mode": "managed", "type": "sandboxio_template", "name": name,
			"provider_name": "registry.terraform.io/sandboxio/sandboxio",
			"change":        map[string]any{"actions": []any{"create"}, "after": a, "after_unknown": map[string]any{}},
		}},
	}
	b, _ := json.Marshal(p)
	return string(b)
}

func TestRun_Dispatch(t *testing.T) {
	for _, tc := range []struct {
		args        []string
		code        int
		out, errOut string
	}{
		{nil, exitUsage, "", "Commands:"},
		{[]string{"--help"}, exitOK, "policy check", ""},
		{[]string{"help"}, exitOK, "Exit codes:", ""},
		{[]string{"help", "policy", "check"}, exitOK, "usage: sandboxio policy check", ""},
		{[]string{"help", "frobnicate"}, exitUsage, "", `unknown command "frobnicate"`},
		{[]string{"policy"}, exitUsage, "", "policy test"},
		{[]string{"policy", "--help"}, exitOK, "policy check", ""},
		{[]string{"policy", "test", "-help"}, exitOK, "usage: sandboxio policy test", ""},
		{[]string{"policy", "frobnicate"}, exitUsage, "", "policy check"},
		{[]string{"frobnicate"}, exitUsage, "", `unknown command "frobnicate"`},
		{[]string{"version"}, exitOK, "policy input    v1", ""},
		{[]string{"--version"}, exitOK, "sandboxio ", ""},
		{[]string{"version", "extra"}, exitUsage, "", "unexpected argument"},
		{[]string{"policy", "check", "--nope"}, exitUsage, "", "flag provided but not defined: -nope"},
	} {
		code, out, errOut := cli(t, "", tc.args...)
		if code != tc.code || !strings.Contains(out, tc.out) || !strings.Contains(errOut, tc.errOut) {
			t.Errorf("sandboxio %s: code %d, stdout %q, stderr %q; want code %d, stdout with %q, stderr with %q",
				strings.Join(tc.args, " "), code, out, errOut, tc.code, tc.out, tc.errOut)
		}
	}
}

func TestEveryCommandHasHelpWithExitCodes(t *testing.T) {
	for name := range commands {
		args := append(strings.Fields(name), "--help")
		code, out, _ := cli(t, "", args...)
		if code != exitOK || !strings.Contains(out, "usage: sandboxio "+name) || !strings.Contains(out, "Exit codes:") ||
			!strings.Contains(out, "usage or input error") {
			t.Errorf("%s --help: code %d\n%s", name, code, out)
		}
	}
	for _, want := range []string{"version", "policy check", "policy test", "policy docs", "run", "run-code", "reap", "image prepare"} {
		if commands[want] == nil {
			t.Errorf("command %q not registered", want)
		}
	}
}

func TestVersionJSON(t *testing.T) {
	code, out, _ := cli(t, "", "version", "--json")
	var v versions
	if code != exitOK || json.Unmarshal([]byte(out), &v) != nil || v.InputVersion != 1 || v.Go == "" {
		t.Fatalf("version --json: %d %s", code, out)
	}
}

func TestPolicyCheck_ExitCodes(t *testing.T) {
	dir := t.TempDir()
	clean := writeFile(t, dir, "clean.json", plan("clean", nil))
	refused := writeFile(t, dir, "refused.json", plan("refused", map[string]any{"network": map[string]any{"egress": "deny", "allow": []any{"10.0.0.0/8"}}}))
	warned := writeFile(t, dir, "warned.json", plan("warned", map[string]any{"network": map[string]any{"egress": "allow", "allow": []any{}}}))
	truncated := writeFile(t, dir, "truncated.json", plan("t", nil)[:100])
	state := writeFile(t, dir, "state.json", `{"format_version":"1.0","values":{"root_module":{}}}`)
	badTeam := writeFile(t, dir, "team/override.rego", "package sandboxio.network\n\ndeny := set()\n")
	badWaivers := writeFile(t, dir, "waivers.yaml", "waivers:\n  - rule: TEAM-1\n")
	for _, tc := range []struct {
		name   string
		stdin  string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"clean", "", []string{clean}, exitOK, "result: PASS", ""},
		{"refused", "", []string{refused}, exitDenied, "SBX-NET-003", ""},
		{"warning passes", "", []string{warned}, exitOK, "SBX-NET-007", ""},
		{"fail on warn", "", []string{"--fail-on-warn", warned}, exitDenied, "with --fail-on-warn", ""},
		{"flags after the plan", "", []string{warned, "--fail-on-warn", "--format", "json"}, exitDenied, `"passed": false`, ""},
		{"stdin", plan("s", nil), []string{"-"}, exitOK, "<stdin>", ""},
		{"truncated", "", []string{truncated}, exitUsage, "", "truncated.json: the JSON ends early"},
		{"state not plan", "", []string{state}, exitUsage, "", "state, not of a plan"},
		{"missing file", "", []string{filepath.Join(dir, "nope.json")}, exitUsage, "", "read plan"},
		{"no plan", "", nil, exitUsage, "", "want exactly one PLAN.json"},
		{"two plans", "", []string{clean, clean}, exitUsage, "", "got 2"},
		{"bad format", "", []string{"--format", "xml", clean}, exitUsage, "", `"xml" is not one of text, json, sarif, junit`},
		{"team shadows built-in", "", []string{"--policy", filepath.Dir(badTeam), refused}, exitUsage, "", "reserved"},
		{"missing policy dir", "", []string{"--policy", filepath.Join(dir, "none"), clean}, exitUsage, "", "does not exist"},
		{"bad waivers", "", []string{"--waivers", badWaivers, clean}, exitUsage, "", "waivers.yaml: line 2"},
		{"sarif", "", []string{"--format=sarif", refused}, exitDenied, `"version": "2.1.0"`, ""},
		{"junit", "", []string{"--format", "junit", refused}, exitDenied, "<testsuites", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := cli(t, tc.stdin, append([]string{"policy", "check"}, tc.args...)...)
			if code != tc.code || !strings.Contains(out, tc.stdout) || !strings.Contains(errOut, tc.stderr) {
				t.Fatalf("code %d (want %d)\nstdout: %s\nstderr: %s", code, tc.code, out, errOut)
			}
		})
	}
}

func TestPolicyCheck_OutputFile(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "plan.json", plan("x", nil))
	out := filepath.Join(dir, "report.sarif")
	if code, stdout, _ := cli(t, "", "policy", "check", "--format", "sarif", "--output", out, p); code != exitOK || stdout != "" {
		t.Fatalf("code %d, stdout %q", code, stdout)
	}
	data, err := os.ReadFile(out)
	if err != nil || !json.Valid(data) {
		t.Fatalf("report file: %v", err)
	}
}

// The example team policies and their waiver file, as a team would use them.
func TestPolicyCheck_ExamplePolicies(t *testing.T) {
	dir := t.TempDir()
	examples := filepath.Join("..", "..", "examples", "policies")
	waivers := filepath.Join(examples, "waivers.yaml")
	hub := writeFile(t, dir, "hub.json", plan("legacy_notebook", map[string]any{"image": "python:3.12-slim"}))
	hubOther := writeFile(t, dir, "hub-other.json", plan("notebook", map[string]any{"image": "python:3.12-slim"}))
	big := writeFile(t, dir, "big.json", plan("agent", map[string]any{"resources": map[string]any{"cpu": 1, "memory_mb": 4096, "disk_mb": 1024, "pids": 256}}))

	code, out, _ := cli(t, "", "policy", "check", "--policy", examples, "--waivers", waivers, hub)
	if code != exitOK || !strings.Contains(out, "WAIVED") || !strings.Contains(out, "PLAT-142") {
		t.Errorf("waived Docker Hub image: %d\n%s", code, out)
	}
	code, out, _ = cli(t, "", "policy", "check", "--policy", examples, "--waivers", waivers, hubOther)
	if code != exitDenied || !strings.Contains(out, "TEAM-IMG-001") {
		t.Errorf("Docker Hub image outside the waiver: %d\n%s", code, out)
	}
	code, out, _ = cli(t, "", "policy", "check", "--policy", examples, big)
	if code != exitDenied || !strings.Contains(out, "TEAM-MEM-001") || !strings.Contains(out, "hard-mandatory") {
		t.Errorf("memory above the team ceiling: %d\n%s", code, out)
	}
	// After its expiry the waiver stops applying and the report says so.
	var buf bytes.Buffer
	code = run(t.Context(), []string{"policy", "check", "--policy", examples, "--waivers", waivers, hub},
		&env{stdout: &buf, stderr: &buf, stdin: strings.NewReader(""), now: func() time.Time { return time.Date(2030, 7, 1, 0, 0, 0, 0, time.UTC) }})
	if code != exitDenied || !strings.Contains(buf.String(), "expired") {
		t.Errorf("expired waiver: %d\n%s", code, buf.String())
	}
}

// The CLI says when the plan's provider decides with other policies.
func TestPolicyCheck_NotesProviderPolicyPaths(t *testing.T) {
	dir := t.TempDir()
	var p map[string]any
	_ = json.Unmarshal([]byte(plan("x", nil)), &p)
	p["configuration"] = map[string]any{"provider_config": map[string]any{"sandboxio": map[string]any{
		"name": "sandboxio", "expressions": map[string]any{"policy_paths": map[string]any{"constant_value": []any{"./policies"}}},
	}}}
	b, _ := json.Marshal(p)
	f := writeFile(t, dir, "plan.json", string(b))
	if _, _, errOut := cli(t, "", "policy", "check", f); !strings.Contains(errOut, "policy_paths = [./policies]") {
		t.Errorf("no note about the provider's policy_paths: %q", errOut)
	}
}

func TestPolicyTest(t *testing.T) {
	examples := filepath.Join("..", "..", "examples", "policies")
	code, out, errOut := cli(t, "", "policy", "test", examples)
	if code != exitOK || !strings.Contains(out, "PASS  team.memory_test.test_over_team_ceiling_refused") ||
		!strings.Contains(out, "PASS  sandboxio.network_test.") || !strings.Contains(out, "examples/policies/registries.rego") ||
		!strings.Contains(out, "0 failed") {
		t.Fatalf("policy test examples: %d\n%s\n%s", code, out, errOut)
	}
	// The repository's bundle directory replaces the embedded one.
	code, out, _ = cli(t, "", "policy", "test", "--run", "network", filepath.Join("..", "..", "policies"))
	if code != exitOK || !strings.Contains(out, "built-in bundle: ../../policies") || strings.Contains(out, "timeouts_test") {
		t.Fatalf("policy test policies --run network: %d\n%s", code, out)
	}

	dir := t.TempDir()
	writeFile(t, dir, "failing/p.rego", "package team.p\n\ndeny contains \"no\" if input.kind == \"template\"\n")
	writeFile(t, dir, "failing/p_test.rego", "package team.p_test\n\nimport data.team.p\n\ntest_wrong if {\n\tprint(\"denies:\", p.deny)\n\tcount(p.deny) == 0 with input as {\"kind\": \"template\"}\n}\n")
	code, out, _ = cli(t, "", "policy", "test", "--run", "team", filepath.Join(dir, "failing"))
	if code != exitDenied || !strings.Contains(out, "FAIL  team.p_test.test_wrong") || !strings.Contains(out, "1 failed") {
		t.Fatalf("failing team test: %d\n%s", code, out)
	}
	writeFile(t, dir, "broken/p.rego", "package team.p\n\ndeny contains x if {\n")
	if code, _, errOut := cli(t, "", "policy", "test", filepath.Join(dir, "broken")); code != exitUsage || !strings.Contains(errOut, "does not parse") {
		t.Fatalf("broken team policy: %d %s", code, errOut)
	}
	writeFile(t, dir, "reserved/p.rego", "package sandboxio.network\n\nx := 1\n")
	if code, _, errOut := cli(t, "", "policy", "test", filepath.Join(dir, "reserved")); code != exitUsage || !strings.Contains(errOut, "reserved") {
		t.Fatalf("team policy in the reserved namespace: %d %s", code, errOut)
	}
	code, out, _ = cli(t, "", "policy", "test", "--format", "json", "--threshold", "100", examples)
	var res struct {
		Passed   bool    `json:"passed"`
		Coverage float64 `json:"coverage"`
		Tests    []struct{ Outcome string }
	}
	if code != exitOK || json.Unmarshal([]byte(out), &res) != nil || !res.Passed || res.Coverage != 100 || len(res.Tests) < 100 {
		t.Fatalf("policy test --format json: %d %s", code, out)
	}
	if code, _, _ := cli(t, "", "policy", "test", "--run", "(", examples); code != exitUsage {
		t.Fatalf("bad --run accepted: %d", code)
	}
}

// The catalogue guide is generated: go generate writes this output to
// templates/guides/policies.md.tmpl, which tfplugindocs renders to
// docs/guides/policies.md, and make docs-check fails on drift. Checking
// here too catches it in go test.
func TestPolicyDocs_MatchesCommittedCatalogue(t *testing.T) {
	code, out, errOut := cli(t, "", "policy", "docs")
	if code != exitOK {
		t.Fatalf("policy docs: %d %s", code, errOut)
	}
	committed, err := os.ReadFile(filepath.Join("..", "..", "templates", "guides", "policies.md.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	if out != string(committed) {
		t.Fatal("templates/guides/policies.md.tmpl is stale: run go generate ./...")
	}
	for _, want := range []string{"### SBX-NET-003", "How to fix:", "(policy-input.md)", "### SBX-DSN-003", "## Team policies"} {
		if !strings.Contains(out, want) {
			t.Errorf("catalogue lacks %q", want)
		}
	}
	code, out, _ = cli(t, "", "policy", "docs", "--policy", filepath.Join("..", "..", "examples", "policies"))
	if code != exitOK || !strings.Contains(out, "### TEAM-IMG-001") || !strings.Contains(out, "soft-mandatory, team rule, severity high") {
		t.Fatalf("catalogue with team rules: %d", code)
	}
}
