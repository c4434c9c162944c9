package backendtest_test

// A self-test of the fault behaviours, which no Docker run exercises: a
// small vendor control plane on httptest (sandboxes as records, commands
// not executed: it tests the suite, it is no conformance server) with fault
// injection, and an adapter for it built on vendorapi the way a cloud
// backend is: retries of idempotent calls in the client, a create checked by
// label before any retry. Broken variants of the adapter must make the
// suite fail, shown in a child process.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/vendorapi"
	backendtest "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/conformance"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

const fakeKey = "fake_canary_key_3c9d1e"

// brokenEnv selects a broken adapter in the child process.
const brokenEnv = "BACKENDTEST_SELFTEST_BROKEN"

// fakeVendor is the control plane: sandboxes with labels, and one armed
// fault.
type fakeVendor struct {
	mu     sync.Mutex
	next   int
	boxes  map[string]map[string]string // id → labels
	fault  backendtest.Fault
	left   int
	counts map[backendtest.Op]int
}

func (v *fakeVendor) Inject(f backendtest.Fault) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.fault, v.left, v.counts = f, max(f.Times, 1), map[backendtest.Op]int{}
}

func (v *fakeVendor) Requests(op backendtest.Op) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.counts[op]
}

func (v *fakeVendor) Clear() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.left = 0
}

func opOf(r *http.Request) backendtest.Op {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/sandboxes":
		return backendtest.OpCreate
	case r.Method == http.MethodGet && r.URL.Path == "/sandboxes":
		return backendtest.OpList
	case r.Method == http.MethodDelete:
		return backendtest.OpKill
	case strings.HasSuffix(r.URL.Path, "/run"):
		return backendtest.OpRun
	}
	return backendtest.OpGet
}

func (v *fakeVendor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-API-Key") != fakeKey {
		http.Error(w, `{"message":"unauthorized"}`, http.StatusUnauthorized)
		return
	}
	op := opOf(r)
	v.mu.Lock()
	if v.counts == nil {
		v.counts = map[backendtest.Op]int{}
	}
	v.counts[op]++
	f, faulted := v.fault, v.left > 0 && v.fault.Op == op
	if faulted {
		v.left--
	}
	v.mu.Unlock()
	if faulted {
		if f.Applied {
			v.serve(httptest.NewRecorder(), r, op)
		}
		select {
		case <-time.After(f.Delay):
		case <-r.Context().Done():
			return
		}
		if f.RetryAfter > 0 {
			w.Header().Set("Retry-After", fmt.Sprint(int((f.RetryAfter+time.Second-1)/time.Second)))
		}
		w.WriteHeader(f.Status)
		_, _ = fmt.Fprintf(w, `{"message":"injected %d"}`, f.Status)
		return
	}
	v.serve(w, r, op)
}

func (v *fakeVendor) serve(w http.ResponseWriter, r *http.Request, op backendtest.Op) {
	v.mu.Lock()
	defer v.mu.Unlock()
	id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/sandboxes/"), "/run")
	switch op {
	case backendtest.OpCreate:
		var labels map[string]string
		if err := json.NewDecoder(r.Body).Decode(&labels); err != nil {
			http.Error(w, `{"message":"bad body"}`, http.StatusBadRequest)
			return
		}
		v.next++
		id = fmt.Sprintf("sb%d", v.next)
		v.boxes[id] = labels
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]string{"id": id})
	case backendtest.OpList:
		var out []backends.Info
		for bid, labels := range v.boxes {
			if matches(labels, r.URL.Query()) {
				out = append(out, backends.Info{ID: bid, Labels: labels, Running: true})
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
		_ = json.NewEncoder(w).Encode(out)
	case backendtest.OpKill:
		if _, ok := v.boxes[id]; !ok {
			http.Error(w, `{"message":"no such sandbox"}`, http.StatusNotFound)
			return
		}
		delete(v.boxes, id)
		w.WriteHeader(http.StatusNoContent)
	default:
		if _, ok := v.boxes[id]; !ok {
			http.Error(w, `{"message":"no such sandbox"}`, http.StatusNotFound)
			return
		}
		_, _ = w.Write([]byte(`{"exitCode":0}`))
	}
}

