package vercelserver

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// sbx is one sandbox and its one session, over a local Docker sandbox.
type sbx struct {
	srv       *Server
	name      string
	sessionID string
	runtime   string
	vcpus     int
	timeout   time.Duration
	policy    netPolicy
	tags      map[string]string
	created   time.Time
	docker    backends.Sandbox

	mu       sync.Mutex
	state    string // running, stopping, stopped
	stopped  time.Time
	timer    *time.Timer
	cmds     map[string]*command
	endedErr error
	endOnce  sync.Once
}

// localNetwork decides what the Docker sandbox gets for a policy: deny-all
// is no network (exact), allow-all a bridge, and custom lists no network
// at all, stricter than asked, because Docker has no per-destination
// egress filter; the second result names what is not enforced exactly.
func localNetwork(p netPolicy) (string, []string) {
	switch p.Mode {
	case "allow-all":
		return "bridge", nil
	case "deny-all":
		return "none", nil
	}
	return "none", []string{fmt.Sprintf("allow %v, subnets.allow %v, subnets.deny %v: Docker has no per-destination egress filter, so the local sandbox has no network at all",
		p.AllowedDomains, p.AllowedCIDRs, p.DeniedCIDRs)}
}

// startSandbox opens the Docker sandbox and registers the sandbox and its
// session.
func (s *Server) startSandbox(ctx context.Context, req *createReq, name, runtime string, pol netPolicy, path string) (*sbx, error) {
	vcpus := 1
	if req.Resources != nil && req.Resources.VCPUs != nil {
		vcpus = *req.Resources.VCPUs
	}
	timeout := DefaultTimeout
	if req.Timeout != nil {
		timeout = time.Duration(*req.Timeout) * time.Millisecond
	}
	netMode, unenforced := localNetwork(pol)
	sid := randomID("sess_", 12)
	spec := model.Spec{
		SpecVersion: model.SpecVersion, Name: "vercel-" + runtime, Backend: "docker://",
		Image:     s.cfg.Runtimes[runtime],
		Network:   model.NetworkPolicy{Egress: model.EgressDeny}.Normalized(),
		Resources: model.Caps{CPU: float64(vcpus), MemoryMB: int64(vcpus * MemoryPerVCPU), DiskMB: model.DefaultDiskMB, Pids: model.DefaultPids},
		// Commands are bounded by their own timeout and by the session's,
		// which this server enforces; the Docker sandbox's bounds are a
		// backstop.
		TimeoutSeconds:  int64(s.cfg.MaxTimeout / time.Second),
		LifetimeSeconds: int64(s.cfg.MaxTimeout/time.Second) + 60,
		Env:             maps.Clone(req.Env),
		Labels:          map[string]string{"vercel_sandbox": name},
		TenantID:        "vercel-conformance-server",
		SessionID:       sid,
	}
	if netMode == "bridge" {
		spec.Network.Egress = model.EgressAllow
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	d, err := s.cfg.Docker.Create(cctx, backends.CreateRequest{Spec: spec})
	if err != nil {
		return nil, fmt.Errorf("local sandbox: %w", err)
	}
	sb := &sbx{srv: s, name: name, sessionID: sid, runtime: runtime, vcpus: vcpus, timeout: timeout, policy: pol,
		tags: maps.Clone(req.Tags), created: time.Now(), docker: d, state: "running", cmds: map[string]*command{}}
	if sb.tags == nil {
		sb.tags = map[string]string{}
	}
	rec := &Record{Name: name, SessionID: sid, Path: path, ProjectID: *req.ProjectID, Runtime: runtime, VCPUs: vcpus,
		MemoryMB: vcpus * MemoryPerVCPU, Timeout: timeout, Tags: maps.Clone(sb.tags), Env: maps.Clone(req.Env),
		NetworkMode: pol.Mode, AllowDomains: pol.AllowedDomains, AllowCIDRs: pol.AllowedCIDRs, DenyCIDRs: pol.DeniedCIDRs,
		LocalNetwork: netMode, Unenforced: unenforced, DockerID: d.ID()}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = d.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("server closed")
	}
	s.sandboxes[name] = sb
	s.sessions[sid] = sb
	s.records[name] = rec
	s.mu.Unlock()
	sb.mu.Lock()
	sb.timer = time.AfterFunc(timeout, func() { _ = sb.end("timeout") })
	sb.mu.Unlock()
	return sb, nil
}

