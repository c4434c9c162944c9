package docker

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// notifyWriter collects a stream and signals its first write.
type notifyWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	first chan struct{}
	once  sync.Once
}

func newNotifyWriter() *notifyWriter { return &notifyWriter{first: make(chan struct{})} }

func (w *notifyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	w.once.Do(func() { close(w.first) })
	return len(p), nil
}

func (w *notifyWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// Output reaches the sinks while the command still runs: the command waits
// for a file that the test creates only once the first line has arrived, so
// buffered output would have the command give up first (the order is shown
// by what it prints, not by a timer).
func TestRunStreamsOutput(t *testing.T) {
	for _, rt := range runtimes {
		t.Run(rt, func(t *testing.T) {
			needRuntime(t, rt)
			t.Parallel()
			sb := open(t, newTestBackend(t), testSpec(t, withRuntime(rt)))
			stdout, stderr := newNotifyWriter(), newNotifyWriter()
			type ran struct {
				res backends.Result
				err error
			}
			done := make(chan ran, 1)
			go func() {
				res, err := sb.Run(context.WithoutCancel(t.Context()), []string{"sh", "-c",
					`echo first; echo on-stderr >&2; i=0; while [ ! -e /tmp/go ] && [ $i -lt 40 ]; do sleep 1; i=$((i+1)); done; [ -e /tmp/go ] && echo after-go || echo gave-up`},
					backends.RunOptions{Stdout: stdout, Stderr: stderr, Timeout: 55 * time.Second})
				done <- ran{res, err}
			}()
			select {
			case <-stdout.first:
			case r := <-done:
				t.Fatalf("the command ended before any output arrived: %+v %v", r.res, r.err)
			case <-time.After(50 * time.Second):
				t.Fatal("no output arrived")
			}
			if got := stdout.String(); got != "first\n" {
				t.Fatalf("first output %q, want %q", got, "first\n")
			}
			sh(t, sb, "touch /tmp/go")
			var r ran
			select {
			case r = <-done:
			case <-time.After(50 * time.Second):
				t.Fatal("the command did not end after the marker file was created")
			}
			if r.err != nil || r.res.ExitCode != 0 {
				t.Fatalf("run: %+v %v", r.res, r.err)
			}
			if got := stdout.String(); got != "first\nafter-go\n" {
				t.Fatalf("stdout %q", got)
			}
			if got := stderr.String(); got != "on-stderr\n" {
				t.Fatalf("stderr %q (the pid marker must be stripped, stdout kept apart)", got)
			}
			if r.res.Stdout != nil || r.res.Stderr != nil {
				t.Fatalf("streamed output also returned: %+v", r.res)
			}
		})
	}
}

// More than the output cap on one stream, buffered or streamed: the command
// is stopped, with ResourceLimitExceeded(output), and nothing of it is left
// running.
func TestOutputCap(t *testing.T) {
	for _, rt := range runtimes {
		t.Run(rt, func(t *testing.T) {
			needRuntime(t, rt)
			// Generous: 64 MiB through the daemon takes a while, far
			// longer on a machine whose cores are busy.
			long := func(s *model.Spec) { s.TimeoutSeconds, s.LifetimeSeconds = 180, 600 }
			sb := open(t, newTestBackend(t), testSpec(t, withRuntime(rt), long))
			for _, streamed := range []bool{false, true} {
				var opts backends.RunOptions
				counted := &countingWriter{}
				if streamed {
					opts.Stdout = counted
				}
				start := time.Now()
				res, err := sb.Run(t.Context(), []string{"sh", "-c", "exec yes output-cap-7431-0123456789abcdef"}, opts)
				if !errors.Is(err, model.ErrResourceLimitExceeded) {
					t.Logf("streamed=%v: after %v, %d bytes streamed, %d buffered: %v", streamed, time.Since(start), counted.n, len(res.Stdout), err)
				}
				me := classError(t, err, model.ErrResourceLimitExceeded, model.LimitOutput)
				if !strings.Contains(me.Message, "64 MiB") || me.Fix == "" {
					t.Fatalf("error does not name the cap and the fix: %v", err)
				}
				if res.Stdout != nil || res.Stderr != nil {
					t.Fatalf("output returned with the error: %d bytes", len(res.Stdout))
				}
				if streamed && (counted.n == 0 || counted.n > maxOutput) {
					t.Fatalf("streamed %d bytes, want some and at most %d", counted.n, maxOutput)
				}
				t.Logf("streamed=%v: %v (%d bytes streamed)", streamed, err, counted.n)
				if !survivors(t, sb, "output-cap-7431") {
					sb = open(t, newTestBackend(t), testSpec(t, withRuntime(rt), long))
				}
			}
		})
	}
}

type countingWriter struct{ n int }

func (c *countingWriter) Write(p []byte) (int, error) { c.n += len(p); return len(p), nil }

var _ io.Writer = (*countingWriter)(nil)

// A caller's sink that blocks (a pipe nobody reads) does not hold the
// timeout up: the command is killed on time and the call returns.
func TestTimeoutWithABlockedSink(t *testing.T) {
	needDocker(t)
	t.Parallel()
	sb := open(t, newTestBackend(t), testSpec(t))
	unblock := make(chan struct{})
	defer close(unblock)
	blocked := writerFunc(func(p []byte) (int, error) { <-unblock; return len(p), nil })
	const limit = 1500 * time.Millisecond
	start := time.Now()
	_, err := sb.Run(t.Context(), []string{"sh", "-c", "echo blocked-sink-5151; sleep 5151"}, backends.RunOptions{Stdout: blocked, Timeout: limit})
	wantClass(t, err, model.ErrExecutionTimeout, "")
	if took := time.Since(start); took > limit+2*time.Second {
		t.Fatalf("ExecutionTimeout after %s with a %s limit", took, limit)
	}
	survivors(t, sb, "5151")
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
