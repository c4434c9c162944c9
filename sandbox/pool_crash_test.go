package sandbox

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"

	dockertest "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/docker"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// poolChildEnv turns the test binary into a process that keeps a warm pool
// of the template spec in the named file, claims one sandbox from it, waits
// for the pool to refill, prints "ready ID" and waits to be killed.
const poolChildEnv = "SANDBOXIO_TEST_POOL_CHILD"

// poolChildSessionEnv is the session the child opens for tenant acme.
const poolChildSessionEnv = "SANDBOXIO_TEST_POOL_SESSION"

func poolChild(path string) int { //nolint:unparam // an exit code: the child fails with 2 or blocks until killed
	ctx := context.Background()
	spec, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	c, err := New(ctx, Config{Pools: []PoolConfig{{Spec: spec, Size: 2, MaxIdle: time.Minute}}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ready := func() bool {
		for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if st := c.PoolStats()[0]; st.Ready == 2 && st.Creating == 0 {
				return true
			}
		}
		fmt.Fprintf(os.Stderr, "pool not ready: %+v\n", c.PoolStats())
		return false
	}
	if !ready() {
		return 2
	}
	sb, err := c.Open(ctx, Request{Spec: spec, TenantID: "acme", SessionID: os.Getenv(poolChildSessionEnv)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if !ready() {
		return 2
	}
	fmt.Printf("ready %s\n", sb.ID())
	select {}
}

// startPoolChild starts a pool child (see poolChild) whose owner watcher
// waits grace after its death, waits until it has claimed a sandbox and
// refilled, checks that the daemon holds its three sandboxes (labelled for
// the test), and returns the claimed sandbox's id and a kill (SIGKILL).
func startPoolChild(t *testing.T, cli *client.Client, grace time.Duration) (string, func()) {
	t.Helper()
	spec, _ := canonical(t, template(t))
	path := filepath.Join(t.TempDir(), "spec.json")
	if err := os.WriteFile(path, spec, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), poolChildEnv+"="+path, dockertest.RunIDEnv+"="+runID,
		"SANDBOXIO_DOCKER_REAPER_GRACE="+grace.String(), poolChildSessionEnv+"="+labelSafe(t.Name()))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	kill := func() {
		if !killed {
			killed = true
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}
	t.Cleanup(kill)
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
	}()
	var claimed string
	select {
	case l := <-line:
		claimed = strings.TrimPrefix(l, "ready ")
	case <-time.After(150 * time.Second):
	}
	if claimed == "" {
		kill() // and wait for it: its stderr is complete
		t.Fatalf("the child did not get ready:\n%s", stderr.String())
	}
	if n := countLabelled(t, cli, "test="+labelSafe(t.Name())); n != 3 {
		t.Fatalf("%d containers before the kill, want 3 (one claimed, two warm)", n)
	}
	return claimed, kill
}

// A process holding a pool and a claimed sandbox is killed, and nobody
// reaps: its owner watcher removes the claimed sandbox once its grace has
// passed (the warm ones ended with the process). Nothing is left.
func TestPoolCrashLeavesNothingAfterGrace(t *testing.T) {
	cli := needDocker(t)
	t.Parallel()
	_, kill := startPoolChild(t, cli, 2*time.Second)
	kill()
	waitNoneLabelled(t, cli, "test="+labelSafe(t.Name()), 60*time.Second)
}

// A process holding a pool and a claimed sandbox is killed (SIGKILL: no
// Close, no drain). Its warm sandboxes end by themselves: their input was
// the dead process's attach, and its end ends their shell. The claimed one
// lives on until `sandboxio reap` (Client.Reap) removes it for a dead
// owner, found by its tenant through the name the claim gave it and
// reported with that tenant and session. Nothing is left. (The owner's
// watcher is held back by a long grace, so that the reap is what removes
// the claimed one.)
func TestPoolCrashLeavesNothingAfterReap(t *testing.T) {
	cli := needDocker(t)
	t.Parallel()
	claimed, kill := startPoolChild(t, cli, 60*time.Second)
	label := "test=" + labelSafe(t.Name())
	kill()

	// The warm ones end by themselves, without a reap.
	waitLabelledCount(t, cli, label, 1, 30*time.Second)
	ctx := t.Context()
	if _, err := cli.ContainerInspect(ctx, claimed); err != nil {
		t.Fatalf("the claimed sandbox ended with its client, before its lifetime and before the reap: %v", err)
	}

	c, _ := newClient(t)
	// Without the tenant, its labels cannot say whose it is: it is listed
	// as bound by its name, with neither tenant nor session.
	dry, err := c.Reap(ctx, ReapOptions{Backend: "docker://", DryRun: true, Labels: map[string]string{"test": labelSafe(t.Name())}})
	if err != nil {
		t.Fatal(err)
	}
	if len(dry) != 1 || dry[0].ID != claimed || dry[0].TenantID != "" || dry[0].SessionID != "" || dry[0].Labels[model.ReservedLabelPrefix+"binding"] != "name" {
		t.Fatalf("reap --dry-run without the tenant: %+v", dry)
	}
	// By tenant alone: the tenant, and the session read back from the name.
	byTenant, err := c.Reap(ctx, ReapOptions{Backend: "docker://", Labels: map[string]string{model.LabelTenantID: "acme", "test": labelSafe(t.Name())}})
	if err != nil {
		t.Fatal(err)
	}
	if len(byTenant) != 1 || byTenant[0].ID != claimed || byTenant[0].TenantID != "acme" || byTenant[0].SessionID != labelSafe(t.Name()) || byTenant[0].Reason != "owner gone" {
		t.Fatalf("reap by tenant: %+v", byTenant)
	}
	waitNoneLabelled(t, cli, label, 30*time.Second)
}
