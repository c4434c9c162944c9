package vendorapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

const canary = "e2b_canary_7f3a9c1d0b5e"

// server answers each request with the next of answers (the last repeats)
// and records what it received.
type server struct {
	*httptest.Server
	mu      sync.Mutex
	got     []*http.Request
	at      []time.Time
	answers []func(w http.ResponseWriter, r *http.Request)
	n       atomic.Int32
}

func newServer(t *testing.T, answers ...func(w http.ResponseWriter, r *http.Request)) *server {
	s := &server{answers: answers}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.got = append(s.got, r.Clone(t.Context()))
		s.at = append(s.at, time.Now())
		s.mu.Unlock()
		i := min(int(s.n.Add(1))-1, len(s.answers)-1)
		s.answers[i](w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) requests() int { return int(s.n.Load()) }

func (s *server) client() *Client {
	u, _ := url.Parse(s.URL + "/api")
	return &Client{BaseURL: u, HTTP: s.Client(), Vendor: "E2B", AuthHeader: "X-API-Key",
		Credential: NewCredential(canary), CredentialEnv: "E2B_API_KEY", Backoff: 10 * time.Millisecond}
}

func status(code int, body string, headers ...string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
	}
}

// echoKey answers code with a body that repeats the request's key and
// headers, as a careless vendor might.
func echoKey(code int) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(map[string]any{"message": "bad key " + r.Header.Get("X-API-Key"), "headers": r.Header})
	}
}

func noCanary(t *testing.T, what string, s string) {
	t.Helper()
	if strings.Contains(s, canary) {
		t.Fatalf("%s holds the API key: %s", what, s)
	}
}

func TestCredentialNeverPrinted(t *testing.T) {
	c := NewCredential(canary)
	type config struct {
		Key  Credential
		Name string
	}
	cfg := config{Key: c, Name: "x"}
	// fmt cannot call the methods of a value in an unexported field.
	hidden := struct {
		key  Credential
		keys []Credential
	}{c, []Credential{c}}
	j, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("open", "key", c, "cfg", cfg)
	for _, s := range []string{
		fmt.Sprint(c), fmt.Sprintf("%v %+v %#v %s %q %x %X %d", c, c, c, c, c, c, c, c),
		fmt.Sprintf("%v %+v %#v", cfg, cfg, &cfg), string(j), logs.String(), c.String(), c.GoString(),
	} {
		noCanary(t, "formatted credential", s+fmt.Sprintf("%v %+v %#v", hidden, hidden, hidden))
		noCanary(t, "formatted credential", s)
		if !strings.Contains(s, Redacted) {
			t.Fatalf("formatted credential %q does not say %s", s, Redacted)
		}
	}
	if c.Reveal() != canary {
		t.Fatal("Reveal lost the value")
	}
}

func TestAuthHeaderInjected(t *testing.T) {
	t.Parallel()
	var key, auth string
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		key, auth = r.Header.Get("X-API-Key"), r.Header.Get("Authorization")
		_, _ = w.Write([]byte(`{"sandboxID":"sb1"}`))
	})
	c := s.client()
	var out struct{ SandboxID string }
	if _, err := c.Do(t.Context(), Request{Op: "get sandbox", Method: "GET", Path: "/sandboxes/sb1"}, &out); err != nil {
		t.Fatal(err)
	}
	if key != canary || out.SandboxID != "sb1" {
		t.Fatalf("key header %q, decoded %+v", key, out)
	}
	c.AuthHeader, c.AuthPrefix = "Authorization", "Bearer "
	if _, err := c.Do(t.Context(), Request{Op: "get sandbox", Method: "GET", Path: "/sandboxes/sb1"}, nil); err != nil {
		t.Fatal(err)
	}
	if auth != "Bearer "+canary {
		t.Fatalf("Authorization %q", auth)
	}
	if got := s.got[0].URL.Path; got != "/api/sandboxes/sb1" {
		t.Fatalf("path %q", got)
	}
}