func (sb *sbx) running() bool {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sb.state == "running"
}

func (sb *sbx) status() string {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sb.state
}

// end stops the session: its commands are killed and its Docker sandbox
// closed. Idempotent; the first reason is recorded.
func (sb *sbx) end(why string) error {
	sb.endOnce.Do(func() {
		sb.mu.Lock()
		sb.state = "stopping"
		if sb.timer != nil {
			sb.timer.Stop()
		}
		cmds := make([]*command, 0, len(sb.cmds))
		for _, c := range sb.cmds {
			cmds = append(cmds, c)
		}
		sb.mu.Unlock()
		sb.srv.updateRecord(sb.name, func(r *Record) { r.Ended = why })
		for _, c := range cmds {
			c.sessionEnded()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := sb.docker.Close(ctx)
		sb.mu.Lock()
		sb.state, sb.stopped = "stopped", time.Now()
		if err != nil {
			sb.endedErr = fmt.Errorf("close local sandbox (%s): %w", why, err)
		}
		sb.mu.Unlock()
	})
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sb.endedErr
}

// sessionJSON is the Session schema of the SDK's validators.
func (sb *sbx) sessionJSON() map[string]any {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	ms := sb.created.UnixMilli()
	m := map[string]any{"id": sb.sessionID, "memory": sb.vcpus * MemoryPerVCPU, "vcpus": sb.vcpus, "region": "iad1",
		"runtime": sb.runtime, "timeout": sb.timeout.Milliseconds(), "status": sb.state, "requestedAt": ms, "startedAt": ms,
		"createdAt": ms, "cwd": WorkDir, "updatedAt": time.Now().UnixMilli(), "networkPolicy": sb.policy}
	if !sb.stopped.IsZero() {
		m["stoppedAt"] = sb.stopped.UnixMilli()
		m["duration"] = sb.stopped.Sub(sb.created).Milliseconds()
	}
	return m
}

// sandboxJSON is the Sandbox schema of the SDK's validators.
type sandboxJSON struct {
	Name             string            `json:"name"`
	Persistent       bool              `json:"persistent"`
	Region           string            `json:"region"`
	VCPUs            int               `json:"vcpus"`
	Memory           int               `json:"memory"`
	Runtime          string            `json:"runtime"`
	Timeout          int64             `json:"timeout"`
	NetworkPolicy    netPolicy         `json:"networkPolicy"`
	CreatedAt        int64             `json:"createdAt"`
	UpdatedAt        int64             `json:"updatedAt"`
	ExpiresAt        int64             `json:"expiresAt"`
	CurrentSessionID string            `json:"currentSessionId"`
	Status           string            `json:"status"`
	Cwd              string            `json:"cwd"`
	Tags             map[string]string `json:"tags"`
}

func (sb *sbx) sandboxJSON() sandboxJSON {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sandboxJSON{Name: sb.name, Region: "iad1", VCPUs: sb.vcpus, Memory: sb.vcpus * MemoryPerVCPU, Runtime: sb.runtime,
		Timeout: sb.timeout.Milliseconds(), NetworkPolicy: sb.policy, CreatedAt: sb.created.UnixMilli(), UpdatedAt: time.Now().UnixMilli(),
		ExpiresAt: sb.created.Add(sb.timeout).UnixMilli(), CurrentSessionID: sb.sessionID, Status: sb.state, Cwd: WorkDir, Tags: maps.Clone(sb.tags)}
}

func (sb *sbx) withSession() map[string]any {
	return map[string]any{"sandbox": sb.sandboxJSON(), "session": sb.sessionJSON(), "routes": []any{}}
}
