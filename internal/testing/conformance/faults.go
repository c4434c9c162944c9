package backendtest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// inject arms f until the test ends.
func (e *env) inject(t *testing.T, f Fault) {
	t.Helper()
	e.h.Faults.Inject(f)
	t.Cleanup(e.h.Faults.Clear)
}

// reap removes what a fault left that the adapter believes gone, through
// the backend's Reaper when it has one.
func (e *env) reap(t *testing.T, labels map[string]string) {
	t.Helper()
	e.h.Faults.Clear()
	r, ok := e.h.Backend.(backends.Reaper)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	if _, err := r.Reap(ctx, backends.ReapOptions{Labels: labels, Now: time.Now().Add(1000 * time.Hour)}); err != nil {
		t.Logf("reap %v: %v", labels, err)
	}
}

// tryCreate creates with the case's labels; a sandbox it opens is closed
// when the test ends.
func (e *env) tryCreate(t *testing.T, timeout time.Duration) (backends.Sandbox, map[string]string, error) {
	t.Helper()
	spec, labels := e.spec(t)
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	sb, err := e.h.Backend.Create(ctx, backends.CreateRequest{Spec: spec, Timeout: timeout})
	if err == nil {
		t.Cleanup(func() { _ = sb.Close(context.WithoutCancel(t.Context())) })
	} else {
		e.noLeak(t, "create error", err.Error())
	}
	return sb, labels, err
}

// faultAuth: 401 and 403 are ConfigurationErrors about the credentials,
// never retried, and create nothing.
func faultAuth(t *testing.T, e *env) {
	for _, status := range []int{401, 403} {
		e.inject(t, Fault{Op: OpCreate, Status: status, Times: 100})
		_, labels, err := e.tryCreate(t, 0)
		me := e.classError(t, err, model.ErrConfiguration, "a create answered "+itoa(status))
		text := strings.ToLower(me.Message + " " + me.Fix + " " + me.Attribute)
		if !strings.Contains(text, "credential") && !strings.Contains(text, "key") && !strings.Contains(text, "token") {
			t.Errorf("%d: the error does not point at the credentials: %v", status, err)
		}
		if n := e.h.Faults.Requests(OpCreate); n != 1 {
			t.Errorf("%d: the create was sent %d times, want once (an auth failure is not retried)", status, n)
		}
		e.h.Faults.Clear()
		e.waitNone(t, labels, "a create refused for its credentials")
	}
}

// faultNotFound: a 404 on a sandbox's path means the sandbox is gone.
func faultNotFound(t *testing.T, e *env) {
	o := e.open(t)
	sh(t, o.sb, "true")
	e.inject(t, Fault{Op: OpRun, Status: 404, Times: 100})
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	_, err := o.sb.Run(ctx, []string{"true"}, backends.RunOptions{})
	e.wantClass(t, err, model.ErrSandboxGone, "a run answered 404")
	e.reap(t, o.labels)
}

// faultConflict: 409 on create is a typed refusal, not retried blindly.
func faultConflict(t *testing.T, e *env) {
	e.inject(t, Fault{Op: OpCreate, Status: 409, Times: 100})
	_, labels, err := e.tryCreate(t, 0)
	if err == nil || classOf(err) == "" {
		t.Fatalf("a create answered 409: %v, want a typed model error", err)
	}
	if n := e.h.Faults.Requests(OpCreate); n != 1 {
		t.Errorf("a create answered 409 was sent %d times, want once", n)
	}
	e.h.Faults.Clear()
	e.waitNone(t, labels, "a create refused with 409")
}

// faultRetryAfter: an idempotent call answered 429 with Retry-After is
// retried, no sooner than Retry-After says, and succeeds.
func faultRetryAfter(t *testing.T, e *env) {
	const after = 1500 * time.Millisecond
	e.inject(t, Fault{Op: OpList, Status: 429, RetryAfter: after})
	start := time.Now()
	_ = e.list(t, map[string]string{LabelRun: e.runID})
	took := time.Since(start)
	if n := e.h.Faults.Requests(OpList); n < 2 {
		t.Fatalf("list answered 429 was sent %d times, want a retry", n)
	}
	// Retry-After travels in whole seconds: 1.5 s may be sent as 1 or 2.
	if took < time.Second {
		t.Fatalf("list retried after %s, before Retry-After (%s)", took.Round(time.Millisecond), after)
	}
}