// Every status maps to its class, with a message and a fix, and no text
// holds the key even when the vendor echoes it back.
func TestStatusesAreTyped(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		status  int
		sandbox bool
		class   model.ErrorClass
		attr    string
		fix     string
	}{
		{401, false, model.ErrConfiguration, "credentials", "E2B_API_KEY"},
		{403, true, model.ErrConfiguration, "credentials", "E2B_API_KEY"},
		{404, true, model.ErrSandboxGone, "", "open a new sandbox"},
		{404, false, model.ErrConfiguration, "", "template"},
		{409, false, model.ErrConfiguration, "", "conflict"},
		{400, false, model.ErrConfiguration, "", "vendor accepts"},
		{429, false, "", "", "rate"},
		{500, false, "", "", "retry later"},
		{503, true, "", "", "retry later"},
	} {
		t.Run(fmt.Sprintf("%d-sandbox=%v", c.status, c.sandbox), func(t *testing.T) {
			t.Parallel()
			s := newServer(t, echoKey(c.status))
			cl := s.client()
			cl.Attempts = 2
			_, err := cl.Do(t.Context(), Request{Op: "delete sandbox", Method: "DELETE", Path: "/sandboxes/sb1", Sandbox: c.sandbox}, nil)
			if err == nil {
				t.Fatal("no error")
			}
			text := err.Error() + fmt.Sprintf(" %+v %#v", err, err)
			noCanary(t, "error", text)
			if strings.Contains(text, "X-Api-Key") || strings.Contains(text, "User-Agent") {
				t.Fatalf("error holds request headers: %s", text)
			}
			if c.class == "" {
				var se *StatusError
				if !errors.As(err, &se) || se.Status != c.status {
					t.Fatalf("want a StatusError %d, got %v", c.status, err)
				}
				for _, k := range model.ErrorClasses {
					if errors.Is(err, k) {
						t.Fatalf("%d classed %s: %v", c.status, k, err)
					}
				}
			} else {
				var me *model.Error
				if !errors.Is(err, c.class) || !errors.As(err, &me) || me.Attribute != c.attr {
					t.Fatalf("want %s on %q, got %v", c.class, c.attr, err)
				}
				if StatusOf(err) != c.status {
					t.Fatalf("status %d lost from %v", c.status, err)
				}
			}
			if !strings.Contains(err.Error(), c.fix) || !strings.Contains(err.Error(), "delete sandbox") {
				t.Fatalf("error %q lacks its fix (%q) or the operation", err, c.fix)
			}
			if Retryable(c.status) && s.requests() != 2 || !Retryable(c.status) && s.requests() != 1 {
				t.Fatalf("%d: %d requests", c.status, s.requests())
			}
		})
	}
}

func TestIdempotentRetriedThenSucceeds(t *testing.T) {
	t.Parallel()
	s := newServer(t, status(503, "down"), status(500, `{"message":"oops"}`), status(200, `{}`))
	if _, err := s.client().Do(t.Context(), Request{Op: "list sandboxes", Method: "GET", Path: "/v2/sandboxes"}, nil); err != nil {
		t.Fatal(err)
	}
	if s.requests() != 3 {
		t.Fatalf("%d requests, want 3", s.requests())
	}
	// Backoff between them: the second wait is longer than the first's
	// floor (Backoff/2 = 5 ms, then 10 ms).
	if d := s.at[1].Sub(s.at[0]); d < 5*time.Millisecond {
		t.Fatalf("retried after %s, before any backoff", d)
	}
}

// A POST (a create) is never retried here, whatever the status.
func TestCreateNeverRetried(t *testing.T) {
	t.Parallel()
	for _, code := range []int{429, 500, 502, 503} {
		s := newServer(t, status(code, "", "Retry-After", "1"), status(201, `{}`))
		_, err := s.client().Do(t.Context(), Request{Op: "create sandbox", Method: "POST", Path: "/sandboxes", JSON: map[string]string{"templateID": "base"}}, nil)
		if err == nil || s.requests() != 1 {
			t.Fatalf("%d: err %v after %d requests, want an error after 1", code, err, s.requests())
		}
		if ra, ok := RetryAfter(err); !ok || ra != time.Second {
			t.Fatalf("%d: Retry-After %v %v not carried", code, ra, ok)
		}
	}
	// Unless the vendor documents it as safe to repeat.
	s := newServer(t, status(503, ""), status(200, `{}`))
	if _, err := s.client().Do(t.Context(), Request{Op: "refresh", Method: "POST", Path: "/sandboxes/x/refreshes", Idempotent: true}, nil); err != nil || s.requests() != 2 {
		t.Fatalf("idempotent POST: %v after %d requests", err, s.requests())
	}
}