func matches(labels map[string]string, q url.Values) bool {
	for _, kv := range q["label"] {
		k, val, _ := strings.Cut(kv, "=")
		if labels[k] != val {
			return false
		}
	}
	return true
}

// fakeBackend is the adapter.
type fakeBackend struct {
	c      *vendorapi.Client
	broken string
}

func (b *fakeBackend) Name() string { return "fake" }
func (b *fakeBackend) Capabilities(string) (backends.Capabilities, bool) {
	return backends.Capabilities{}, false
}
func (b *fakeBackend) Close() error { return nil }

func (b *fakeBackend) List(ctx context.Context, labels map[string]string) ([]backends.Info, error) {
	q := url.Values{}
	for k, v := range labels {
		q.Add("label", k+"="+v)
	}
	var out []backends.Info
	_, err := b.c.Do(ctx, vendorapi.Request{Op: "list sandboxes", Method: http.MethodGet, Path: "/sandboxes", Query: q}, &out)
	return out, err
}

// Create never retries blindly: after a create that failed in a way that
// may have created the sandbox, or was refused for now, it looks by label
// and adopts what it finds before trying again.
func (b *fakeBackend) Create(ctx context.Context, req backends.CreateRequest) (backends.Sandbox, error) {
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	labels := req.Spec.Labels
	for attempt := 0; ; attempt++ {
		var out struct{ ID string }
		_, err := b.c.Do(ctx, vendorapi.Request{Op: "create sandbox", Method: http.MethodPost, Path: "/sandboxes", JSON: labels}, &out)
		if err == nil {
			return &fakeSandbox{b: b, id: out.ID, labels: labels}, nil
		}
		if ctx.Err() != nil {
			return nil, &model.Error{Class: model.ErrCreateTimeout, Message: fmt.Sprintf("no sandbox within %s", timeout), Fix: "raise the create timeout", Err: err}
		}
		if b.broken == "leak-key" {
			err = fmt.Errorf("with key %s: %w", b.c.Credential.Reveal(), err)
		}
		status := vendorapi.StatusOf(err)
		if !vendorapi.Retryable(status) || attempt == 2 {
			return nil, fmt.Errorf("sandbox create: %w", err)
		}
		if b.broken != "blind-retry" {
			found, lerr := b.List(ctx, labels)
			if lerr != nil {
				return nil, fmt.Errorf("sandbox create: %w (and looking for it by label: %w)", err, lerr)
			}
			if len(found) > 0 {
				return &fakeSandbox{b: b, id: found[0].ID, labels: labels}, nil
			}
		}
		wait, _ := vendorapi.RetryAfter(err)
		if b.broken == "no-retry-after" {
			wait = 0
		}
		select {
		case <-ctx.Done():
			return nil, &model.Error{Class: model.ErrCreateTimeout, Message: fmt.Sprintf("no sandbox within %s", timeout), Fix: "raise the create timeout", Err: err}
		case <-time.After(max(wait, 50*time.Millisecond)):
		}
	}
}

type fakeSandbox struct {
	b      *fakeBackend
	id     string
	labels map[string]string
	mu     sync.Mutex
	gone   bool
}

func (s *fakeSandbox) ID() string { return s.id }
func (s *fakeSandbox) Info() backends.Info {
	return backends.Info{ID: s.id, Backend: "fake", Labels: s.labels, Running: true}
}

func (s *fakeSandbox) Run(ctx context.Context, cmd []string, _ backends.RunOptions) (backends.Result, error) {
	var out struct{ ExitCode int }
	_, err := s.b.c.Do(ctx, vendorapi.Request{Op: "run", Method: http.MethodPost, Path: "/sandboxes/" + s.id + "/run", Sandbox: true, JSON: cmd}, &out)
	if err != nil {
		return backends.Result{}, err
	}
	return backends.Result{ExitCode: out.ExitCode}, nil
}

