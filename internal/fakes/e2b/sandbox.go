package e2bserver

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"sync"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// sbx is one running sandbox: an E2B sandbox ID over a local Docker sandbox.
type sbx struct {
	srv        *Server
	id         string
	templateID string
	tpl        Template
	token      string // envdAccessToken
	metadata   map[string]string
	started    time.Time
	docker     backends.Sandbox

	mu      sync.Mutex
	endTime time.Time
	timer   *time.Timer
	procs   map[uint32]*proc
	nextPID uint32
	ended   bool
}

// localNetwork decides what the Docker sandbox gets for the egress fields:
// no restriction is open egress (bridge); anything else is no network at
// all, which is exact for a full deny and stricter than asked for an allow
// list or a partial deny, which Docker cannot express. The second result
// names what is not enforced exactly.
func localNetwork(req *newSandbox) (string, []string) {
	restricted := req.AllowInternetAccess != nil && !*req.AllowInternetAccess
	var unenforced []string
	if n := req.Network; n != nil {
		full := false
		for _, d := range n.DenyOut {
			if p, err := netip.ParsePrefix(d); err == nil && p.Bits() == 0 {
				full = true
			}
		}
		if len(n.DenyOut) > 0 {
			restricted = true
			if !full {
				unenforced = append(unenforced, fmt.Sprintf("denyOut %v (a partial deny): the local sandbox has no network at all", n.DenyOut))
			}
		}
		if len(n.AllowOut) > 0 && restricted {
			unenforced = append(unenforced, fmt.Sprintf("allowOut %v: Docker has no per-destination egress filter, so the local sandbox has no network at all and these destinations are unreachable", n.AllowOut))
		}
	}
	if restricted {
		return "none", unenforced
	}
	return "bridge", unenforced
}

// startSandbox opens the Docker sandbox and registers the E2B sandbox.
func (s *Server) startSandbox(ctx context.Context, req *newSandbox, tpl Template, timeout time.Duration, path string) (*sbx, error) {
	id := newID()
	netMode, unenforced := localNetwork(req)
	spec := model.Spec{
		SpecVersion: model.SpecVersion, Name: "e2b-" + *req.TemplateID, Backend: "docker://",
		Image: tpl.Image, Runtime: tpl.Runtime,
		Network:   model.NetworkPolicy{Egress: model.EgressDeny}.Normalized(),
		Resources: model.DefaultCaps(),
		// Processes are bounded by their request and by the sandbox's
		// timeout, which this server enforces; the Docker sandbox's own
		// bounds are the plan's limit, a backstop.
		TimeoutSeconds:  int64(s.cfg.MaxTimeout / time.Second),
		LifetimeSeconds: int64(s.cfg.MaxTimeout/time.Second) + 60,
		Env:             maps.Clone(req.EnvVars),
		Labels:          map[string]string{"e2b_sandbox_id": id},
		TenantID:        "e2b-conformance-server",
		SessionID:       id,
	}
	if netMode == "bridge" {
		spec.Network.Egress = model.EgressAllow
	}
	if tpl.CPUCount > 0 {
		spec.Resources.CPU = float64(tpl.CPUCount)
	}
	if tpl.MemoryMB > 0 {
		spec.Resources.MemoryMB = int64(tpl.MemoryMB)
	}
	if tpl.DiskSizeMB > 0 {
		spec.Resources.DiskMB = int64(tpl.DiskSizeMB)
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	d, err := s.cfg.Docker.Create(cctx, backends.CreateRequest{Spec: spec})
	if err != nil {
		return nil, fmt.Errorf("local sandbox: %w", err)
	}
	// envd's default working directory is the user's home.
	if _, err := d.Run(cctx, []string{"mkdir", "-p", homeDir}, backends.RunOptions{Timeout: 30 * time.Second}); err != nil {
		_ = d.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("local sandbox: %w", err)
	}
	sb := &sbx{srv: s, id: id, templateID: *req.TemplateID, tpl: tpl, token: newToken(), metadata: maps.Clone(req.Metadata),
		started: time.Now(), docker: d, procs: map[uint32]*proc{}, nextPID: 1000}
	if sb.metadata == nil {
		sb.metadata = map[string]string{}
	}
	rec := &Record{SandboxID: id, TemplateID: sb.templateID, Path: path, Metadata: maps.Clone(sb.metadata),
		EnvVars: maps.Clone(req.EnvVars), Timeout: timeout, AllowInternetAccess: req.AllowInternetAccess,
		LocalNetwork: netMode, Unenforced: unenforced, DockerID: d.ID(), AccessToken: sb.token}
	if req.Network != nil {
		rec.AllowOut, rec.DenyOut = append([]string(nil), req.Network.AllowOut...), append([]string(nil), req.Network.DenyOut...)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = d.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("server closed")
	}
	s.sandboxes[id] = sb
	s.records[id] = rec
	s.mu.Unlock()
	sb.setEnd(time.Now().Add(timeout))
	return sb, nil
}

// homeDir is envd's default working directory (the template's user "user").
const homeDir = "/home/user"

func (sb *sbx) endAt() time.Time {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sb.endTime
}

// setEnd (re)arms the sandbox's timeout: at end it is killed and gone.
func (sb *sbx) setEnd(end time.Time) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	sb.endTime = end
	if sb.timer != nil {
		sb.timer.Stop()
	}
	sb.timer = time.AfterFunc(time.Until(end), func() {
		if sb.endAt().After(time.Now()) {
			return // extended meanwhile
		}
		if _, ok := sb.srv.remove(sb.id, "timeout"); ok {
			_ = sb.end("timeout")
		}
	})
}

// end kills the sandbox's processes and closes its Docker sandbox; idempotent.
func (sb *sbx) end(why string) error {
	sb.mu.Lock()
	if sb.ended {
		sb.mu.Unlock()
		return nil
	}
	sb.ended = true
	if sb.timer != nil {
		sb.timer.Stop()
	}
	for _, p := range sb.procs {
		p.stop(false)
	}
	sb.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := sb.docker.Close(ctx); err != nil {
		return fmt.Errorf("close local sandbox (%s): %w", why, err)
	}
	return nil
}

func (sb *sbx) listed(end time.Time) listedSandbox {
	return listedSandbox{TemplateID: sb.templateID, SandboxID: sb.id, ClientID: "6532622b", StartedAt: sb.started.UTC(),
		EndAt: end.UTC(), CPUCount: max(sb.tpl.CPUCount, 1), MemoryMB: max(sb.tpl.MemoryMB, model.DefaultMemoryMB),
		DiskSizeMB: max(sb.tpl.DiskSizeMB, model.DefaultDiskMB), Metadata: maps.Clone(sb.metadata), State: "running",
		EnvdVersion: EnvdVersion, VolumeMounts: []struct{}{}}
}
