package docker

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The slots bound what is in flight: a call past the bound waits until one
// is released, and gives up when its context ends.
func TestDaemonSlotBoundsCallsInFlight(t *testing.T) {
	pool := make(chan struct{}, 2)
	var releases []func()
	for range 2 {
		r, err := daemonSlot(t.Context(), pool)
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, r)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := daemonSlot(ctx, pool); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a third call with two slots held: got %v, want it to wait and then fail with its context", err)
	}
	got := make(chan error, 1)
	go func() {
		r, err := daemonSlot(context.WithoutCancel(t.Context()), pool)
		if err == nil {
			r()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("a call took a slot while both were held (err %v)", err)
	case <-time.After(20 * time.Millisecond):
	}
	releases[0]()
	if err := <-got; err != nil {
		t.Fatalf("a call waiting for a released slot: %v", err)
	}
	releases[1]()
	if len(pool) != 0 {
		t.Fatalf("%d slots still held after every release", len(pool))
	}
}
