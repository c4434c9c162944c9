package backendtest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// LifetimeLockedB: the lifetime cannot be switched off from inside.
const LifetimeLockedB Behaviour = "lifetime-locked"

// SwitchOffScript is what a sandbox's root does to outlive its lifetime: it
// starts, detached from the command that runs it (which returns at once), a
// loop that from 2 s on, for the rest of the sandbox's life, stops every
// process it can see (kill -STOP -1, PID 1 and each pid under /proc), so
// that whatever keeps the lifetime inside the sandbox is frozen. (It sends
// no SIGKILL to PID 1: where that reaches the init, the sandbox just ends
// early.) It prints PID 1's name, then "locked".
const SwitchOffScript = `cat /proc/1/comm
( trap '' HUP TERM INT
  sleep 2 # the command that started it has returned by then
  i=0
  while [ $i -lt 100000 ]; do
    kill -STOP -1 2>/dev/null
    kill -STOP 1 2>/dev/null
    for p in /proc/[0-9]*; do
      p=${p#/proc/}
      [ "$p" = "$$" ] || kill -STOP "$p" 2>/dev/null
    done
    i=$((i+1))
    sleep 0.2
  done
) </dev/null >/dev/null 2>&1 &
echo locked`

// Orphaned is the sandbox Harness.Orphan opened and then abandoned.
type Orphaned struct {
	// ID is the sandbox's id.
	ID string
	// Output is what SwitchOffScript printed.
	Output string
	// Killed says what was killed outright, for the log ("owner pid 123 and
	// its watcher pid 456").
	Killed string
}

// lifetimeLocked: a sandbox whose root stops every process it can see, and
// whose owner and the owner's helpers are then killed outright, still ends
// within its lifetime plus the backend's stated bound.
func lifetimeLocked(t *testing.T, e *env) {
	lt := e.lifetime()
	secs := int64((lt + time.Second - 1) / time.Second)
	spec, labels := e.spec(t, func(s *model.Spec) { s.LifetimeSeconds = secs; s.TimeoutSeconds = secs })
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	var out string
	switch {
	case e.h.Orphan != nil:
		o, err := e.h.Orphan(ctx, spec, SwitchOffScript)
		if err != nil {
			t.Fatalf("orphan: %v", err)
		}
		t.Logf("sandbox %s: %s", o.ID, o.Killed)
		out = o.Output
	case e.h.LifetimeKeeper != "":
		// The lifetime is kept where no process of this client runs: the
		// client stays, and does nothing more until the end.
		sb, err := e.h.Backend.Create(ctx, backends.CreateRequest{Spec: spec, Timeout: createTimeout})
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		t.Cleanup(func() { _ = sb.Close(context.WithoutCancel(t.Context())) })
		res, err := sb.Run(ctx, []string{"sh", "-c", SwitchOffScript}, backends.RunOptions{Timeout: 30 * time.Second})
		if err != nil {
			t.Fatalf("run the script: %v", err)
		}
		out = string(res.Stdout)
		t.Logf("sandbox %s: the client stays; the lifetime is kept by %s", sb.ID(), e.h.LifetimeKeeper)
	default:
		t.Fatalf("%s sets neither Harness.Orphan nor Harness.LifetimeKeeper: it must show the lifetime kept with its owner killed, or say where the lifetime is kept instead", e.h.Name)
	}
	// The lifetime counts from within the create, which ended before this.
	abandoned := time.Now()
	if !strings.Contains(out, "locked") {
		t.Fatalf("the script did not run: %q", out)
	}
	if e.h.Init != "" {
		if first, _, _ := strings.Cut(out, "\n"); strings.TrimSpace(first) != e.h.Init {
			t.Errorf("PID 1 of the sandbox is %q, want %q", strings.TrimSpace(first), e.h.Init)
		}
	}
	bound := e.lifetimeBound()
	deadline := abandoned.Add(time.Duration(secs)*time.Second + bound)
	for {
		infos := e.list(t, labels)
		if len(infos) == 0 {
			t.Logf("gone %s after it was abandoned (lifetime %ds, bound %s)", time.Since(abandoned).Round(10*time.Millisecond), secs, bound)
			return
		}
		if time.Now().After(deadline) {
			ids := make([]string, len(infos))
			for i, in := range infos {
				ids[i] = fmt.Sprintf("%s(running=%v)", in.ID, in.Running)
			}
			t.Fatalf("still listed %s after it was abandoned, past its lifetime of %ds plus %s: %v", time.Since(abandoned).Round(time.Millisecond), secs, bound, ids)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (e *env) lifetimeBound() time.Duration {
	if e.h.LifetimeBound > 0 {
		return e.h.LifetimeBound
	}
	if e.h.GoneWithin > 0 {
		return e.h.GoneWithin
	}
	return goneWithin
}