// faultRetry5xx: an idempotent call answered 503 then 500 is retried with
// backoff and succeeds.
func faultRetry5xx(t *testing.T, e *env) {
	e.inject(t, Fault{Op: OpList, Status: 503, Times: 2})
	_ = e.list(t, map[string]string{LabelRun: e.runID})
	if n := e.h.Faults.Requests(OpList); n < 3 {
		t.Fatalf("list answered 503 twice was sent %d times, want at least 3", n)
	}
	o := e.open(t)
	e.inject(t, Fault{Op: OpKill, Status: 500, Times: 1})
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	if err := o.sb.Kill(ctx); err != nil {
		t.Fatalf("kill answered 500 once: %v, want a retry that succeeds", err)
	}
	if n := e.h.Faults.Requests(OpKill); n < 2 {
		t.Fatalf("kill answered 500 was sent %d times, want a retry", n)
	}
	e.h.Faults.Clear()
	e.waitNone(t, o.labels, "a killed sandbox")
}

// faultPersistent: a failure that persists ends within the caller's
// context with a clear error, holding no credential.
func faultPersistent(t *testing.T, e *env) {
	e.inject(t, Fault{Op: OpList, Status: 503, Times: 1 << 20})
	const bound = 4 * time.Second
	ctx, cancel := context.WithTimeout(t.Context(), bound)
	defer cancel()
	start := time.Now()
	_, err := e.h.Backend.List(ctx, map[string]string{LabelRun: e.runID})
	took := time.Since(start)
	if err == nil {
		t.Fatalf("list answered 503 every time succeeded")
	}
	e.noLeak(t, "a persistent 503", err.Error())
	if took > bound+time.Second {
		t.Errorf("a persistent 503 returned after %s, past the caller's %s", took.Round(time.Millisecond), bound)
	}
	if c := classOf(err); c == model.ErrSandboxGone || c == model.ErrExecutionTimeout || c == model.ErrResourceLimitExceeded {
		t.Errorf("a persistent 503 on list is classed %s: %v", c, err)
	}
	if strings.TrimSpace(err.Error()) == "" {
		t.Errorf("a persistent 503 gives an empty error")
	}
}

// createOutcome checks that after a create under a fault exactly the
// sandbox Create returned exists, or none when it failed.
func (e *env) createOutcome(t *testing.T, sb backends.Sandbox, labels map[string]string, err error, what string) {
	t.Helper()
	e.h.Faults.Clear()
	if err != nil {
		t.Logf("%s: create failed: %v", what, err)
		e.waitNone(t, labels, what+": a failed create")
		return
	}
	got := running(e.list(t, labels))
	if len(got) != 1 || got[0].ID != sb.ID() {
		t.Fatalf("%s: %d sandboxes with the create's labels (%v), want exactly the one returned (%s)", what, len(got), ids(got), sb.ID())
	}
	sh(t, sb, "true")
}

// faultCreateRefused: a create answered 429 or 503 (nothing created) is
// not retried blindly: a retry is preceded by a look by label, and the end
// is one sandbox or none.
func faultCreateRefused(t *testing.T, e *env) {
	for _, f := range []Fault{{Op: OpCreate, Status: 429, RetryAfter: time.Second}, {Op: OpCreate, Status: 503}} {
		e.inject(t, f)
		start := time.Now()
		sb, labels, err := e.tryCreate(t, 0)
		creates, lists := e.h.Faults.Requests(OpCreate), e.h.Faults.Requests(OpList)+e.h.Faults.Requests(OpGet)
		if creates > 1 && lists < creates-1 {
			t.Errorf("%d: create sent %d times with %d looks by label between: a retry must look first", f.Status, creates, lists)
		}
		if creates > 1 && f.RetryAfter > 0 && time.Since(start) < f.RetryAfter {
			t.Errorf("%d: create retried before Retry-After", f.Status)
		}
		e.createOutcome(t, sb, labels, err, itoa(f.Status)+" on create")
	}
}

// faultCreateAmbiguous: the server creates the sandbox and answers 500 (or
// 502): the caller cannot know the outcome, and must not end with two.
func faultCreateAmbiguous(t *testing.T, e *env) {
	for _, status := range []int{500, 502} {
		e.inject(t, Fault{Op: OpCreate, Status: status, Applied: true})
		sb, labels, err := e.tryCreate(t, 0)
		e.createOutcome(t, sb, labels, err, itoa(status)+" after the sandbox was created")
	}
}

// faultCreateStalled: a vendor that does not answer within the create's
// timeout gives CreateTimeout, about then, and leaves nothing.
func faultCreateStalled(t *testing.T, e *env) {
	e.inject(t, Fault{Op: OpCreate, Status: 503, Delay: 5 * time.Second, Times: 100})
	const limit = 1500 * time.Millisecond
	start := time.Now()
	_, labels, err := e.tryCreate(t, limit)
	took := time.Since(start)
	e.wantClass(t, err, model.ErrCreateTimeout, "a stalled create")
	if took > limit+2*time.Second {
		t.Errorf("CreateTimeout after %s, want about the create timeout %s", took.Round(time.Millisecond), limit)
	}
	e.h.Faults.Clear()
	e.waitNone(t, labels, "a stalled create")
}

func itoa(n int) string { return strconv.Itoa(n) }
