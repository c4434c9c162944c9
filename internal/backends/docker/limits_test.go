package docker

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// These tests measure time or fill the sandbox on purpose, so they do not
// run in parallel with each other.

// countScript counts live processes whose command line contains $1, with
// shell builtins only (no fork needed). It skips itself and PID 1: the init's
// arguments carry the deadline in nanoseconds, whose digits can hold a marker.
const countScript = `n=0; for d in /proc/[0-9]*; do case $d in /proc/$$|/proc/1) continue;; esac; c=; read -r c 2>/dev/null <"$d/cmdline" || true; case "$c" in *"$1"*) n=$((n+1));; esac; done; echo $n`

// listScript prints the stat and command line of each process countScript counts.
const listScript = `for d in /proc/[0-9]*; do case $d in /proc/$$|/proc/1) continue;; esac; c=; read -r c 2>/dev/null <"$d/cmdline" || true; case "$c" in *"$1"*) read -r st <"$d/stat"; echo "$st [$c]";; esac; done`

// survivors counts the processes marked marker after a command was cut
// short. When they could not be stopped one by one within the kill budget
// (gVisor on a loaded machine), the backend kills the whole sandbox instead:
// that kills them too, and is accepted once the container is shown gone.
// It reports whether the sandbox is still usable.
func survivors(t *testing.T, sb *sandbox, marker string) (alive bool) {
	t.Helper()
	// A process SIGKILLed a moment ago may still be exiting: only one that
	// stays is a survivor. The count is taken until it is 0, for up to 1 s.
	res, err := sb.Run(t.Context(), []string{"sh", "-c", `i=0; while :; do ` + strings.TrimSuffix(countScript, "; echo $n") + `; [ "$n" = 0 ] && break; i=$((i+1)); [ $i -ge 20 ] && break; sleep 0.05; done; echo $n`, "count", marker}, backends.RunOptions{Timeout: 10 * time.Second})
	if errors.Is(err, model.ErrSandboxGone) && strings.Contains(err.Error(), "could not be stopped one by one") {
		t.Logf("the processes could not be stopped one by one in time, so the sandbox was killed: %v", err)
		waitGone(t, sb.b, map[string]string{"test": labelSafe(t.Name())}, 5*time.Second)
		return false
	}
	if err != nil {
		t.Fatalf("count processes: %v", err)
	}
	if n, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout))); err != nil || n != 0 {
		ps, _ := sb.Run(t.Context(), []string{"sh", "-c", listScript, "list", marker}, backends.RunOptions{Timeout: 10 * time.Second})
		t.Fatalf("%q of the command's processes survived (%v):\n%s", res.Stdout, err, ps.Stdout)
	}
	return true
}

