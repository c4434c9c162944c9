package docker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/client"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// A gVisor sandbox that died under a command is put down to its host pids
// backstop on the host's own count of refused forks, and only on it where
// that count is seen: not on what the command printed, which is the
// sandboxed code's choice. Only where the host cgroup cannot be seen from
// this process are the forks the command saw refused the evidence. No
// daemon: the die event is in before died runs.
func TestDiedTakesTheHostPidsCountAsEvidence(t *testing.T) {
	cli, err := client.NewClientWithOpts(client.WithHost("unix:///nonexistent/docker.sock"), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	const refusedFork = "sh: can't fork: Resource temporarily unavailable\n"
	for name, c := range map[string]struct {
		watched  bool
		refused  int64
		stderr   string
		class    model.ErrorClass
		limit    string
		contains string
	}{
		"the host refused forks, the command printed nothing": {true, 2, "", model.ErrResourceLimitExceeded, model.LimitPids, "host refused gVisor 2 forks at pids.max 1152"},
		"the host refused none, the command printed refusals": {true, 0, refusedFork, model.ErrSandboxGone, "", "stopped or removed from outside"},
		"no host view: the printed refusals are all there is": {false, 0, refusedFork, model.ErrResourceLimitExceeded, model.LimitPids, "host pids cgroup is not visible"},
		"no host view, nothing printed":                       {false, 0, "", model.ErrSandboxGone, "", "stopped or removed from outside"},
	} {
		t.Run(name, func(t *testing.T) {
			id := "0123456789abcdef"
			w := newEventWatch(cli)
			w.track(id)
			w.record(events.Message{Action: events.ActionDie, Actor: events.Actor{ID: id}, TimeNano: time.Now().UnixNano()})
			b := &dockerBackend{cli: cli, cfg: config{teardownGrace: model.TeardownGrace}, events: w}
			s := &sandbox{b: b, id: id, tier: model.TierGVisor, created: time.Now().Add(-time.Second), expires: time.Now().Add(time.Minute),
				caps: model.Caps{MemoryMB: 64, Pids: 64}}
			if c.watched {
				h := &hostPids{dir: t.TempDir(), limit: 1152, refused: c.refused, stop: make(chan struct{}), done: make(chan struct{})}
				close(h.done) // the cgroup went with the container
				s.hostPids = h
			}
			err := s.died(t.Context(), time.Now(), errors.New("the container is not running"), []byte(c.stderr), false)
			wantClass(t, err, c.class, c.limit)
			if c.class == model.ErrSandboxGone && errors.Is(err, model.ErrResourceLimitExceeded) {
				t.Fatalf("put down to a cap: %v", err)
			}
			if !strings.Contains(err.Error(), c.contains) {
				t.Fatalf("%v\ndoes not say %q", err, c.contains)
			}
		})
	}
}

// End to end on gVisor: a command prints a refused fork, as a fork bomb
// would, and the sandbox is then killed from outside. The host's pids
// cgroup refused nothing, so this is SandboxGone, not the pids limit.
func TestGVisorKilledFromOutsideIsNotAForkBomb(t *testing.T) {
	logTraces(t)
	needRuntime(t, "runsc")
	b := newTestBackend(t)
	sb := open(t, b, testSpec(t, withRuntime("runsc")))
	if sb.hostPids == nil {
		t.Fatal("the host pids cgroup of a local gVisor sandbox is not watched")
	}
	done := make(chan error, 1)
	go func() {
		_, err := sb.Run(context.WithoutCancel(t.Context()), []string{"sh", "-c", `echo "sh: can't fork: Resource temporarily unavailable" >&2; echo started >/tmp/started; sleep 60`},
			backends.RunOptions{Timeout: 30 * time.Second})
		done <- err
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if res, err := sb.Run(t.Context(), []string{"cat", "/tmp/started"}, backends.RunOptions{Timeout: 10 * time.Second}); err == nil && res.ExitCode == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the command did not start")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := b.cli.ContainerKill(t.Context(), sb.id, "KILL"); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the command did not end after the sandbox was killed")
	}
	wantClass(t, err, model.ErrSandboxGone, "")
	if errors.Is(err, model.ErrResourceLimitExceeded) {
		t.Fatalf("a sandbox killed from outside put down to a cap: %v", err)
	}
}
