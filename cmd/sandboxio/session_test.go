package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	dockertest "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/docker"
)

// cliProc is the CLI run as a separate process: this test binary, turned
// into the CLI by TestMain.
type cliProc struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	errOut strings.Builder
	exited chan struct{}
	code   int
}

func (p *cliProc) stderrText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.errOut.String()
}

// startCLIProc starts the CLI with env added to this process's environment
// (later entries win).
func startCLIProc(t *testing.T, env []string, args ...string) *cliProc {
	t.Helper()
	return startCLIProcUnder(t, nil, env, args...)
}

// startCLIProcUnder starts the CLI as startCLIProc does, run by the command
// wrapper (such as unshare) when it is not empty.
func startCLIProcUnder(t *testing.T, wrapper, env []string, args ...string) *cliProc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	argv := append(append(append([]string{}, wrapper...), exe), args...)
	p := &cliProc{cmd: exec.Command(argv[0], argv[1:]...), exited: make(chan struct{})}
	p.cmd.Env = append(append(os.Environ(), cliChildEnv+"=1", "SANDBOXIO_TEST_RUN_ID="+runID), env...)
	pipe, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			p.mu.Lock()
			p.errOut.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
		err := p.cmd.Wait()
		var ee *exec.ExitError
		if err == nil || errors.As(err, &ee) {
			p.code = p.cmd.ProcessState.ExitCode()
		} else {
			p.code = -1
		}
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// Three `sandboxio run` processes for the same tenant and session at once:
// one gets the sandbox, the other two are refused (exit 64, ConfigurationError
// SBX-RUN-005 naming the tenant and session) and exactly one container
// exists. The daemon decides: the processes share nothing else.
func TestOneSandboxPerSessionAcrossProcesses(t *testing.T) {
	needDocker(t)
	session := "procs-" + runID
	spec, sum := specFile(t, "acme", session)
	var procs []*cliProc
	for range 3 {
		procs = append(procs, startCLIProc(t, nil, "run", "--spec", spec, "--spec-sha256", sum, "--tenant", "acme", "--session", session,
			"--", "sleep", "25"))
	}
	// Two are refused and exit; the third holds the sandbox.
	deadline := time.After(90 * time.Second)
	var refused []*cliProc
	var winner *cliProc
	for len(refused) < 2 {
		if n := countLabelled(t, "test_run="+runID, "sandboxio.session_id="+session); n > 1 {
			t.Fatalf("%d containers for the session, want at most 1", n)
		}
		select {
		case <-procs[0].exited:
		case <-procs[1].exited:
		case <-procs[2].exited:
		case <-deadline:
			t.Fatal("fewer than two of the three CLIs were refused within 90s")
		case <-time.After(100 * time.Millisecond):
		}
		refused, winner = nil, nil
		for _, p := range procs {
			select {
			case <-p.exited:
				refused = append(refused, p)
			default:
				winner = p
			}
		}
		if len(refused) == 3 {
			for _, p := range procs {
				t.Logf("exit %d:\n%s", p.code, p.stderrText())
			}
			t.Fatal("all three CLIs exited")
		}
	}
	for _, p := range refused {
		if p.code != exitConfiguration || !strings.Contains(p.stderrText(), "ConfigurationError") ||
			!strings.Contains(p.stderrText(), "SBX-RUN-005") || !strings.Contains(p.stderrText(), `tenant "acme" session "`+session+`"`) {
			t.Errorf("refused CLI: exit %d, want %d with SBX-RUN-005 naming the tenant and session:\n%s", p.code, exitConfiguration, p.stderrText())
		}
	}
	// The winner's sandbox is up (its command runs for 25s, within the
	// spec's 30s timeout), and it is the only one.
	for n := 0; n != 1; {
		n = countLabelled(t, "test_run="+runID, "sandboxio.session_id="+session)
		select {
		case <-winner.exited:
			t.Fatalf("the CLI that got the sandbox exited (%d):\n%s", winner.code, winner.stderrText())
		default:
		}
		if n > 1 {
			t.Fatalf("%d containers for the session, want 1", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Interrupted, the winner removes its sandbox.
	if err := winner.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-winner.exited:
	case <-time.After(60 * time.Second):
		t.Fatal("the CLI did not exit on SIGTERM")
	}
	if winner.code != exitInterrupted {
		t.Errorf("interrupted CLI: exit %d, want %d:\n%s", winner.code, exitInterrupted, winner.stderrText())
	}
	if n := dockertest.Left(t, "test_run="+runID, "sandboxio.session_id="+session); n != 0 {
		t.Fatalf("%d containers left", n)
	}
}

// A CLI killed with SIGKILL cannot write its own last audit record; its
// watcher (a separate process, in its own session) removes the sandbox and
// appends the final record to the same audit file: event orphaned, op
// watch, the sandbox id of the created record, the tenant and session, and
// no secret value.
func TestSIGKILLedCLILeavesAuditTrail(t *testing.T) {
	needDocker(t)
	session := "killed-" + runID
	spec, sum := specFile(t, "acme", session, func(x *inputs.Template) { x.SecretNames = []string{"SANDBOXIO_TEST_TOKEN"} })
	canary := "CANARY-tr41l-" + runID
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	p := startCLIProc(t, []string{"SANDBOXIO_TEST_TOKEN=" + canary, "SANDBOXIO_DOCKER_REAPER_GRACE=100ms"},
		"run", "--spec", spec, "--spec-sha256", sum, "--tenant", "acme", "--session", session, "--audit", audit, "--quiet", "--", "sleep", "25")

	records := func() []map[string]any {
		b, err := os.ReadFile(audit)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(canary)) {
			t.Fatalf("the secret is in the audit file:\n%s", b)
		}
		var out []map[string]any
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if l == "" {
				continue
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("audit line is not JSON: %v\n%s", err, l)
			}
			out = append(out, m)
		}
		return out
	}
	find := func(event, op string, d time.Duration) map[string]any {
		t.Helper()
		deadline := time.Now().Add(d)
		for {
			for _, r := range records() {
				if r["event"] == event && r["op"] == op {
					return r
				}
			}
			if time.Now().After(deadline) {
				b, _ := os.ReadFile(audit)
				t.Fatalf("no %s/%s record within %s:\n%s\nCLI stderr:\n%s", event, op, d, b, p.stderrText())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	created := find("created", "open", 60*time.Second)
	id, _ := created["sandbox_id"].(string)
	if id == "" {
		t.Fatalf("created record without a sandbox id: %v", created)
	}
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.exited

	final := find("orphaned", "watch", 60*time.Second)
	if final["sandbox_id"] != id || final["tenant_id"] != "acme" || final["session_id"] != session ||
		!strings.Contains(fmt.Sprint(final["reason"]), "owner gone") || final["spec_sha256"] != sum {
		t.Fatalf("final record: %v", final)
	}
	if ts, err := time.Parse(time.RFC3339Nano, fmt.Sprint(final["time"])); err != nil || time.Since(ts) > time.Minute {
		t.Fatalf("final record's time %v: %v", final["time"], err)
	}
	if recs := records(); len(recs) != 2 {
		t.Fatalf("want the created and the final record, got %d: %v", len(recs), recs)
	}
	if n := dockertest.Left(t, "test_run="+runID, "sandboxio.session_id="+session); n != 0 {
		t.Fatalf("%d containers left after the watcher", n)
	}
}
