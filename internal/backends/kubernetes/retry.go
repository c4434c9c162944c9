package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/vendorapi"
)

// API server faults are retried here, under every client this backend makes,
// instead of by client-go, which retries only answers with Retry-After, for
// every verb, creates included (its retries are switched off by hiding
// Retry-After from it). Repeatable calls (never an exec upgrade) are retried on
// 429, 5xx but 501 and no answer, with jittered backoff honouring Retry-After.
// A create is retried only by createWithLook (create.go), which looks first.
const (
	retryAttempts = 6
	retryBase     = 200 * time.Millisecond
	retryCeiling  = 2 * time.Second
	// maxRetryWait bounds what a server may ask to wait; the caller's
	// context bounds it further.
	maxRetryWait = 30 * time.Second
)

type retryTransport struct{ next http.RoundTripper }

// withRetries wraps a client's transport (rest.Config.Wrap).
func withRetries(rt http.RoundTripper) http.RoundTripper { return &retryTransport{next: rt} }

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !repeatable(req) {
		resp, err := t.next.RoundTrip(req)
		if resp != nil {
			if h := hintIn(req.Context()); h != nil {
				h.after = retryAfterOf(resp)
			}
			resp.Header.Del("Retry-After")
		}
		return resp, err
	}
	ctx := req.Context()
	for attempt := 0; ; attempt++ {
		r := req
		if attempt > 0 {
			r = req.Clone(ctx)
			if req.Body != nil && req.Body != http.NoBody {
				body, err := req.GetBody()
				if err != nil {
					return nil, err
				}
				r.Body = body
			}
		}
		resp, err := t.next.RoundTrip(r)
		if attempt+1 >= retryAttempts || !transient(resp, err) || ctx.Err() != nil {
			if resp != nil {
				resp.Header.Del("Retry-After")
			}
			return resp, err
		}
		wait := backoff(attempt)
		if resp != nil {
			wait = max(wait, retryAfterOf(resp))
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			// No retry fits: the caller gets this answer rather than a
			// bare deadline, so that it can say what the server answered.
			if resp != nil {
				resp.Header.Del("Retry-After")
			}
			return resp, err
		}
		if resp != nil {
			// Dropped for the next answer; an error's body is small.
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			_ = resp.Body.Close()
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// repeatable: a call whose repetition does nothing the first did not, and
// whose body (if any) can be sent again.
func repeatable(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodDelete, http.MethodPut, http.MethodPatch:
	default:
		return false
	}
	// An exec stream's upgrade: its WebSocket dialer reports a refused
	// upgrade as an error with no answer, indistinguishable here from a
	// lost connection, and the caller (exec) decides.
	if strings.EqualFold(req.Header.Get("Connection"), "upgrade") || req.Header.Get("Upgrade") != "" ||
		strings.HasSuffix(req.URL.Path, "/exec") || strings.HasSuffix(req.URL.Path, "/attach") {
		return false
	}
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// transient: an answer or a failure a retry may cure.
func transient(resp *http.Response, err error) bool {
	if err != nil {
		return resp == nil
	}
	return vendorapi.Retryable(resp.StatusCode)
}

// backoff is the wait before retry i+1: retryBase·2^i up to retryCeiling,
// with jitter over its upper half.
func backoff(i int) time.Duration {
	d := retryBase
	for range i {
		if d >= retryCeiling {
			break
		}
		d *= 2
	}
	d = min(d, retryCeiling)
	return d/2 + rand.N(d/2+1)
}

func retryAfterOf(resp *http.Response) time.Duration {
	return min(vendorapi.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()), maxRetryWait)
}

// retryHint carries the Retry-After of a create's answer to createWithLook.
type retryHint struct{ after time.Duration }

type hintKey struct{}

func withHint(ctx context.Context) (context.Context, *retryHint) {
	h := &retryHint{}
	return context.WithValue(ctx, hintKey{}, h), h
}

func hintIn(ctx context.Context) *retryHint {
	h, _ := ctx.Value(hintKey{}).(*retryHint)
	return h
}

// createAttempts bounds the creates createWithLook sends for one sandbox.
const createAttempts = 4

// createWithLook sends a create. A create whose answer says the server was
// busy or failing (429, 5xx) or that got no answer may have landed: before
// it is sent again, look shows whether the object exists, and one that does
// (and is this process's) is kept. So the end is one object or none, never
// two. Refusals (4xx) are not retried.
func createWithLook(ctx context.Context, post func(context.Context) error, look func(context.Context) (bool, error)) error {
	for attempt := 0; ; attempt++ {
		hctx, hint := withHint(ctx)
		err := post(hctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || attempt+1 >= createAttempts || !transientAPI(err) {
			return err
		}
		found, lerr := look(ctx)
		if lerr != nil {
			return fmt.Errorf("%w (and looking whether it landed failed: %w)", err, lerr)
		}
		if found {
			return nil
		}
		wait := max(backoff(attempt), hint.after)
		if s, ok := apierrors.SuggestsClientDelay(err); ok {
			wait = max(wait, min(time.Duration(s)*time.Second, maxRetryWait))
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// transientAPI: an API answer a retry may cure (429, 5xx other than 501),
// or a request that got no answer.
func transientAPI(err error) bool {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return vendorapi.Retryable(int(st.Status().Code))
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED)
}

// refusedOutright: the API server answered the create with a refusal
// (4xx other than 408 and 429), so nothing was created.
func refusedOutright(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return false
	}
	c := st.Status().Code
	return c >= 400 && c < 500 && c != http.StatusRequestTimeout && c != http.StatusTooManyRequests
}
