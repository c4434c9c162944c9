package docker

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// eventWatch follows the daemon's "oom" and "die" events for sandboxio
// containers over one subscription per backend: "oom" covers processes started
// by exec (inspect's OOMKilled covers PID 1 only), and "die" ends an exec's wait
// when a gVisor sandbox dies under it (the daemon never closes that stream).
type eventWatch struct {
	cli *client.Client

	mu      sync.Mutex
	started bool
	cancel  context.CancelFunc
	tracked map[string]*tracked
	lastErr error // why the subscription or a query last ended, for diagnostics
}

type tracked struct {
	ooms []int64 // OOM event times (ns), deduplicated
	dead chan struct{}
}

func newEventWatch(cli *client.Client) *eventWatch {
	return &eventWatch{cli: cli, tracked: map[string]*tracked{}}
}

// watchFilters selects the events of sandboxio containers; id narrows them
// to one container and actions to some event types.
func watchFilters(id string, actions ...events.Action) filters.Args {
	f := filters.NewArgs(
		filters.Arg("type", string(events.ContainerEventType)),
		filters.Arg("label", model.LabelManaged+"=true"),
	)
	for _, a := range actions {
		f.Add("event", string(a))
	}
	if id != "" {
		f.Add("container", id)
	}
	return f
}

func eventTime(t time.Time) string {
	return fmt.Sprintf("%d.%09d", t.Unix(), t.Nanosecond())
}

// start subscribes once; the subscription reconnects on errors and asks for
// the events it missed meanwhile.
func (w *eventWatch) start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return
	}
	w.started = true
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go w.loop(ctx, time.Now().Add(-time.Second))
}

func (w *eventWatch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cancel != nil {
		w.cancel()
	}
}

func (w *eventWatch) loop(ctx context.Context, since time.Time) {
	for ctx.Err() == nil {
		msgs, errs := w.cli.Events(ctx, events.ListOptions{Since: eventTime(since),
			Filters: watchFilters("", events.ActionOOM, events.ActionDie)})
	stream:
		for {
			select {
			case m := <-msgs:
				w.record(m)
				if t := time.Unix(0, m.TimeNano); t.After(since) {
					since = t
				}
			case err := <-errs:
				w.setErr(err) // the stream ended; reconnect below
				break stream
			case <-ctx.Done():
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (w *eventWatch) setErr(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lastErr = err
}

// track starts keeping the events of a container, from its creation on.
func (w *eventWatch) track(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.tracked[id] == nil {
		w.tracked[id] = &tracked{dead: make(chan struct{})}
	}
}

func (w *eventWatch) forget(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.tracked, id)
}

func (w *eventWatch) record(m events.Message) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.tracked[m.Actor.ID]
	if t == nil {
		return // another process's container
	}
	switch m.Action {
	case events.ActionOOM:
		if !slices.Contains(t.ooms, m.TimeNano) {
			t.ooms = append(t.ooms, m.TimeNano)
		}
	case events.ActionDie:
		select {
		case <-t.dead:
		default:
			close(t.dead)
		}
	}
}

// died is closed when the container has died. A container that is not
// tracked never reports death this way.
func (w *eventWatch) died(id string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if t := w.tracked[id]; t != nil {
		return t.dead
	}
	return nil
}

// count is the number of OOM events seen for the container so far.
func (w *eventWatch) count(id string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if t := w.tracked[id]; t != nil {
		return len(t.ooms)
	}
	return 0
}

// wait waits up to d for the container's OOM event count to reach want; the
// event may trail the exit it explains. Then it asks the daemon's event log
// directly (everything since created), in case the subscription was down.
func (w *eventWatch) wait(ctx context.Context, id string, created time.Time, want int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for w.count(id) < want {
		if time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
	if w.count(id) >= want {
		return true
	}
	qctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	msgs, errs := w.cli.Events(qctx, events.ListOptions{
		Since: eventTime(created.Add(-time.Second)), Until: eventTime(time.Now()), Filters: watchFilters(id, events.ActionOOM),
	})
	for {
		select {
		case m := <-msgs:
			w.record(m)
		case err := <-errs:
			w.setErr(err)
			return w.count(id) >= want
		case <-qctx.Done():
			return w.count(id) >= want
		}
	}
}

// exitCode asks the daemon's event log for the exit code of a container
// that is already gone (AutoRemove): its "die" event carries it. ok is false
// when the log does not answer within a second or holds no such event.
func exitCode(ctx context.Context, cli *client.Client, id string, since time.Time) (code int, ok bool) {
	qctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	msgs, errs := cli.Events(qctx, events.ListOptions{
		Since: eventTime(since.Add(-time.Second)), Until: eventTime(time.Now()), Filters: watchFilters(id, events.ActionDie),
	})
	for {
		select {
		case m := <-msgs:
			if c, err := strconv.Atoi(m.Actor.Attributes["exitCode"]); err == nil {
				return c, true
			}
		case err := <-errs:
			tracef("exit code of %s: event log: %v", short(id), err)
			return 0, false
		case <-qctx.Done():
			return 0, false
		}
	}
}
