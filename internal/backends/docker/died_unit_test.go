package docker

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/client"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// A sandbox that died under a command whose die event is already in, and
// whose OOM event trails it, is reported as the memory cap it hit, not as
// stopped from outside: nothing orders the shim's OOM and exit reports. No
// daemon: the die event is recorded before the command fails, the OOM event
// 30 ms after died begins (its trace line), well inside the wait.
func TestDiedWaitsForAnOOMEventThatTrailsTheDieEvent(t *testing.T) {
	// No daemon answers here: the inspect and event-log fallbacks fail.
	cli, err := client.NewClientWithOpts(client.WithHost("unix:///nonexistent/docker.sock"), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	const id = "0123456789abcdef"
	w := newEventWatch(cli)
	w.track(id)
	w.record(events.Message{Action: events.ActionDie, Actor: events.Actor{ID: id}, TimeNano: time.Now().UnixNano()})
	b := &dockerBackend{cli: cli, cfg: config{teardownGrace: model.TeardownGrace}, events: w}
	s := &sandbox{b: b, id: id, tier: model.TierGVisor, created: time.Now().Add(-time.Second), expires: time.Now().Add(time.Minute),
		caps: model.Caps{MemoryMB: 64}}

	tracef = func(format string, _ ...any) {
		if strings.HasPrefix(format, "died after") {
			go func() {
				time.Sleep(30 * time.Millisecond)
				w.record(events.Message{Action: events.ActionOOM, Actor: events.Actor{ID: id}, TimeNano: time.Now().UnixNano()})
			}()
		}
	}
	t.Cleanup(func() { tracef = func(string, ...any) {} })

	err = s.died(t.Context(), time.Now(), errors.New("the container is not running"), nil, false)
	wantClass(t, err, model.ErrResourceLimitExceeded, model.LimitMemory)
	// The sandbox is gone from then on, as any dead one.
	wantClass(t, s.usable(), model.ErrSandboxGone, "")
}
