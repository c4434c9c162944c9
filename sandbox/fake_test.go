package sandbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// fakeBackend records what the helper asks of a backend, so that the tests
// of refusals can assert that nothing was provisioned without a daemon.
type fakeBackend struct {
	tier      model.Tier
	preflight atomic.Int64
	creates   atomic.Int64
	closes    atomic.Int64
	runs      atomic.Int64
	createErr error
	runErr    error
	runOut    []byte
	closeErr  error
	// runBlock, when set, makes Run wait for it or for ctx.
	runBlock chan struct{}
	// beforeRun, when set, is called as the backend's Run begins: after
	// the helper's own checks and hook, before the sandbox is looked at.
	beforeRun func()
	delay     time.Duration
	// warnings are returned by Preflight.
	warnings []model.Warning

	mu   sync.Mutex
	reqs []backends.CreateRequest
	sbs  []*fakeSandbox
	envs []map[string]string // RunOptions.Env of every call
}

func (f *fakeBackend) Name() string { return "docker" }
func (f *fakeBackend) Capabilities(string) (backends.Capabilities, bool) {
	return backends.Capabilities{}, false
}
func (f *fakeBackend) List(context.Context, map[string]string) ([]backends.Info, error) {
	return nil, nil
}
func (f *fakeBackend) Close() error { return nil }

func (f *fakeBackend) Preflight(_ context.Context, spec model.Spec) (backends.Preflight, error) {
	f.preflight.Add(1)
	tier := f.tier
	if tier == "" {
		tier = spec.IsolationTier
	}
	return backends.Preflight{Tier: tier, Image: spec.Image, DiskCapStrategy: "fake disk", PidsCapStrategy: "fake pids",
		Warnings: f.warnings}, nil
}

func (f *fakeBackend) Create(ctx context.Context, req backends.CreateRequest) (backends.Sandbox, error) {
	if f.delay > 0 {
		time.Sleep(f.delay)
	}
	if f.createErr != nil {
		return nil, f.createErr
	}
	n := f.creates.Add(1)
	labels := map[string]string{model.LabelManaged: "true", model.LabelTenantID: req.Spec.TenantID,
		model.LabelSessionID: req.Spec.SessionID, model.LabelTemplate: req.Spec.Name}
	for k, v := range req.Spec.Labels {
		labels[k] = v
	}
	sb := &fakeSandbox{f: f, id: fmt.Sprintf("fake%060d", n), labels: labels, spec: req.Spec, secrets: req.Secrets,
		onWarning: req.OnWarning, created: time.Now()}
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.sbs = append(f.sbs, sb)
	f.mu.Unlock()
	return sb, nil
}

type fakeSandbox struct {
	f         *fakeBackend
	id        string
	labels    map[string]string
	spec      model.Spec
	secrets   map[string]string
	onWarning func(model.Warning)
	created   time.Time
	closed    atomic.Bool
}

func (s *fakeSandbox) ID() string { return s.id }
func (s *fakeSandbox) Info() backends.Info {
	return backends.Info{ID: s.id, Backend: "docker", Tier: s.spec.IsolationTier, Labels: s.labels, Created: s.created,
		Expires: s.created.Add(time.Hour), DiskCapStrategy: "fake disk", PidsCapStrategy: "fake pids", Running: !s.closed.Load()}
}

func (s *fakeSandbox) Run(ctx context.Context, cmd []string, opts backends.RunOptions) (backends.Result, error) {
	s.f.runs.Add(1)
	if s.f.beforeRun != nil {
		s.f.beforeRun()
	}
	s.f.mu.Lock()
	s.f.envs = append(s.f.envs, opts.Env)
	s.f.mu.Unlock()
	if s.closed.Load() {
		return backends.Result{}, &model.Error{Class: model.ErrSandboxGone, Message: "sandbox is gone: it was killed"}
	}
	if s.f.runBlock != nil {
		select {
		case <-s.f.runBlock:
		case <-ctx.Done():
			return backends.Result{}, fmt.Errorf("exec: %w", ctx.Err())
		}
	}
	if s.f.runErr != nil {
		return backends.Result{}, s.f.runErr
	}
	out := s.f.runOut
	if out == nil {
		out = []byte(fmt.Sprint(cmd))
	}
	return backends.Result{ExitCode: 0, Stdout: out}, nil
}

func (s *fakeSandbox) RunCode(ctx context.Context, _ string, code string, opts backends.RunOptions) (backends.Result, error) {
	return s.Run(ctx, []string{code}, opts)
}

func (s *fakeSandbox) Upload(context.Context, string, []byte, int64) error {
	if s.closed.Load() {
		return &model.Error{Class: model.ErrSandboxGone, Message: "sandbox is gone: it was killed"}
	}
	return nil
}

func (s *fakeSandbox) Kill(context.Context) error {
	s.closed.Store(true)
	return nil
}

func (s *fakeSandbox) Close(context.Context) error {
	if s.closed.Swap(true) {
		return nil
	}
	s.f.closes.Add(1)
	if s.f.closeErr != nil {
		w := model.Warning{Class: model.OrphanedSandboxWarning, Message: "not confirmed removed", SandboxID: s.id, Labels: s.labels}
		if s.onWarning != nil {
			s.onWarning(w)
		}
		return &backends.OrphanedError{Warning: w, Err: s.f.closeErr}
	}
	return nil
}

// withFake makes the client provision on f.
func withFake(c *Client, f *fakeBackend) {
	c.backendFor = func(d backends.DSN) (backends.Backend, error) {
		if d.Scheme != "docker" {
			return nil, errors.New("fake: only docker")
		}
		return f, nil
	}
}