func countProcs(t *testing.T, sb *sandbox, marker string) int {
	t.Helper()
	res, err := sb.Run(t.Context(), []string{"sh", "-c", countScript, "count", marker}, backends.RunOptions{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("count processes: %v", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	if err != nil {
		t.Fatalf("count processes: %q", res.Stdout)
	}
	return n
}

func TestExecTimeout(t *testing.T) {
	for _, rt := range runtimes {
		t.Run(rt, func(t *testing.T) {
			needRuntime(t, rt)
			sb := open(t, newTestBackend(t), testSpec(t, withRuntime(rt)))
			// The counter sees a live process (so that zero below means gone).
			sh(t, sb, "sleep 4242 >/dev/null 2>&1 &")
			if n := countProcs(t, sb, "4242"); n != 1 {
				t.Fatalf("counted %d background sleeps, want 1", n)
			}
			const limit = 1500 * time.Millisecond
			start := time.Now()
			// A process tree: a background child and a foreground one, both
			// marked so that the test can look for them afterwards. Output is
			// printed first: it must not come back as a result.
			res, err := sb.Run(t.Context(), []string{"sh", "-c", "echo partial; sleep 3131 & sleep 3132"}, backends.RunOptions{Timeout: limit})
			took := time.Since(start)
			wantClass(t, err, model.ErrExecutionTimeout, "")
			if took < limit || took > limit+time.Second {
				t.Fatalf("ExecutionTimeout after %s, want within 1s of %s", took, limit)
			}
			if res.Stdout != nil || res.Stderr != nil || res.ExitCode != 0 {
				t.Fatalf("partial output returned: %+v", res)
			}
			t.Logf("ExecutionTimeout %s after a %s limit", took-limit, limit)
			if !survivors(t, sb, "313") {
				sb = open(t, newTestBackend(t), testSpec(t, withRuntime(rt)))
			}
			// The sandbox's own timeout applies when the call sets none.
			sb.callTimeout = time.Second
			start = time.Now()
			_, err = sb.Run(t.Context(), []string{"sleep", "3133"}, backends.RunOptions{})
			wantClass(t, err, model.ErrExecutionTimeout, "")
			if took := time.Since(start); took > 2*time.Second {
				t.Fatalf("inherited timeout took %s", took)
			}
			sb.callTimeout = 60 * time.Second
			survivors(t, sb, "313")
		})
	}
}

func TestLifetimeEndsSandbox(t *testing.T) {
	needDocker(t)
	t.Parallel()
	b := newTestBackend(t)
	sb := open(t, b, testSpec(t, func(s *model.Spec) { s.LifetimeSeconds = 3 }))
	sh(t, sb, "true")
	// A command running when the lifetime ends: SandboxGone, not a result.
	start := time.Now()
	_, err := sb.Run(t.Context(), []string{"sleep", "30"}, backends.RunOptions{})
	wantClass(t, err, model.ErrSandboxGone, "")
	// The bound is the command's 30 s, not the lifetime plus a margin: on a
	// loaded host the daemon's die event can lag by seconds, and what this
	// shows is that the lifetime, not the command, ended the call.
	if took := time.Since(start); took > 15*time.Second {
		t.Fatalf("SandboxGone after %s for a 3s lifetime", took)
	}
	// Daemon side: the container is gone, with no client action.
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err := b.cli.ContainerInspect(t.Context(), sb.id)
		if cerrdefs.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("container still there after its lifetime: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, err = sb.Run(t.Context(), []string{"true"}, backends.RunOptions{})
	wantClass(t, err, model.ErrSandboxGone, "")
}

func TestLifetimeIsDaemonSide(t *testing.T) {
	needDocker(t)
	t.Parallel()
	b := newTestBackend(t)
	sbi, err := b.Create(t.Context(), backends.CreateRequest{Spec: testSpec(t, func(s *model.Spec) { s.LifetimeSeconds = 2 })})
	if err != nil {
		t.Fatal(err)
	}
	// The client forgets the sandbox entirely; the daemon still ends it.
	id := sbi.ID()
	time.Sleep(2 * time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := b.cli.ContainerInspect(t.Context(), id); cerrdefs.IsNotFound(err) {
			return
		}
		if time.Now().After(deadline) {
			_ = b.removeContainer(t.Context(), id)
			t.Fatal("container outlived its lifetime")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestCancellationMidRunLeavesNothing(t *testing.T) {
	needDocker(t)
	b := newTestBackend(t)
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	sbi, err := b.Create(ctx, backends.CreateRequest{Spec: testSpec(t)})
	if err != nil {
		t.Fatal(err)
	}
	// The scoped-helper pattern: close on every exit path, with the very
	// context that was cancelled.
	done := make(chan error, 1)
	go func() {
		defer func() { done <- sbi.Close(ctx) }()
		_, err := sbi.Run(ctx, []string{"sleep", "30"}, backends.RunOptions{})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("run: want context.Canceled, got %v", err)
		}
	}()
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("close after cancellation: %v", err)
	}
	if took := time.Since(start); took > model.TeardownGrace {
		t.Fatalf("teardown took %s", took)
	}
	waitGone(t, b, map[string]string{"test": labelSafe(t.Name())}, 0)
}

func TestCancellationMidCreateLeavesNothing(t *testing.T) {
	needRuntime(t, "runsc") // slow enough to cancel half-way
	b := newTestBackend(t)
	open(t, b, testSpec(t, withRuntime("runsc"), func(s *model.Spec) { s.Labels["case"] = "warm" })) // learn the image first
	for _, after := range []time.Duration{20 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond} {
		ctx, cancel := context.WithTimeout(t.Context(), after)
		sb, err := b.Create(ctx, backends.CreateRequest{Spec: testSpec(t, withRuntime("runsc"), func(s *model.Spec) { s.Labels["case"] = "cancel" })})
		cancel()
		if err == nil {
			_ = sb.Close(t.Context())
			continue
		}
		if errors.Is(err, model.ErrCreateTimeout) {
			t.Fatalf("the caller's own deadline is not a CreateTimeout: %v", err)
		}
	}
	waitGone(t, b, map[string]string{"test": labelSafe(t.Name()), "case": "cancel"}, 6*time.Second)
}

func TestCreateTimeout(t *testing.T) {
	needRuntime(t, "runsc")
	b := newTestBackend(t)
	open(t, b, testSpec(t, withRuntime("runsc"), func(s *model.Spec) { s.Labels["case"] = "warm" }))
	const limit = 100 * time.Millisecond
	start := time.Now()
	_, err := b.Create(t.Context(), backends.CreateRequest{Timeout: limit, Spec: testSpec(t, withRuntime("runsc"), func(s *model.Spec) {
		s.Labels["case"] = "timeout"
	})})
	took := time.Since(start)
	wantClass(t, err, model.ErrCreateTimeout, "")
	// The call removes what it half-created before it returns (a process
	// that exits right after would otherwise leave it), bounded by the
	// teardown grace: on a busy daemon that removal, not the timeout, is
	// what takes time.
	if bound := limit + model.TeardownGrace; took > bound {
		t.Fatalf("CreateTimeout after %s, want within %s (the limit plus the teardown grace)", took, bound)
	}
	t.Logf("CreateTimeout %s after a %s limit", took-limit, limit)
	waitGone(t, b, map[string]string{"test": labelSafe(t.Name()), "case": "timeout"}, 6*time.Second)
}

func TestMemoryHogInExec(t *testing.T) {
	logTraces(t)
	for _, rt := range runtimes {
		t.Run(rt, func(t *testing.T) {
			needRuntime(t, rt)
			sb := open(t, newTestBackend(t), testSpec(t, withRuntime(rt), func(s *model.Spec) { s.Resources.MemoryMB = 64 }))
			sh(t, sb, "dd if=/dev/zero of=/dev/null bs=16M count=1") // well within the cap
			// dd holds its whole block in memory: 200 MiB against a 64 MiB cap.
			_, err := sb.Run(t.Context(), []string{"dd", "if=/dev/zero", "of=/dev/null", "bs=200M", "count=1"}, backends.RunOptions{})
			wantClass(t, err, model.ErrResourceLimitExceeded, model.LimitMemory)
			if rt == "runc" {
				// Only the hog died; the sandbox goes on.
				sh(t, sb, "true")
			} else {
				// gVisor's sentry is the cgroup's only process: the whole
				// sandbox ends, and says so from then on.
				_, err := sb.Run(t.Context(), []string{"true"}, backends.RunOptions{})
				wantClass(t, err, model.ErrSandboxGone, "")
			}
		})
	}
}

// forkBomb keeps forking until it is killed: every process loops, and one
// whose fork fails exits, freeing a slot for another.
const forkBomb = `b() { while :; do b & done; }; b`

// spawnCount starts a monitor, then as many children as it can, each of
// which holds a slot. The shell dies at its first refused fork; the monitor,
// which needs no fork once it runs (shell builtins only), waits for that,
// counts the live tasks (threads, as the pids ceiling counts them: the
// init's vary with load), notes the count and kills the whole process
// group, itself included, so that the command ends.
const spawnCount = `: >/tmp/spawned
(while read -r st 2>/dev/null </proc/$$/stat; do st=${st##*) }; case $st in Z*) break;; esac; done
 n=0; for d in /proc/[0-9]*/task/[0-9]*; do n=$((n+1)); done; echo $n >/tmp/peak
 kill -9 0) &
i=0; while [ $i -lt 400 ]; do (echo >>/tmp/spawned; exec sleep 30) & i=$((i+1)); done; wait`

// atoi parses a count a sandbox printed; anything else fails the test
// (a missing /tmp/peak would otherwise read as 0 and pass a bound).
func atoi(t testing.TB, what, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%s: %q is not a number: %v", what, s, err)
	}
	return n
}

func TestForkBomb(t *testing.T) {
	logTraces(t)
	for _, rt := range runtimes {
		t.Run(rt, func(t *testing.T) {
			needRuntime(t, rt)
			b := newTestBackend(t)
			const pids = 64
			sbi, err := b.Create(t.Context(), backends.CreateRequest{Spec: testSpec(t, withRuntime(rt), func(s *model.Spec) { s.Resources.Pids = pids })})
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			sb := sbi.(*sandbox)
			t.Cleanup(func() { closeEventually(t, b, sb) })

			// Forks past the ceiling are refused, and that is reported.
			_, err = sb.Run(t.Context(), []string{"sh", "-c", spawnCount}, backends.RunOptions{Timeout: 20 * time.Second})
			wantClass(t, err, model.ErrResourceLimitExceeded, model.LimitPids)
			n := atoi(t, "children started", sh(t, sb, "wc -l </tmp/spawned"))
			peak := atoi(t, "tasks at the peak", sh(t, sb, "cat /tmp/peak"))
			if peak > pids || peak < pids-8 || n > pids {
				t.Fatalf("%d children started, %d tasks at the peak, under a ceiling of %d", n, peak, pids)
			}
			t.Logf("%d children started, %d tasks at the peak, under pids=%d", n, peak, pids)

			// A real fork bomb: reported as the pids limit, its processes
			// stopped; the sandbox may be killed to stop them (and under
			// gVisor, the host backstop may take the sandbox down first).
			start := time.Now()
			_, err = sb.Run(t.Context(), []string{"sh", "-c", forkBomb}, backends.RunOptions{Timeout: 3 * time.Second})
			took := time.Since(start)
			wantClass(t, err, model.ErrResourceLimitExceeded, model.LimitPids)
			// Within the call's timeout plus the budgets of looking at a
			// command that ended badly (a probe, then the container's death):
			// a gVisor sandbox swamped by the bomb answers slowly.
			if bound := 3*time.Second + 2*inspectBudget + time.Second; took > bound {
				t.Fatalf("fork bomb stopped after %s, want within %s", took, bound)
			}
			t.Logf("fork bomb: %v (after %s)", err, took.Round(time.Millisecond))
			if sb.usable() == nil {
				// Nothing of the bomb is left running.
				if n := countProcs(t, sb, "while :"); n != 0 {
					t.Fatalf("%d fork bomb processes survived", n)
				}
			}
			closeEventually(t, b, sb)

			// The host is fine: the next sandbox starts and runs.
			next := open(t, b, testSpec(t, withRuntime(rt)))
			if got := sh(t, next, "echo ok"); got != "ok" {
				t.Fatalf("next sandbox: %q", got)
			}
		})
	}
}

// closeEventually closes a sandbox that a fork bomb may have swamped. Close
// is bounded by the teardown grace; a gVisor sandbox with thousands of
// threads can take longer to remove, and then Close rightly reports it
// orphaned. The test then waits for the removal, as the reaper would, so
// that nothing is left behind; any other close error fails the test.
func closeEventually(t *testing.T, b *dockerBackend, sb *sandbox) {
	t.Helper()
	err := sb.Close(context.WithoutCancel(t.Context()))
	var orphaned *backends.OrphanedError
	switch {
	case err == nil:
		return
	case !errors.As(err, &orphaned):
		t.Errorf("close: %v", err)
		return
	}
	t.Logf("removal outlasted the teardown grace (%v); waiting for it", err)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), time.Minute)
	defer cancel()
	if err := b.removeContainer(ctx, sb.id); err != nil {
		t.Errorf("the orphaned sandbox was not removed within a minute: %v", err)
	}
}

// A command that fills the process ceiling and holds it past its timeout is
// reported as the pids limit, not as a timeout, on every runtime: this is
// the fork bomb that neither dies nor takes the sandbox down before the
// timeout (what a slow or busy host sees under gVisor, where the host
// backstop is reached later or not at all). Under gVisor nothing can be
// started inside to look (the ceiling holds for the killer too), so the
// sandbox is killed; what the command printed, forks refused, is the
// evidence.
func TestPidsCeilingHeldPastTimeout(t *testing.T) {
	logTraces(t)
	for _, rt := range runtimes {
		t.Run(rt, func(t *testing.T) {
			needRuntime(t, rt)
			b := newTestBackend(t)
			sbi, err := b.Create(t.Context(), backends.CreateRequest{Spec: testSpec(t, withRuntime(rt), func(s *model.Spec) { s.Resources.Pids = 32 })})
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			sb := sbi.(*sandbox)
			t.Cleanup(func() { closeEventually(t, b, sb) })
			// Fill the ceiling with sleepers, then keep trying to fork
			// (slowly, so the host backstop is never reached), past the
			// timeout.
			const hold = `i=0; while [ $i -lt 100 ]; do sleep 60 & i=$((i+1)); done; while :; do sleep 60 & sleep 0.2 2>/dev/null || : ; done`
			start := time.Now()
			// The timeout leaves the command time to fill the ceiling on a
			// busy host (under load a gVisor sandbox forks slowly): a
			// command stopped before it did rightly gets ExecutionTimeout.
			_, err = sb.Run(t.Context(), []string{"sh", "-c", hold}, backends.RunOptions{Timeout: 8 * time.Second})
			t.Logf("held ceiling: %v (after %s)", err, time.Since(start).Round(time.Millisecond))
			wantClass(t, err, model.ErrResourceLimitExceeded, model.LimitPids)
		})
	}
}