func TestRetryAfterHonoured(t *testing.T) {
	t.Parallel()
	for name, header := range map[string]func() string{
		"seconds":   func() string { return "1" },
		"http-date": func() string { return time.Now().Add(2 * time.Second).UTC().Format(http.TimeFormat) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", header())
				w.WriteHeader(429)
			}, status(200, `{}`))
			if _, err := s.client().Do(t.Context(), Request{Op: "list", Method: "GET", Path: "/v2/sandboxes"}, nil); err != nil {
				t.Fatal(err)
			}
			// An HTTP date has one-second resolution: 2 s ahead is at least 1 s.
			if d := s.at[1].Sub(s.at[0]); d < 950*time.Millisecond {
				t.Fatalf("retried after %s, before Retry-After", d)
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"": 0, "0": 0, "-3": 0, "7": 7 * time.Second, "junk": 0, "99999999999": maxRetryAfter,
		now.Add(30 * time.Second).Format(http.TimeFormat): 30 * time.Second,
		now.Add(-time.Hour).Format(http.TimeFormat):       0,
		now.Add(48 * time.Hour).Format(http.TimeFormat):   maxRetryAfter,
	} {
		if got := parseRetryAfter(v, now); got != want {
			t.Errorf("parseRetryAfter(%q) = %s, want %s", v, got, want)
		}
	}
}

// A failure that persists ends within the caller's context; a Retry-After
// past the deadline is not waited for.
func TestBoundedByContext(t *testing.T) {
	t.Parallel()
	s := newServer(t, status(503, "", "Retry-After", "30"))
	c := s.client()
	c.Attempts = 100
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Do(ctx, Request{Op: "list", Method: "GET", Path: "/v2/sandboxes"}, nil)
	if err == nil || StatusOf(err) != 503 {
		t.Fatalf("want the 503, got %v", err)
	}
	if took := time.Since(start); took > 400*time.Millisecond || s.requests() != 1 {
		t.Fatalf("took %s and %d requests; a 30 s Retry-After past a 500 ms deadline is not waited for", took, s.requests())
	}

	s = newServer(t, status(503, ""))
	c = s.client()
	c.Attempts, c.Backoff = 1000, 50*time.Millisecond
	ctx, cancel = context.WithTimeout(t.Context(), 700*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, err = c.Do(ctx, Request{Op: "list", Method: "GET", Path: "/v2/sandboxes"}, nil)
	if err == nil {
		t.Fatal("no error")
	}
	if took := time.Since(start); took > 900*time.Millisecond || s.requests() < 3 {
		t.Fatalf("took %s with %d requests, want several within the 700 ms context", took, s.requests())
	}
}

func TestBodyBounded(t *testing.T) {
	t.Parallel()
	s := newServer(t, status(200, strings.Repeat("x", 4096)))
	c := s.client()
	c.MaxBody = 1024
	_, err := c.Do(t.Context(), Request{Op: "get", Method: "GET", Path: "/x"}, nil)
	if err == nil || !strings.Contains(err.Error(), "larger than 1024 bytes") {
		t.Fatalf("want a size error, got %v", err)
	}
	// The vendor's message in an error is clipped.
	s = newServer(t, status(400, `{"message":"`+strings.Repeat("y", 10000)+`"}`))
	_, err = s.client().Do(t.Context(), Request{Op: "create", Method: "POST", Path: "/x"}, nil)
	if err == nil || len(err.Error()) > 2000 {
		t.Fatalf("error of %d bytes, want the message clipped", len(err.Error()))
	}
}

// A request that gets no answer is retried when idempotent and reported
// without the URL's credentials or the key.
func TestTransportErrors(t *testing.T) {
	t.Parallel()
	s := newServer(t, status(200, ""))
	c := s.client()
	c.BaseURL.User = url.UserPassword("user", canary)
	s.Close()
	_, err := c.Do(t.Context(), Request{Op: "list", Method: "GET", Path: "/v2/sandboxes"}, nil)
	if err == nil {
		t.Fatal("no error from a closed server")
	}
	noCanary(t, "transport error", err.Error())
	if !strings.Contains(err.Error(), "no answer") || !strings.Contains(err.Error(), "/v2/sandboxes") {
		t.Fatalf("unclear transport error: %v", err)
	}
}

func TestBackoffGrowsWithJitter(t *testing.T) {
	c := &Client{Backoff: 100 * time.Millisecond, MaxWait: time.Second}
	for i, want := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		want *= time.Millisecond
		seen := map[time.Duration]bool{}
		for range 50 {
			d := c.backoff(i)
			if d < want/2 || d > want {
				t.Fatalf("backoff(%d) = %s, want in [%s, %s]", i, d, want/2, want)
			}
			seen[d] = true
		}
		if len(seen) < 5 {
			t.Fatalf("backoff(%d) has no jitter: %v", i, seen)
		}
	}
}
