package daytonaserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// createSandbox is the CreateSandbox schema of the pinned spec; unknown
// fields and mistyped values are refused, as Daytona's validation pipe
// refuses them.
type createSandbox struct {
	Name                *string           `json:"name"`
	Snapshot            *string           `json:"snapshot"`
	User                *string           `json:"user"`
	Env                 map[string]string `json:"env"`
	Labels              map[string]string `json:"labels"`
	Public              *bool             `json:"public"`
	NetworkBlockAll     *bool             `json:"networkBlockAll"`
	NetworkAllowList    *string           `json:"networkAllowList"`
	DomainAllowList     *string           `json:"domainAllowList"`
	Target              *string           `json:"target"`
	CPU                 *int64            `json:"cpu"`
	GPU                 *int64            `json:"gpu"`
	GPUType             []string          `json:"gpuType"`
	Memory              *int64            `json:"memory"`
	Disk                *int64            `json:"disk"`
	AutoStopInterval    *int64            `json:"autoStopInterval"`
	AutoArchiveInterval *int64            `json:"autoArchiveInterval"`
	AutoDeleteInterval  *int64            `json:"autoDeleteInterval"`
	Volumes             []json.RawMessage `json:"volumes"`
	BuildInfo           *buildInfo        `json:"buildInfo"`
	LinkedSandbox       *string           `json:"linkedSandbox"`
}

// buildInfo is the CreateBuildInfo schema: a declarative image, which
// Daytona builds into a snapshot (the SDK's create({image}) sends
// "FROM <image>\n").
type buildInfo struct {
	DockerfileContent string   `json:"dockerfileContent"`
	ContextHashes     []string `json:"contextHashes"`
}

// baseImage is the image a build starts from, when its Dockerfile is a bare
// "FROM <image>" (all this server builds).
func (b *buildInfo) baseImage() (string, bool) {
	ref, ok := strings.CutPrefix(strings.TrimSuffix(b.DockerfileContent, "\n"), "FROM ")
	if !ok || ref == "" || strings.ContainsAny(ref, " \t\r\n") || len(b.ContextHashes) > 0 {
		return "", false
	}
	return ref, true
}

const maxBody = 1 << 20

func decodeStrict(r *http.Request, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return err
	}
	if len(b) > maxBody {
		return fmt.Errorf("request entity too large")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	return nil
}

// validate checks a create as Daytona does; it returns the status and
// message of a refusal, or 0.
func (s *Server) validate(req *createSandbox) (int, string) {
	if st, msg := s.validateSource(req); st != 0 {
		return st, msg
	}
	switch {
	case len(req.Volumes) > 0 || req.LinkedSandbox != nil:
		return http.StatusBadRequest, "volumes and linked sandboxes are not supported by this conformance server"
	case req.GPU != nil && *req.GPU != 0:
		return http.StatusForbidden, "GPU sandboxes are not available in this organization"
	}
	for _, v := range []struct {
		name string
		p    *int64
		max  int64
	}{{"cpu", req.CPU, s.cfg.MaxCPU}, {"memory", req.Memory, s.cfg.MaxMemoryGB}, {"disk", req.Disk, s.cfg.MaxDiskGB}} {
		if v.p == nil {
			continue
		}
		if *v.p < 1 {
			return http.StatusBadRequest, v.name + " must not be less than 1"
		}
		if *v.p > v.max { // a 400, as sandbox.service.ts (v0.190.0) answers it
			return http.StatusBadRequest, fmt.Sprintf("%s request %d exceeds maximum allowed per sandbox (%d)", v.name, *v.p, v.max)
		}
	}
	if req.AutoStopInterval != nil && *req.AutoStopInterval < 0 {
		return http.StatusBadRequest, "autoStopInterval must not be negative"
	}
	return 0, ""
}

