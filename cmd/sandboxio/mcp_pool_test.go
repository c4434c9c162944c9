package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
	"github.com/sandboxio/terraform-provider-sandboxio/sandbox"
)

// poolSpecFile writes a template spec that declares a warm pool, labelled
// test=name, and returns its path and digest.
func poolSpecFile(t *testing.T, name string, wp model.WarmPool) (string, string) {
	t.Helper()
	timeout, lifetime, disk := int64(30), int64(120), int64(64)
	tpl := inputs.Template{
		Name: "cli-pool", Backend: "docker://", Image: sandbox.LocalImage,
		TimeoutSeconds: &timeout, LifetimeSeconds: &lifetime,
		Caps:     model.CapsRequest{DiskMB: &disk},
		Labels:   map[string]string{"test_run": runID, "test": name},
		WarmPool: &wp,
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
	// Removed before the server exited: nothing to wait for.
	if n := countLabelled(t, label); n != 0 {
		t.Fatalf("%d containers left after the server exited", n)
	}
	checkClosedRecord(t, audit, "cancelled")
}
