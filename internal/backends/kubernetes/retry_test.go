package kubernetes

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// scripted answers the nth request with codes[n] (the last code after
// that), through writeStatus, and counts the requests.
func scripted(t *testing.T, retryAfter time.Duration, codes ...int) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(n.Add(1)) - 1
		code := codes[min(i, len(codes)-1)]
		if code == http.StatusOK {
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte("{}"))
			return
		}
		writeStatus(w, code, retryAfter, "scripted")
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// send makes one call through the retry transport and returns the answer's
// status and header.
func send(t *testing.T, ctx context.Context, method, url string) (int, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(`{"x":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := withRetries(http.DefaultTransport).RoundTrip(req)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode, resp.Header
}

func TestRetryTransport_RepeatsIdempotentCalls(t *testing.T) {
	for _, method := range []string{http.MethodGet, http.MethodDelete, http.MethodPatch} {
		srv, n := scripted(t, 0, 503, 500, 200)
		if code, _ := send(t, t.Context(), method, srv.URL); code != 200 || n.Load() != 3 {
			t.Errorf("%s answered 503, 500, 200: got %d after %d requests, want 200 after 3", method, code, n.Load())
		}
	}
}

func TestRetryTransport_WaitsForRetryAfter(t *testing.T) {
	srv, n := scripted(t, time.Second, 429, 200)
	start := time.Now()
	code, _ := send(t, t.Context(), http.MethodGet, srv.URL)
	if code != 200 || n.Load() != 2 {
		t.Fatalf("got %d after %d requests, want 200 after 2", code, n.Load())
	}
	if took := time.Since(start); took < time.Second {
		t.Errorf("retried after %s, before Retry-After (1 s)", took)
	}
}

// A create is never repeated by the transport, and client-go must not see
// Retry-After (it would repeat the create itself); the hint carries it.
func TestRetryTransport_NeverRepeatsACreate(t *testing.T) {
	srv, n := scripted(t, 2*time.Second, 429, 200)
	ctx, hint := withHint(t.Context())
	code, header := send(t, ctx, http.MethodPost, srv.URL)
	if code != 429 || n.Load() != 1 {
		t.Fatalf("POST answered 429: got %d after %d requests, want 429 after 1", code, n.Load())
	}
	if v := header.Get("Retry-After"); v != "" {
		t.Errorf("Retry-After %q reached client-go", v)
	}
	if hint.after != 2*time.Second {
		t.Errorf("the hint says %s, want 2s", hint.after)
	}
}

func TestRetryTransport_RefusalsAreNotRepeated(t *testing.T) {
	for _, code := range []int{401, 403, 404, 409, 501} {
		srv, n := scripted(t, 0, code, 200)
		if got, _ := send(t, t.Context(), http.MethodGet, srv.URL); got != code || n.Load() != 1 {
			t.Errorf("GET answered %d: got %d after %d requests, want %d after 1", code, got, n.Load(), code)
		}
	}
}

// A failure that persists ends within the caller's deadline with the
// server's last answer, not a bare deadline.
func TestRetryTransport_PersistentFailureEndsInTime(t *testing.T) {
	srv, n := scripted(t, 0, 503)
	ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer cancel()
	start := time.Now()
	code, _ := send(t, ctx, http.MethodGet, srv.URL)
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("returned after %s, past the 1.5 s deadline", took)
	}
	if code != 503 || n.Load() < 2 {
		t.Errorf("got %d after %d requests, want the 503 after some retries", code, n.Load())
	}
}

func TestCreateWithLook(t *testing.T) {
	busy := apierrors.NewServiceUnavailable("busy")
	ctx := t.Context()
	for _, c := range []struct {
		name      string
		answers   []error
		found     []bool
		wantPosts int
		wantLooks int
		wantErr   bool
	}{
		{"first create lands", []error{nil}, nil, 1, 0, false},
		{"answer lost, the look finds it", []error{busy}, []bool{true}, 1, 1, false},
		{"refused while busy, then lands", []error{busy, nil}, []bool{false}, 2, 1, false},
		{"forbidden is not retried", []error{apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "x", errors.New("no"))}, nil, 1, 0, true},
		{"busy every time", []error{busy, busy, busy, busy, busy}, []bool{false, false, false, false}, createAttempts, createAttempts - 1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			posts, looks := 0, 0
			err := createWithLook(ctx, func(context.Context) error {
				posts++
				return c.answers[min(posts, len(c.answers))-1]
			}, func(context.Context) (bool, error) {
				looks++
				return c.found[looks-1], nil
			})
			if posts != c.wantPosts || looks != c.wantLooks || (err != nil) != c.wantErr {
				t.Fatalf("posts %d, looks %d, err %v; want posts %d, looks %d, error %v", posts, looks, err, c.wantPosts, c.wantLooks, c.wantErr)
			}
		})
	}
}
