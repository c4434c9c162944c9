package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	dockertest "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/docker"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
	"github.com/sandboxio/terraform-provider-sandboxio/sandbox/docker"
)

// poolSpecFile writes a template spec that declares a warm pool, labelled
// test=name, and returns its path and digest.
func poolSpecFile(t testing.TB, name string, wp model.WarmPool) (string, string) {
	t.Helper()
	return templateSpecFile(t, name, &wp)
}

// templateSpecFile writes the template spec of poolSpecFile, with the warm
// pool wp (none when nil).
func templateSpecFile(t testing.TB, name string, wp *model.WarmPool) (string, string) {
	t.Helper()
	timeout, lifetime, disk := int64(30), int64(120), int64(64)
	tpl := inputs.Template{
		Name: "cli-pool", Backend: "docker://", Image: docker.LocalImage,
		TimeoutSeconds: &timeout, LifetimeSeconds: &lifetime,
		Caps:     model.CapsRequest{DiskMB: &disk},
		Labels:   map[string]string{"test_run": runID, "test": name},
		WarmPool: wp,
	}
	spec, _, err := tpl.Build("")
	if err != nil {
		t.Fatal(err)
	}
	b, sum, err := spec.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "template.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p, sum
}

// With a template spec that declares warm_pool, sandboxio mcp keeps the
// pool while it serves: the warm sandboxes are on the daemon next to the
// session's. SIGTERM ends the server (exit 130) and leaves nothing: the
// session's sandbox and every warm one are removed before it exits, and
// stderr says the pool was drained.
func TestMCP_WarmPoolDrainedOnSIGTERM(t *testing.T) {
	needDocker(t)
	name := "mcp-pool-" + runID
	session := "mcp-pool-" + runID
	spec, sum := poolSpecFile(t, name, model.WarmPool{Size: 2, MaxIdleSeconds: 120})
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	cs, cmd, stderr := startMCP(t, nil, "--spec", spec, "--spec-sha256", sum, "--tenant", "acme", "--session", session, "--audit", audit)
	if _, text := callText(t, cs, "run", map[string]any{"command": []string{"echo", "up"}}); !strings.Contains(text, "up") {
		t.Fatalf("run: %s", text)
	}
	label := "test=" + name
	for deadline := time.Now().Add(90 * time.Second); countLabelled(t, label, "sandboxio.pool=warm") < 2; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the server keeps no warm pool: %d warm sandboxes\n%s", countLabelled(t, label, "sandboxio.pool=warm"), stderr)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Minute); !strings.Contains(stderr.String(), "interrupted"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no exit after SIGTERM:\n%s", stderr)
		}
	}
	_ = cs.Close()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != exitInterrupted {
		t.Errorf("exit after SIGTERM: %v, want %d\n%s", cmd.ProcessState, exitInterrupted, stderr)
	}
	if !strings.Contains(stderr.String(), "the warm pool was drained") {
		t.Errorf("stderr does not say the pool was drained:\n%s", stderr)
	}
	// Drained before the server exited: none runs, none is kept.
	if n := dockertest.Left(t, label); n != 0 {
		t.Fatalf("%d containers left after the server exited", n)
	}
	checkClosedRecord(t, audit, "cancelled")
}

// waitWarm waits until the pool labelled label is full: the server says so
// (its progress line, written once the last warm sandbox is ready for a
// claim, which is after the daemon shows it) and the daemon holds its n warm
// sandboxes. The pool is observed filled, not assumed after a sleep.
func waitWarm(t *testing.T, label string, n int, stderr *lockedBuffer) {
	t.Helper()
	ready := fmt.Sprintf("%d of %d sandboxes ready", n, n)
	for deadline := time.Now().Add(90 * time.Second); !strings.Contains(stderr.String(), ready); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the pool was not filled: %d of %d warm sandboxes\n%s", countLabelled(t, label, "sandboxio.pool=warm"), n, stderr)
		}
	}
	if got := countLabelled(t, label, "sandboxio.pool=warm"); got != n {
		t.Fatalf("the server says its pool is full, the daemon holds %d warm sandboxes of it, want %d\n%s", got, n, stderr)
	}
}

// openRecords returns the audit records of the sandboxes opened (event
// created, op open).
func openRecords(t *testing.T, audit string) []map[string]any {
	t.Helper()
	if _, err := os.Stat(audit); os.IsNotExist(err) {
		return nil
	}
	var out []map[string]any
	for _, r := range auditLines(t, audit) {
		if r["event"] == "created" && r["op"] == "open" {
			out = append(out, r)
		}
	}
	return out
}

