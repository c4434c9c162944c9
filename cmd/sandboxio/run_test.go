package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/analysers"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/testing/tools"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	dockertest "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/docker"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

func TestRunCLI_UsageErrors(t *testing.T) {
	spec, _ := specFile(t, "acme", "s-1")
	code := writeFile(t, t.TempDir(), "prog.txt", "echo hi")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--tenant", "acme", "--session", "s-1", "--", "true"}, "--spec is required"},
		{[]string{"run", "--spec", spec, "--session", "s-1", "--", "true"}, "--tenant and --session are required"},
		{[]string{"run", "--spec", spec, "--tenant", "acme", "--session", "s-1"}, "no command"},
		{[]string{"run", "--spec", spec, "--tenant", "acme", "--session", "s-1", "--timeout", "-1s", "--", "true"}, "--timeout must be positive"},
		{[]string{"run", "--spec", "-", "--stdin", "--tenant", "acme", "--session", "s-1", "--", "cat"}, "cannot both read standard input"},
		{[]string{"run", "--spec", filepath.Join(t.TempDir(), "missing.json"), "--tenant", "acme", "--session", "s-1", "--", "true"}, "read spec"},
		{[]string{"run", "--spec", spec, "--tenant", "acme", "--session", "s-1", "sh", "-c", "true"}, "flag provided but not defined: -c"},
		{[]string{"run-code", "--spec", spec, "--tenant", "acme", "--session", "s-1", code}, "pass --lang"},
		{[]string{"run-code", "--spec", spec, "--tenant", "acme", "--session", "s-1"}, "want exactly one CODE_FILE"},
		{[]string{"reap", "extra"}, "unexpected argument"},
	} {
		got, out, errOut := cli(t, "", tc.args...)
		if got != exitUsage || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, got, out, errOut, tc.want)
		}
	}
}

// Refusals need no daemon: they happen before anything is provisioned, and
// exit with their class's code, the class first on stderr.
func TestRunCLI_RefusalsExitWithTheirClass(t *testing.T) {
	spec, sum := specFile(t, "acme", "s-1")
	data, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	edited := writeFile(t, t.TempDir(), "edited.json", strings.Replace(string(data), `"memory_mb":512`, `"memory_mb":9999`, 1))
	allow := writeFile(t, t.TempDir(), "allow.json", strings.Replace(string(data), `"allow":[]`, `"allow":["10.0.0.0/8"]`, 1))
	// Every registered backend can provision in this build, so the refusal
	// before any call is a cloud backend's missing credentials.
	noCreds, _ := specFile(t, "acme", "s-1", func(x *inputs.Template) { x.Backend = "modal://agents"; x.Caps = model.CapsRequest{} })
	t.Setenv("MODAL_TOKEN_ID", "")
	t.Setenv("MODAL_TOKEN_SECRET", "")
	secret, _ := specFile(t, "acme", "s-1", func(x *inputs.Template) { x.SecretNames = []string{"SANDBOXIO_TEST_NEVER_SET"} })
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"run", "--spec", edited, "--spec-sha256", sum, "--tenant", "acme", "--session", "s-1", "--audit", audit, "--", "true"}, exitConfiguration,
			"sandboxio run: ConfigurationError: the spec does not match its sha256"},
		{[]string{"run", "--spec", spec, "--spec-sha256", sum, "--tenant", "globex", "--session", "s-1", "--audit", audit, "--", "true"}, exitConfiguration,
			"sandboxio run: ConfigurationError: the spec was rendered for tenant \"acme\""},
		{[]string{"run", "--spec", allow, "--tenant", "acme", "--session", "s-1", "--audit", audit, "--", "true"}, exitCapability,
			"sandboxio run: CapabilityNotSupported: "},
		{[]string{"run", "--spec", noCreds, "--tenant", "acme", "--session", "s-1", "--audit", audit, "--", "true"}, exitConfiguration,
			"no Modal credentials: MODAL_TOKEN_ID and MODAL_TOKEN_SECRET must both be set"},
		{[]string{"run-code", "--spec", secret, "--tenant", "acme", "--session", "s-1", "--lang", "sh", "--audit", audit, "-"}, exitConfiguration,
			`secret "SANDBOXIO_TEST_NEVER_SET", named in the spec's secret_names, is not set in the environment [SBX-RUN-001, attribute secret_names]`},
	} {
		got, out, errOut := cli(t, "echo hi", tc.args...)
		if got != tc.code || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d and %q", tc.args, got, out, errOut, tc.code, tc.want)
		}
	}
	recs := auditLines(t, audit)
	if len(recs) != 4 {
		t.Fatalf("want 4 refused records (the missing secret is refused before a client exists), got %d", len(recs))
	}
	for _, r := range recs {
		if r["event"] != "refused" || r["sandbox_id"] != nil {
			t.Fatalf("record: %v", r)
		}
	}
}

func auditLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("audit line: %v: %s", err, sc.Text())
		}
		out = append(out, m)
	}
	return out
}