func (s *fakeSandbox) RunCode(ctx context.Context, _, code string, opts backends.RunOptions) (backends.Result, error) {
	return s.Run(ctx, []string{"sh", "-c", code}, opts)
}

func (s *fakeSandbox) Upload(context.Context, string, []byte, int64) error {
	return errors.New("not supported")
}

func (s *fakeSandbox) Kill(ctx context.Context) error {
	attempts := 0
	if s.b.broken == "no-kill-retry" {
		attempts = 1
	}
	c := *s.b.c
	c.Attempts = attempts
	_, err := c.Do(ctx, vendorapi.Request{Op: "kill sandbox", Method: http.MethodDelete, Path: "/sandboxes/" + s.id, Sandbox: true}, nil)
	if errors.Is(err, model.ErrSandboxGone) {
		err = nil
	}
	return err
}

func (s *fakeSandbox) Close(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), model.TeardownGrace)
	defer cancel()
	err := s.Kill(ctx)
	s.gone = err == nil
	return err
}

// Reap lets the suite remove what a 404 fault left.
func (b *fakeBackend) Reap(ctx context.Context, opts backends.ReapOptions) ([]backends.Reaped, error) {
	found, err := b.List(ctx, opts.Labels)
	if err != nil {
		return nil, err
	}
	for _, in := range found {
		_ = (&fakeSandbox{b: b, id: in.ID}).Kill(ctx)
	}
	return nil, nil
}

func fakeHarness(t *testing.T, broken string) backendtest.Harness {
	v := &fakeVendor{boxes: map[string]map[string]string{}}
	srv := httptest.NewServer(v)
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	c := &vendorapi.Client{BaseURL: u, HTTP: srv.Client(), Vendor: "Fake", AuthHeader: "X-API-Key",
		Credential: vendorapi.NewCredential(fakeKey), CredentialEnv: "FAKE_API_KEY", Backoff: 100 * time.Millisecond}
	if broken == "no-retry" {
		c.Attempts = 1
	}
	b := &fakeBackend{c: c, broken: broken}
	faults := []backendtest.Behaviour{}
	for _, x := range backendtest.Behaviours() {
		if strings.HasPrefix(string(x), "fault-") {
			faults = append(faults, x)
		}
	}
	return backendtest.Harness{
		Name: "fake", Backend: b, Faults: v, Credential: fakeKey, Only: faults, GoneWithin: 2 * time.Second,
		Spec: func() model.Spec {
			return model.Spec{SpecVersion: model.SpecVersion, Name: "fake", Backend: "fake://", Image: "base",
				Network: model.NetworkPolicy{}.Normalized(), Resources: model.DefaultCaps(), TimeoutSeconds: 60, LifetimeSeconds: 60}
		},
	}
}

// TestFaultBehaviours runs the fault behaviours against the sound adapter.
func TestFaultBehaviours(t *testing.T) {
	if b := os.Getenv(brokenEnv); b != "" {
		backendtest.Run(t, fakeHarness(t, b)) // the child of TestSuiteCatchesBrokenAdapters
		return
	}
	t.Parallel()
	backendtest.Run(t, fakeHarness(t, ""))
}

// TestSuiteCatchesBrokenAdapters shows that each fault behaviour can fail:
// an adapter broken in one way fails the behaviour that covers it.
func TestSuiteCatchesBrokenAdapters(t *testing.T) {
	t.Parallel()
	for broken, want := range map[string]backendtest.Behaviour{
		"blind-retry":    backendtest.FaultCreateUnknown,
		"no-retry":       backendtest.FaultRetry5xx,
		"no-retry-after": backendtest.FaultCreateRefused,
		"no-kill-retry":  backendtest.FaultRetry5xx,
		"leak-key":       backendtest.FaultAuth,
	} {
		t.Run(broken, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestFaultBehaviours$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), brokenEnv+"="+broken)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed an adapter broken by %s:\n%s", broken, out)
			}
			if !strings.Contains(string(out), "--- FAIL: TestFaultBehaviours/faults/"+string(want)) {
				t.Fatalf("broken by %s: want %s to fail; output:\n%s", broken, want, out)
			}
		})
	}
}