// listDocker lists the sandboxes carrying labels as the docker backend
// (and so `sandboxio reap`) sees them.
func listDocker(t *testing.T, labels map[string]string) []backends.Info {
	t.Helper()
	d, err := backends.ParseDSN("docker://")
	if err != nil {
		t.Fatal(err)
	}
	r, _ := backends.Registered(d.Scheme)
	b, err := r.Open(d)
	if err != nil {
		t.Fatal(err)
	}
	infos, err := b.List(t.Context(), labels)
	if err != nil {
		t.Fatal(err)
	}
	return infos
}

// The session's sandbox is not opened when the server starts but at the
// first tool call, so that a warm pool filled meanwhile serves it: with the
// pool observed full on the daemon and no sandbox of the session there, the
// first call is answered from a claimed warm sandbox. The audit record of
// the open says source pool with its claim latency; the command ran in that
// sandbox (the exec record names it); and the daemon binds it to the tenant
// and session (a list by both finds it, bound by its name).
func TestMCP_FirstCallClaimsFromThePool(t *testing.T) {
	needDocker(t)
	name := "mcp-claim-" + runID
	session := "mcp-claim-" + runID
	spec, sum := poolSpecFile(t, name, model.WarmPool{Size: 2, MaxIdleSeconds: 120})
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	cs, cmd, stderr := startMCP(t, nil, "--spec", spec, "--spec-sha256", sum, "--tenant", "acme", "--session", session, "--audit", audit)
	label := "test=" + name
	waitWarm(t, label, 2, stderr)
	if n := countLabelled(t, label); n != 2 {
		t.Fatalf("%d containers of the template with the pool full, want its 2 warm ones only: a sandbox was opened before any call\n%s", n, stderr)
	}
	if recs := openRecords(t, audit); len(recs) != 0 {
		t.Fatalf("a sandbox was opened before any tool call: %v", recs)
	}
	if res, text := callText(t, cs, "run", map[string]any{"command": []string{"echo", "from-the-pool"}}); res.IsError || !strings.Contains(text, "from-the-pool") {
		t.Fatalf("run: %s\n%s", text, stderr)
	}
	recs := openRecords(t, audit)
	if len(recs) != 1 {
		t.Fatalf("%d open records, want 1: %v", len(recs), recs)
	}
	r := recs[0]
	if r["source"] != "pool" || r["claim_ms"] == nil || r["tenant_id"] != "acme" || r["session_id"] != session {
		raw, _ := os.ReadFile(audit)
		t.Fatalf("the open did not come from the pool for tenant acme: %v\n%s\n%s", r, stderr, raw)
	}
	id, _ := r["sandbox_id"].(string)
	ran := false
	for _, x := range auditLines(t, audit) {
		if x["event"] == "exec" && x["op"] == "run" && x["sandbox_id"] == id && x["tenant_id"] == "acme" {
			ran = true
		}
	}
	if !ran {
		t.Errorf("no exec record of the command in sandbox %s", id)
	}
	infos := listDocker(t, map[string]string{model.LabelTenantID: "acme", model.LabelSessionID: session, "test": name})
	if len(infos) != 1 || infos[0].ID != id {
		t.Fatalf("a list by tenant and session finds %v, want sandbox %s", infos, id)
	}
	if err := cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != exitOK {
		t.Fatalf("exit %v, want 0\n%s", cmd.ProcessState, stderr)
	}
	if n := dockertest.Left(t, label); n != 0 {
		t.Fatalf("%d containers left after the server exited", n)
	}
	checkClosedRecord(t, audit, "closed")
}