// Against the daemon: the command's exit code and output pass through; a
// timeout, a cap and an expired sandbox exit with their own codes; every
// sandbox is gone afterwards.
func TestRunCLI_Docker(t *testing.T) {
	needDocker(t)
	// The hook warns on stderr when shellcheck is missing, and stderr is compared.
	tools.NeedAnalysers(t, analysers.ShellCheck)
	spec, sum := specFile(t, "acme", "cli")
	// Long enough for a create on a loaded host (timeout_seconds bounds the
	// create too, and a slow one would be CreateTimeout, not what this tests).
	short := int64(5)
	expiring, _ := specFile(t, "acme", "cli", func(x *inputs.Template) { x.TimeoutSeconds = &short; x.LifetimeSeconds = &short })
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	base := []string{"--spec", spec, "--spec-sha256", sum, "--tenant", "acme", "--session", "cli", "--audit", audit}
	runArgs := func(extra ...string) []string { return append(append([]string{"run"}, base...), extra...) }
	for _, tc := range []struct {
		name          string
		stdin         string
		args          []string
		code          int
		stdout, class string
	}{
		{"exit code passes through", "", runArgs("--", "sh", "-c", "echo out; echo err >&2; exit 7"), 7, "out\n", ""},
		{"env and workdir", "", runArgs("--env", "GREETING=hi", "--workdir", "/work", "--", "sh", "-c", `echo "$GREETING from $(pwd)"`), 0, "hi from /work\n", ""},
		{"stdin passes through", "piped\n", runArgs("--stdin", "--", "cat"), 0, "piped\n", ""},
		{"run-code from standard input", "echo code; exit 5", append(append([]string{"run-code"}, base...), "--lang", "sh", "-"), 5, "code\n", ""},
		// What the command printed before its timeout was streamed already.
		// --timeout bounds the create too (each call on its own), so it
		// leaves room for a create on a busy host: a tighter one tests the
		// host's speed, and gets CreateTimeout (66), not what this tests.
		{"timeout", "", runArgs("--quiet", "--timeout", callBudget, "--", "sh", "-c", "echo partial; sleep 60"), exitExecTimeout, "partial\n", "ExecutionTimeout"},
		{"disk cap", "", runArgs("--", "dd", "if=/dev/zero", "of=/tmp/fill", "bs=1M", "count=512"), exitLimit, "", "ResourceLimitExceeded(disk)"},
		// The command inherits timeout_seconds (no --timeout can exceed
		// it), equal to the lifetime, and starts after the lifetime did.
		{"lifetime", "", []string{"run", "--spec", expiring, "--tenant", "acme", "--session", "cli", "--audit", audit, "--", "sleep", "30"},
			exitGone, "", "SandboxGone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := cli(t, tc.stdin, tc.args...)
			if code != tc.code || out != tc.stdout {
				t.Fatalf("exit %d, stdout %q, stderr %q; want %d and %q", code, out, errOut, tc.code, tc.stdout)
			}
			if tc.class != "" && !strings.Contains(errOut, ": "+tc.class+": ") {
				t.Fatalf("stderr does not name %s: %q", tc.class, errOut)
			}
			if tc.class == "" && tc.code == 7 && errOut != "sandboxio: starting docker sandbox (CONTAINER, image sandboxio/busybox:local, runtime runc) for tenant acme session cli …\nerr\n" {
				t.Fatalf("stderr: %q", errOut)
			}
		})
	}
	var events []string
	for _, r := range auditLines(t, audit) {
		events = append(events, r["event"].(string))
	}
	want := "created exec killed created exec killed created exec killed created exec killed " +
		"created timeout killed created limit_exceeded killed created expired killed"
	if got := strings.Join(events, " "); got != want {
		t.Fatalf("audit events:\n got %s\nwant %s", got, want)
	}
	if n := dockertest.Left(t, "test_run="+runID, "sandboxio.session_id=cli"); n != 0 {
		t.Fatalf("%d containers left", n)
	}
	code, out, errOut := cli(t, "", "reap", "--dry-run", "--label", "test_run="+runID)
	if code != exitOK || out != "" || !strings.Contains(errOut, "nothing to reap") {
		t.Fatalf("reap --dry-run: %d %q %q", code, out, errOut)
	}
}

// Ctrl-C (SIGINT) in the middle of a command: the sandbox is removed at once
// and the CLI exits 130.
func TestRunCLI_InterruptRemovesTheSandbox(t *testing.T) {
	needDocker(t)
	spec, sum := specFile(t, "acme", "interrupted")
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	child := startCLI(t, "run", "--spec", spec, "--spec-sha256", sum, "--tenant", "acme", "--session", "interrupted", "--audit", audit,
		"--", "sh", "-c", "echo started >/work/mark; sleep 60")
	child.waitFor(t, "starting docker sandbox")
	// Until the command runs: the exec record is written when it ends, so
	// wait for the container instead.
	deadline := time.Now().Add(20 * time.Second)
	for countLabelled(t, "test_run="+runID, "sandboxio.session_id=interrupted") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no sandbox appeared")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	if err := child.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	code, stderr := child.wait(t, 15*time.Second)
	if code != exitInterrupted || !strings.Contains(stderr, "interrupted; the sandbox was removed") {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if n := dockertest.Left(t, "test_run="+runID, "sandboxio.session_id=interrupted"); n != 0 {
		t.Fatalf("%d containers left after the interrupt", n)
	}
	var events []string
	for _, r := range auditLines(t, audit) {
		events = append(events, r["event"].(string)+"/"+fmt.Sprint(r["reason"]))
	}
	if got := strings.Join(events, " "); !strings.Contains(got, "killed/cancelled") {
		t.Fatalf("audit events: %s", got)
	}
}
