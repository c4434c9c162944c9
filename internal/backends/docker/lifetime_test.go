package docker

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	backendtest "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/conformance"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/testing/docker/procenv"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// orphanEnv turns the test binary into the owner process of
// orphanSandbox: the spec (JSON) to open; orphanScriptEnv is what it runs.
const (
	orphanEnv       = "SANDBOXIO_TEST_ORPHAN_SPEC"
	orphanScriptEnv = "SANDBOXIO_TEST_ORPHAN_SCRIPT"
)

func init() {
	childModes[orphanEnv] = orphanMain
}

// initComm is the name of PID 1 in every sandbox.
var initComm = path.Base(initTarget)

// orphanMain opens one sandbox with its watcher, runs the script in it,
// prints what it printed, and waits to be killed.
func orphanMain() int {
	var spec model.Spec
	if err := json.Unmarshal([]byte(os.Getenv(orphanEnv)), &spec); err != nil {
		fmt.Println("ERR spec:", err)
		return 1
	}
	b, err := newBackend()
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	sb, err := b.Create(context.Background(), backends.CreateRequest{Spec: spec, Timeout: time.Minute})
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	if watcherErr != nil {
		fmt.Println("ERR watcher:", watcherErr)
		return 1
	}
	fmt.Printf("OWNER %s\n", processOwner().ID)
	res, err := sb.Run(context.Background(), []string{"sh", "-c", os.Getenv(orphanScriptEnv)}, backends.RunOptions{Timeout: 30 * time.Second})
	if err != nil {
		fmt.Println("ERR run:", err)
		return 1
	}
	fmt.Printf("OUT %s\n", strconv.Quote(string(res.Stdout)))
	fmt.Printf("READY %s\n", sb.ID())
	select {}
}

// child is a helper process of this test binary and the lines it printed
// up to the one READY.
type child struct {
	cmd   *exec.Cmd
	owner string
	out   string // OUT, unquoted
	ready string // what follows READY
}

// startChild runs this test binary again with env added and reads its
// standard output until READY (or ERR, or the end of ctx). Its owner id is
// added to the leftover check.
func startChild(ctx context.Context, env ...string) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	c := &child{cmd: exec.Command(exe, "-test.run=^$")}
	c.cmd.Env = append(os.Environ(), env...)
	c.cmd.Stderr = os.Stderr
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
			}
		}
	}()
	fail := func(err error) (*child, error) {
		c.kill()
		return nil, err
	}
	for {
		select {
		case l, ok := <-lines:
			switch {
			case !ok:
				return fail(fmt.Errorf("the child exited before it was ready"))
			case strings.HasPrefix(l, "ERR"):
				return fail(fmt.Errorf("child: %s", l))
			case strings.HasPrefix(l, "OWNER "):
				c.owner = strings.TrimPrefix(l, "OWNER ")
				childOwnersMu.Lock()
				childOwners = append(childOwners, c.owner)
				childOwnersMu.Unlock()
			case strings.HasPrefix(l, "OUT "):
				c.out, _ = strconv.Unquote(strings.TrimPrefix(l, "OUT "))
			case strings.HasPrefix(l, "READY "):
				c.ready = strings.TrimPrefix(l, "READY ")
				go func() { // drain
					for range lines {
					}
				}()
				return c, nil
			}
		case <-ctx.Done():
			return fail(fmt.Errorf("the child was not ready: %w", ctx.Err()))
		}
	}
}

// kill ends the child with SIGKILL: no deferred function, no Close, nothing
// of it runs.
func (c *child) kill() {
	_ = c.cmd.Process.Kill()
	_ = c.cmd.Wait()
}

// killOwnerAndWatcher kills the child and then its watcher outright, and
// says which pids went.
func (c *child) killOwnerAndWatcher() (string, error) {
	pid := c.cmd.Process.Pid
	c.kill()
	killed, alive := procenv.KillAll(reaperEnv+"="+c.owner, 5*time.Second)
	if len(alive) > 0 {
		return "", fmt.Errorf("the watcher of %s is still alive: %v", c.owner, alive)
	}
	return fmt.Sprintf("owner pid %d and its watcher %v killed with SIGKILL", pid, killed), nil
}

// orphanSandbox is Harness.Orphan for Docker: the sandbox is opened by a
// child process (with its watcher), which runs the script, and then both
// are killed outright.
func orphanSandbox(ctx context.Context, spec model.Spec, script string) (backendtest.Orphaned, error) {
	js, err := json.Marshal(spec)
	if err != nil {
		return backendtest.Orphaned{}, err
	}
	c, err := startChild(ctx, orphanEnv+"="+string(js), orphanScriptEnv+"="+script)
	if err != nil {
		return backendtest.Orphaned{}, err
	}
	if c.owner == "" {
		c.kill()
		return backendtest.Orphaned{}, fmt.Errorf("the child named no owner")
	}
	what, err := c.killOwnerAndWatcher()
	return backendtest.Orphaned{ID: c.ready, Output: c.out, Killed: what}, err
}

// The lifetime of a sandbox whose root stops every process it can see and
// whose owner and watcher are then killed outright still ends it, on runc
// and runsc: the conformance behaviour lifetime-locked on its own (the
// full suite runs it too).
func TestLifetimeLockedWithOwnerKilled(t *testing.T) {
	for _, rt := range runtimes {
		t.Run(rt, func(t *testing.T) {
			needRuntime(t, rt)
			t.Parallel()
			h := conformanceHarness(t, newTestBackend(t), rt)
			h.Only = []backendtest.Behaviour{backendtest.LifetimeLockedB}
			backendtest.Run(t, h)
		})
	}
}

// The idle bound of a warm sandbox and the lifetime counted from its claim
// hold while the sandbox's root stops every process it can see.
func TestWarmTimersLockedFromInside(t *testing.T) {
	for _, rt := range runtimes {
		t.Run(rt, func(t *testing.T) {
			needRuntime(t, rt)
			t.Parallel()
			b := newTestBackend(t)
			// Unclaimed: whatever runs in it (none of a tenant's code
			// does before the claim; here the backend's own exec plays
			// it) cannot keep it past its idle bound.
			idle := newWarm(t, b, testSpec(t, withRuntime(rt)), 8*time.Second)
			if out := sh(t, idle.s, backendtest.SwitchOffScript); !strings.Contains(out, "locked") {
				t.Fatalf("the script did not run: %q", out)
			}
			waitContainerGone(t, b, idle.ID(), time.Until(idle.IdleUntil().Add(15*time.Second)))
			t.Logf("unclaimed: gone %s after its idle bound", time.Since(idle.IdleUntil()).Round(10*time.Millisecond))

			// Claimed: the lifetime counts from the claim and holds.
			spec := testSpec(t, withRuntime(rt), func(s *model.Spec) { s.LifetimeSeconds = 8 })
			w := newWarm(t, b, spec, time.Minute)
			sb := claimOf(t, w, spec)
			if out := sh(t, sb, backendtest.SwitchOffScript); !strings.Contains(out, "locked") {
				t.Fatalf("the script did not run: %q", out)
			}
			waitContainerGone(t, b, sb.id, time.Until(sb.expires.Add(15*time.Second)))
			if early := time.Until(sb.expires); early > 0 {
				t.Fatalf("the claimed sandbox ended %s before its lifetime", early)
			}
			t.Logf("claimed: gone %s after claim + lifetime", time.Since(sb.expires).Round(10*time.Millisecond))
		})
	}
}