// Without a pool the first call opens the sandbox cold; until then nothing
// is on the daemon. Concurrent first calls open exactly one sandbox, and
// every call runs in it. The instructions, sent before any open, say what
// the policy decided.
func TestMCP_ConcurrentFirstCallsOpenOneColdSandbox(t *testing.T) {
	needDocker(t)
	session := "mcp-lazy-" + runID
	spec, sum := specFile(t, "acme", session)
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	cs, cmd, stderr := startMCP(t, nil, "--spec", spec, "--spec-sha256", sum, "--tenant", "acme", "--session", session, "--audit", audit)
	label := "sandboxio.session_id=" + session
	if n := countLabelled(t, label); n != 0 {
		t.Fatalf("%d containers for the session before any tool call, want 0", n)
	}
	in := cs.InitializeResult().Instructions
	for _, want := range []string{`tenant "acme" session "` + session + `"`, "docker backend", "isolation tier CONTAINER", "Network egress: deny", "bounded by 30s", "opened at the first call"} {
		if !strings.Contains(in, want) {
			t.Errorf("the instructions lack %q:\n%s", want, in)
		}
	}
	const calls = 4
	var wg sync.WaitGroup
	texts := make([]string, calls)
	for i := range calls {
		wg.Go(func() {
			res, text := callText(t, cs, "run", map[string]any{"command": []string{"echo", fmt.Sprintf("call-%d", i)}})
			if res.IsError {
				text = "error: " + text
			}
			texts[i] = text
		})
	}
	wg.Wait()
	for i, text := range texts {
		if !strings.Contains(text, fmt.Sprintf("call-%d", i)) {
			t.Errorf("call %d: %s", i, text)
		}
	}
	recs := openRecords(t, audit)
	if len(recs) != 1 || recs[0]["source"] != "cold" || recs[0]["claim_ms"] != nil {
		t.Fatalf("open records %v, want one cold open\n%s", recs, stderr)
	}
	ids := map[any]int{}
	for _, x := range auditLines(t, audit) {
		if x["event"] == "exec" {
			ids[x["sandbox_id"]]++
		}
	}
	if len(ids) != 1 || ids[recs[0]["sandbox_id"]] != calls {
		t.Errorf("the calls ran in %v, want all %d in %v", ids, calls, recs[0]["sandbox_id"])
	}
	if n := countLabelled(t, label); n != 1 {
		t.Errorf("%d containers for the session, want 1", n)
	}
	_ = cs.Close()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != exitOK {
		t.Fatalf("exit %v, want 0\n%s", cmd.ProcessState, stderr)
	}
	waitGone(t, label)
	checkClosedRecord(t, audit, "closed")
}

// A session that ends before any tool call, by the client disconnecting or
// by SIGTERM, leaves nothing: no sandbox was opened for it (no open record),
// and the pool's warm sandboxes are removed before the server exits.
func TestMCP_SessionEndedBeforeAnyCallLeavesNothing(t *testing.T) {
	needDocker(t)
	for _, how := range []string{"disconnect", "sigterm"} {
		t.Run(how, func(t *testing.T) {
			name := "mcp-none-" + how + "-" + runID
			spec, sum := poolSpecFile(t, name, model.WarmPool{Size: 2, MaxIdleSeconds: 120})
			audit := filepath.Join(t.TempDir(), "audit.jsonl")
			cs, cmd, stderr := startMCP(t, nil, "--spec", spec, "--spec-sha256", sum, "--tenant", "acme", "--session", name, "--audit", audit)
			label := "test=" + name
			waitWarm(t, label, 2, stderr)
			want := exitOK
			if how == "sigterm" {
				want = exitInterrupted
				if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				for deadline := time.Now().Add(2 * time.Minute); !strings.Contains(stderr.String(), "interrupted"); time.Sleep(50 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("no exit after SIGTERM:\n%s", stderr)
					}
				}
			}
			_ = cs.Close()
			if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != want {
				t.Fatalf("exit %v, want %d\n%s", cmd.ProcessState, want, stderr)
			}
			if n := dockertest.Left(t, label); n != 0 {
				t.Fatalf("%d containers left after the server exited", n)
			}
			if recs := openRecords(t, audit); len(recs) != 0 {
				t.Fatalf("a sandbox was opened for a session that made no call: %v", recs)
			}
			for _, w := range []string{"the warm pool was drained", "no sandbox was opened"} {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
		})
	}
}

// A failure only the open can find (here: the Docker daemon cannot be
// reached) is the first tool call's error, with its class and fix, and
// audited; the server exits with the class's code when the client leaves.
func TestMCP_BackendDownIsTheFirstCallsError(t *testing.T) {
	session := "mcp-down-" + runID
	spec, sum := specFile(t, "acme", session)
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	cs, cmd, stderr := startMCP(t, []string{"DOCKER_HOST=unix:///nonexistent/sandboxio-test.sock"},
		"--spec", spec, "--spec-sha256", sum, "--tenant", "acme", "--session", session, "--audit", audit)
	res, text := callText(t, cs, "run", map[string]any{"command": []string{"echo", "up"}})
	info, _ := res.StructuredContent.(map[string]any)["error"].(map[string]any)
	if !res.IsError || !strings.HasPrefix(text, "BackendError") || info["class"] != "BackendError" || info["message"] == "" {
		t.Fatalf("first call with the daemon down: %v %s %v\n%s", res.IsError, text, res.StructuredContent, stderr)
	}
	t.Logf("the first call's error: %s (fix: %v)", text, info["fix"])
	var failed bool
	for _, r := range auditLines(t, audit) {
		failed = failed || (r["op"] == "open" && r["sandbox_id"] == nil && r["error"] != nil)
	}
	if !failed {
		t.Errorf("the failed open is not audited")
	}
	_ = cs.Close()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != exitBackend {
		t.Fatalf("exit %v, want %d\n%s", cmd.ProcessState, exitBackend, stderr)
	}
}