// validateSource checks where the sandbox comes from, as the v0.190.0
// controller does: a declarative build takes resources and no snapshot; a
// snapshot (named or the default) takes its resources from the snapshot,
// and a create that sets any is refused.
func (s *Server) validateSource(req *createSandbox) (int, string) {
	if req.BuildInfo != nil {
		if req.Snapshot != nil && *req.Snapshot != "" {
			return http.StatusBadRequest, "Cannot specify a snapshot when using a build info entry"
		}
		ref, ok := req.BuildInfo.baseImage()
		if !ok {
			return http.StatusBadRequest, "this conformance server builds only a bare FROM <image> without context"
		}
		if _, ok := s.cfg.Snapshots[ref]; !ok {
			return http.StatusBadRequest, fmt.Sprintf("image %s cannot be pulled by this conformance server", ref)
		}
		return 0, ""
	}
	for _, p := range []*int64{req.CPU, req.GPU, req.Memory, req.Disk} {
		if p != nil && *p != 0 {
			return http.StatusBadRequest, "Cannot specify Sandbox resources when using a snapshot"
		}
	}
	if len(req.GPUType) > 0 {
		return http.StatusBadRequest, "Cannot specify GPU type when creating sandbox from snapshot. GPU type is inherited from snapshot."
	}
	if req.Snapshot != nil {
		if _, ok := s.cfg.Snapshots[*req.Snapshot]; !ok {
			return http.StatusNotFound, fmt.Sprintf("Snapshot %s not found. Did you add it through the Daytona Dashboard?", *req.Snapshot)
		}
	}
	return 0, ""
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	var req createSandbox
	if err := decodeStrict(r, &req); err != nil {
		apiError(w, http.StatusBadRequest, "invalid request body: "+err.Error())
		return
	}
	if st, msg := s.validate(&req); st != 0 {
		apiError(w, st, msg)
		return
	}
	sb, err := s.startSandbox(r.Context(), &req)
	if err != nil {
		apiError(w, http.StatusInternalServerError, "sandbox create failed: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, sb.dto())
}

func orInt(p *int64, d int64) int64 {
	if p == nil {
		return d
	}
	return *p
}

// sbx is one Daytona sandbox over a local Docker sandbox.
type sbx struct {
	srv      *Server
	id       string
	snapshot string
	labels   map[string]string
	env      map[string]string
	cpu, mem int64
	disk     int64
	blockAll bool
	autoStop int64
	autoDel  int64
	created  time.Time
	docker   backends.Sandbox

	mu           sync.Mutex
	state        string // started | stopped
	lastActivity time.Time
	stoppedAt    time.Time
	sessions     map[string]*session
	ended        bool
}

func (s *Server) startSandbox(ctx context.Context, req *createSandbox) (*sbx, error) {
	snap := s.cfg.DefaultSnapshot
	if req.Snapshot != nil {
		snap = *req.Snapshot
	}
	if req.BuildInfo != nil {
		snap, _ = req.BuildInfo.baseImage() // validated
	}
	sb := &sbx{srv: s, id: newID(), snapshot: snap, labels: maps.Clone(req.Labels), env: maps.Clone(req.Env),
		cpu: orInt(req.CPU, 1), mem: orInt(req.Memory, 1), disk: orInt(req.Disk, 3), // a snapshot's own: 1 CPU, 1 GB, 3 GB
		blockAll: req.NetworkBlockAll != nil && *req.NetworkBlockAll,
		autoStop: orInt(req.AutoStopInterval, 15), autoDel: orInt(req.AutoDeleteInterval, -1),
		created: time.Now(), state: "started", lastActivity: time.Now(), sessions: map[string]*session{}}
	if sb.labels == nil {
		sb.labels = map[string]string{}
	}
	var unenforced []string
	netMode := "bridge"
	if sb.blockAll || req.NetworkAllowList != nil || req.DomainAllowList != nil {
		netMode = "none"
		if !sb.blockAll {
			unenforced = append(unenforced, "networkAllowList/domainAllowList: Docker has no per-destination egress filter, so the local sandbox has no network at all")
		}
	}
	spec := model.Spec{
		SpecVersion: model.SpecVersion, Name: "daytona-" + snap, Backend: "docker://", Image: s.cfg.Snapshots[snap],
		Network:         model.NetworkPolicy{Egress: model.EgressDeny}.Normalized(),
		Resources:       model.Caps{CPU: float64(sb.cpu), MemoryMB: sb.mem * 1024, DiskMB: sb.disk * 1024, Pids: model.DefaultCaps().Pids},
		TimeoutSeconds:  int64(s.cfg.MaxCommand / time.Second),
		LifetimeSeconds: int64(s.cfg.MaxCommand/time.Second) + 3600, // a backstop: auto-stop here ends it
		Env:             maps.Clone(req.Env),
		Labels:          map[string]string{"daytona_sandbox_id": sb.id},
		TenantID:        "daytona-conformance-server",
		SessionID:       sb.id,
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
	sb.docker = d
	rec := &Record{SandboxID: sb.id, Snapshot: snap, Labels: maps.Clone(sb.labels), Env: maps.Clone(sb.env),
		CPU: sb.cpu, MemoryGB: sb.mem, DiskGB: sb.disk, NetworkBlockAll: sb.blockAll,
		AutoStopInterval: sb.autoStop, AutoDeleteInterval: sb.autoDel, LocalNetwork: netMode, Unenforced: unenforced, DockerID: d.ID()}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = d.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("server closed")
	}
	s.sandboxes[sb.id] = sb
	s.records[sb.id] = rec
	s.mu.Unlock()
	return sb, nil
}

// dto is the Sandbox schema.
func (sb *sbx) dto() map[string]any {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return map[string]any{
		"id": sb.id, "organizationId": "00000000-0000-4000-8000-000000000001", "name": sb.id, "snapshot": sb.snapshot,
		"user": "daytona", "env": sb.env, "labels": sb.labels, "public": false, "networkBlockAll": sb.blockAll,
		"target": "us", "cpu": sb.cpu, "gpu": 0, "memory": sb.mem, "disk": sb.disk, "state": sb.state,
		"desiredState": sb.state, "autoStopInterval": sb.autoStop, "autoArchiveInterval": 10080,
		"autoDeleteInterval": sb.autoDel, "createdAt": sb.created.UTC().Format(time.RFC3339Nano),
		"updatedAt": time.Now().UTC().Format(time.RFC3339Nano), "lastActivityAt": sb.lastActivity.UTC().Format(time.RFC3339Nano),
		"toolboxProxyUrl": sb.srv.URL + "/toolbox", "volumes": []any{}, "recoverable": false,
	}
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	sb, ok := s.lookup(r.PathValue("id"))
	if !ok {
		apiError(w, http.StatusNotFound, fmt.Sprintf("Sandbox with ID or name %s not found", r.PathValue("id")))
		return
	}
	writeJSON(w, http.StatusOK, sb.dto())
}

func (s *Server) proxyURL(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.lookup(r.PathValue("id")); !ok {
		apiError(w, http.StatusNotFound, fmt.Sprintf("Sandbox with ID or name %s not found", r.PathValue("id")))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"url": s.URL + "/toolbox"})
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request) {
	sb, ok := s.remove(r.PathValue("id"), "deleted")
	if !ok {
		apiError(w, http.StatusNotFound, fmt.Sprintf("Sandbox with ID or name %s not found", r.PathValue("id")))
		return
	}
	d := sb.dto()
	d["state"], d["desiredState"] = "destroying", "destroyed"
	if err := sb.end("deleted"); err != nil {
		apiError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// list answers GET /sandbox: labels is a JSON object every listed sandbox
// carries; one page (no cursor) holds them all here.
func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	want := map[string]string{}
	if l := q.Get("labels"); l != "" {
		if err := json.Unmarshal([]byte(l), &want); err != nil {
			apiError(w, http.StatusBadRequest, "labels must be a JSON object of strings")
			return
		}
	}
	s.mu.Lock()
	all := make([]*sbx, 0, len(s.sandboxes))
	for _, sb := range s.sandboxes {
		all = append(all, sb)
	}
	s.mu.Unlock()
	sort.Slice(all, func(i, j int) bool { return all[i].created.Before(all[j].created) })
	items := []map[string]any{}
	for _, sb := range all {
		match := true
		for k, v := range want {
			match = match && sb.labels[k] == v
		}
		if match {
			items = append(items, sb.dto())
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "nextCursor": nil})
}

// autoStopLoop stops sandboxes idle for their autoStopInterval and deletes
// stopped ones after their autoDeleteInterval, as Daytona's sandbox manager
// does (it checks every few seconds; here every Minute/60, at least 20 ms).
func (s *Server) autoStopLoop() {
	defer s.wg.Done()
	tick := time.NewTicker(max(s.cfg.Minute/60, 20*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-tick.C:
			s.mu.Lock()
			all := make([]*sbx, 0, len(s.sandboxes))
			for _, sb := range s.sandboxes {
				all = append(all, sb)
			}
			s.mu.Unlock()
			for _, sb := range all {
				sb.checkIdle(now)
			}
		}
	}
}

func (sb *sbx) checkIdle(now time.Time) {
	minute := sb.srv.cfg.Minute
	sb.mu.Lock()
	stop := sb.state == "started" && sb.autoStop > 0 && now.Sub(sb.lastActivity) >= time.Duration(sb.autoStop)*minute
	del := sb.state == "stopped" && sb.autoDel >= 0 && now.Sub(sb.stoppedAt) >= time.Duration(sb.autoDel)*minute
	if stop {
		sb.state, sb.stoppedAt = "stopped", now
		del = sb.autoDel == 0
	}
	sb.mu.Unlock()
	if stop && !del {
		sb.srv.updateRecord(sb.id, func(r *Record) { r.Ended = "auto-stop" })
		_ = sb.stopLocal()
	}
	if del {
		if _, ok := sb.srv.remove(sb.id, "auto-stop, auto-delete"); ok {
			_ = sb.end("auto-delete")
		}
	}
}

// stopLocal ends the sandbox's commands and its local Docker sandbox (a
// stopped Daytona sandbox runs nothing; this server does not restart one).
func (sb *sbx) stopLocal() error {
	sb.mu.Lock()
	for _, ss := range sb.sessions {
		ss.cancel()
	}
	sb.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := sb.docker.Close(ctx); err != nil {
		return fmt.Errorf("close local sandbox: %w", err)
	}
	return nil
}

// end stops the sandbox for good; idempotent.
func (sb *sbx) end(why string) error {
	sb.mu.Lock()
	if sb.ended {
		sb.mu.Unlock()
		return nil
	}
	sb.ended = true
	sb.mu.Unlock()
	if err := sb.stopLocal(); err != nil {
		return fmt.Errorf("%s: %w", why, err)
	}
	return nil
}
