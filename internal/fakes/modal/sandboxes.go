package modalserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"path"
	"sort"
	"sync"
	"time"

	pb "github.com/modal-labs/libmodal/modal-go/proto/modal_proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Record is what a client asked for when it created a sandbox, and how the
// server ran it, for tests to observe.
type Record struct {
	ID, AppID, Name string
	Image           string
	// Network is the access type asked for (OPEN, BLOCKED or ALLOWLIST),
	// CIDRs the allow list, LegacyBlock the old block_network flag.
	Network     string
	CIDRs       []string
	LegacyBlock bool
	MilliCPU    uint32
	MilliCPUMax uint32
	MemoryMB    uint32
	MemoryMBMax uint32
	TimeoutSecs uint32
	Regions     []string
	SecretIDs   []string
	Volumes     map[string]string // mount path -> volume id
	Tags        map[string]string
	// LocalNetwork is what the local Docker sandbox got: "none" or
	// "bridge"; Notes say where that differs from what was asked (a CIDR
	// allow list cannot be enforced by Docker, so the sandbox has no
	// network at all: stricter, never looser).
	LocalNetwork string
	Notes        []string
	DockerID     string
}

type sandbox struct {
	s       *Server
	rec     Record
	appID   string
	env     string
	created time.Time
	workdir string
	secrets map[string]string // the sandbox's secret env, exec-only

	once   sync.Once
	done   chan struct{}
	mu     sync.Mutex
	result *pb.GenericResult
	box    backends.Sandbox
	timer  *time.Timer
}

// Sandboxes returns the records of every sandbox created so far.
func (s *Server) Sandboxes() []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Record
	for _, sb := range s.sandboxes {
		sb.mu.Lock()
		out = append(out, sb.rec)
		sb.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Sandbox returns one sandbox's record.
func (s *Server) Sandbox(id string) (Record, bool) {
	for _, r := range s.Sandboxes() {
		if r.ID == id {
			return r, true
		}
	}
	return Record{}, false
}

// SandboxCreate validates the definition as Modal would, then opens a
// local Docker sandbox for it. A retry carrying the same idempotency key
// (the SDK sends one per call, the same on every attempt) gets the sandbox
// the first attempt created, never a second one.
func (s *Server) SandboxCreate(ctx context.Context, req *pb.SandboxCreateRequest) (*pb.SandboxCreateResponse, error) {
	key := idempotencyKey(ctx)
	s.mu.Lock()
	if id, ok := s.idem[key]; ok && key != "" {
		s.mu.Unlock()
		return pb.SandboxCreateResponse_builder{SandboxId: id}.Build(), nil
	}
	s.mu.Unlock()
	sb, plan, err := s.planSandbox(req)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, status.Error(codes.Unavailable, "server shutting down")
	}
	if sb.rec.Name != "" {
		for _, o := range s.sandboxes {
			if o.appID == sb.appID && o.rec.Name == sb.rec.Name && !o.finished() {
				s.mu.Unlock()
				return nil, status.Errorf(codes.AlreadyExists, "Sandbox with name '%s' already exists", sb.rec.Name)
			}
		}
	}
	s.sandboxSeq++
	sb.rec.ID = fmt.Sprintf("sb-%s%04d", randomID()[:12], s.sandboxSeq)
	s.sandboxes[sb.rec.ID] = sb
	if key != "" {
		s.idem[key] = sb.rec.ID
	}
	s.mu.Unlock()
	if err := sb.start(ctx, plan); err != nil {
		s.mu.Lock()
		delete(s.sandboxes, sb.rec.ID)
		delete(s.idem, key)
		s.mu.Unlock()
		return nil, err
	}
	return pb.SandboxCreateResponse_builder{SandboxId: sb.rec.ID}.Build(), nil
}

func idempotencyKey(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("x-idempotency-key"); len(v) == 1 {
		return v[0]
	}
	return ""
}

type localPlan struct {
	req   backends.CreateRequest
	binds []docker.Bind
}

// planSandbox checks a definition and turns it into a Docker create. What
// this server does not implement is refused with Unimplemented, never
// ignored.
func (s *Server) planSandbox(req *pb.SandboxCreateRequest) (*sandbox, localPlan, error) {
	d := req.GetDefinition()
	if d == nil {
		return nil, localPlan{}, invalid("definition is required")
	}
	if err := unsupported(d); err != nil {
		return nil, localPlan{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.appExists(req.GetAppId()) {
		return nil, localPlan{}, status.Errorf(codes.NotFound, "App %s not found", req.GetAppId())
	}
	image, ok := s.images[d.GetImageId()]
	if !ok {
		return nil, localPlan{}, status.Errorf(codes.NotFound, "Image %s not found", d.GetImageId())
	}
	if d.GetTimeoutSecs() == 0 || d.GetTimeoutSecs() > MaxTimeoutSecs {
		return nil, localPlan{}, invalid("timeout_secs must be between 1 and %d", MaxTimeoutSecs)
	}
	if d.HasName() && d.GetName() != "" && !objectName.MatchString(d.GetName()) {
		return nil, localPlan{}, invalid("invalid sandbox name")
	}
	if d.HasWorkdir() && !path.IsAbs(d.GetWorkdir()) {
		return nil, localPlan{}, invalid("workdir must be an absolute path")
	}
	env, _ := s.appEnv(req.GetAppId())
	sb := &sandbox{s: s, appID: req.GetAppId(), env: env, created: time.Now(), workdir: d.GetWorkdir(),
		secrets: map[string]string{}, done: make(chan struct{})}
	sb.rec = Record{AppID: req.GetAppId(), Name: d.GetName(), Image: image, TimeoutSecs: d.GetTimeoutSecs(),
		Regions:   d.GetSchedulerPlacement().GetRegions(),
		SecretIDs: append([]string(nil), d.GetSecretIds()...), Volumes: map[string]string{}, Tags: map[string]string{}}
	caps, err := sb.planResources(d.GetResources())
	if err != nil {
		return nil, localPlan{}, err
	}
	netPolicy, err := sb.planNetwork(d)
	if err != nil {
		return nil, localPlan{}, err
	}
	for _, id := range d.GetSecretIds() {
		sec, ok := s.secrets[id]
		if !ok {
			return nil, localPlan{}, status.Errorf(codes.NotFound, "Secret %s not found", id)
		}
		for k, v := range sec.values {
			sb.secrets[k] = v
		}
	}
	binds, err := sb.planVolumes(d.GetVolumeMounts())
	if err != nil {
		return nil, localPlan{}, err
	}
	names := make([]string, 0, len(sb.secrets))
	for k := range sb.secrets {
		names = append(names, k)
	}
	sort.Strings(names)
	dsn := "docker://"
	if s.opts.Runtime != "" {
		dsn += "?runtime=" + s.opts.Runtime
	}
	spec := model.Spec{SpecVersion: model.SpecVersion, Name: "modalserver", Backend: dsn, Image: image,
		Network: netPolicy, Resources: caps, TimeoutSeconds: int64(d.GetTimeoutSecs()),
		// The server's own timer ends the sandbox at timeout_secs; the
		// Docker lifetime is a backstop a little later.
		LifetimeSeconds: int64(d.GetTimeoutSecs()) + 30,
		SecretNames:     names, Labels: map[string]string{"modalserver": "true"},
		TenantID: "modalserver", SessionID: "s-" + randomID()}
	return sb, localPlan{req: backends.CreateRequest{Spec: spec, Secrets: copyMap(sb.secrets)}, binds: binds}, nil
}

func unsupported(d *pb.Sandbox) error {
	switch {
	case len(d.GetEntrypointArgs()) > 0:
		return status.Error(codes.Unimplemented, "this server runs no entrypoint command; use exec")
	case len(d.GetMountIds()) > 0 || len(d.GetNfsMounts()) > 0 || len(d.GetS3Mounts()) > 0 || len(d.GetCloudBucketMounts()) > 0:
		return status.Error(codes.Unimplemented, "this server mounts volumes only")
	case d.HasPtyInfo() || len(d.GetOpenPorts().GetPorts()) > 0 || d.HasProxyId() || d.GetCustomDomain() != "":
		return status.Error(codes.Unimplemented, "this server has no PTY, ports, proxies or domains")
	case d.HasIdleTimeoutSecs():
		return status.Error(codes.Unimplemented, "this server does not enforce an idle timeout")
	case len(d.GetExperimentalOptions()) > 0 || d.GetEnableSnapshot() || d.HasRuntime():
		return status.Error(codes.Unimplemented, "this server has no experimental options, snapshots or runtime choice")
	case d.GetResources().GetGpuConfig().GetCount() > 0 || d.GetResources().GetGpuConfig().GetGpuType() != "":
		return status.Error(codes.Unimplemented, "this server has no GPUs")
	}
	return nil
}

// planResources checks the requests and hard limits and gives the local
// caps: the limit where one is set, else the request (stricter than Modal,
// which lets a sandbox without a limit burst past its request).
func (sb *sandbox) planResources(r *pb.Resources) (model.Caps, error) {
	c := model.DefaultCaps()
	milli, milliMax, mem, memMax := r.GetMilliCpu(), r.GetMilliCpuMax(), r.GetMemoryMb(), r.GetMemoryMbMax()
	if milli == 0 {
		milli = MinMilliCPU
	}
	if mem == 0 {
		mem = MinMemoryMB
	}
	switch {
	case milli < MinMilliCPU || milli > MaxMilliCPU:
		return c, invalid("milli_cpu must be between %d and %d", MinMilliCPU, MaxMilliCPU)
	case milliMax != 0 && (milliMax < milli || milliMax > MaxMilliCPU):
		return c, invalid("milli_cpu_max must be at least milli_cpu and at most %d", MaxMilliCPU)
	case mem < MinMemoryMB || mem > MaxMemoryMB:
		return c, invalid("memory_mb must be between %d and %d", MinMemoryMB, MaxMemoryMB)
	case memMax != 0 && (memMax < mem || memMax > MaxMemoryMB):
		return c, invalid("memory_mb_max must be at least memory_mb and at most %d", MaxMemoryMB)
	}
	sb.rec.MilliCPU, sb.rec.MilliCPUMax, sb.rec.MemoryMB, sb.rec.MemoryMBMax = r.GetMilliCpu(), milliMax, r.GetMemoryMb(), memMax
	c.CPU = float64(max(milli, milliMax)) / 1000
	if milliMax != 0 {
		c.CPU = float64(milliMax) / 1000
	}
	c.MemoryMB = int64(mem)
	if memMax != 0 {
		c.MemoryMB = int64(memMax)
	}
	if disk := r.GetEphemeralDiskMb(); disk > 0 {
		c.DiskMB = int64(disk)
	}
	return c, nil
}

// planNetwork maps network_access to the local sandbox's network. Deny
// (BLOCKED, or an allow list with no entries) is Docker's network mode
// none; open is a bridge. A non-empty CIDR allow list cannot be enforced
// by Docker, so the sandbox gets no network at all, and the record says so.
func (sb *sandbox) planNetwork(d *pb.Sandbox) (model.NetworkPolicy, error) {
	na := d.GetNetworkAccess()
	sb.rec.LegacyBlock = d.GetBlockNetwork()
	sb.rec.Network = na.GetNetworkAccessType().String()
	sb.rec.CIDRs = append([]string(nil), na.GetAllowedCidrs()...)
	deny := model.NetworkPolicy{Egress: model.EgressDeny}.Normalized()
	if d.GetBlockNetwork() && na != nil && na.GetNetworkAccessType() != pb.NetworkAccess_BLOCKED {
		return deny, invalid("block_network cannot be combined with network access %s", sb.rec.Network)
	}
	if len(na.GetAllowedCidrs()) > MaxCIDRs {
		return deny, invalid("at most %d CIDRs may be allowed", MaxCIDRs)
	}
	for _, c := range na.GetAllowedCidrs() {
		p, err := netip.ParsePrefix(c)
		if err != nil || p.Masked() != p {
			return deny, invalid("allowed_cidrs entry is not a CIDR block in canonical form")
		}
	}
	switch t := na.GetNetworkAccessType(); {
	case d.GetBlockNetwork() || t == pb.NetworkAccess_BLOCKED:
		if len(na.GetAllowedCidrs()) > 0 {
			return deny, invalid("allowed_cidrs cannot be used when the network is blocked")
		}
	case t == pb.NetworkAccess_ALLOWLIST:
		if len(na.GetAllowedCidrs()) > 0 {
			sb.rec.Notes = append(sb.rec.Notes, "CIDR allow list not enforceable by the local Docker sandbox: it runs with no network at all (stricter)")
		}
	case t == pb.NetworkAccess_OPEN || na == nil:
		if len(na.GetAllowedCidrs()) > 0 {
			return deny, invalid("allowed_cidrs needs network access type ALLOWLIST")
		}
		sb.rec.LocalNetwork = "bridge"
		return model.NetworkPolicy{Egress: model.EgressAllow}.Normalized(), nil
	default:
		return deny, invalid("unknown network access type")
	}
	sb.rec.LocalNetwork = "none"
	return deny, nil
}

// planVolumes binds each mounted volume's host directory in.
func (sb *sandbox) planVolumes(mounts []*pb.VolumeMount) ([]docker.Bind, error) {
	var binds []docker.Bind
	for _, m := range mounts {
		v, ok := sb.s.volumes[m.GetVolumeId()]
		if !ok {
			return nil, status.Errorf(codes.NotFound, "Volume %s not found", m.GetVolumeId())
		}
		mp := m.GetMountPath()
		if !path.IsAbs(mp) || path.Clean(mp) != mp || mp == "/" {
			return nil, invalid("mount path must be a clean absolute path other than /")
		}
		if m.GetReadOnly() {
			return nil, status.Error(codes.Unimplemented, "this server mounts volumes read-write only")
		}
		if _, dup := sb.rec.Volumes[mp]; dup {
			return nil, invalid("two volumes mounted at %s", mp)
		}
		sb.rec.Volumes[mp] = v.id
		binds = append(binds, docker.Bind{Source: v.dir, Target: mp})
	}
	return binds, nil
}

// start opens the Docker sandbox and arms the lifetime.
func (sb *sandbox) start(ctx context.Context, p localPlan) error {
	box, err := docker.CreateWithBinds(ctx, sb.s.backend, p.req, p.binds)
	if err != nil {
		if status.Code(err) != codes.Unknown {
			return err
		}
		return status.Errorf(codes.Internal, "sandbox could not be started: %v", redactErr(err, sb.secrets))
	}
	sb.mu.Lock()
	sb.box = box
	sb.rec.DockerID = box.ID()
	// The lifetime counts from the create request, as a caller's clock
	// does: a slow start shortens the sandbox's life, never lengthens it.
	left := max(time.Until(sb.created.Add(time.Duration(sb.rec.TimeoutSecs)*time.Second)), 0)
	sb.timer = time.AfterFunc(left, func() {
		_ = sb.finish(pb.GenericResult_GENERIC_STATUS_TIMEOUT, "Sandbox timed out")
	})
	sb.mu.Unlock()
	return nil
}

// finish ends the sandbox once: its Docker sandbox is removed and its result
// set. Later calls keep the first result.
func (sb *sandbox) finish(st pb.GenericResult_GenericStatus, msg string) error {
	var err error
	sb.once.Do(func() {
		sb.mu.Lock()
		sb.result = pb.GenericResult_builder{Status: st, Exception: msg}.Build()
		box, timer := sb.box, sb.timer
		sb.mu.Unlock()
		if timer != nil {
			timer.Stop()
		}
		if box != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*model.TeardownGrace)
			defer cancel()
			err = box.Close(ctx)
		}
		close(sb.done)
	})
	return err
}

func (sb *sandbox) finished() bool {
	select {
	case <-sb.done:
		return true
	default:
		return false
	}
}

func (sb *sandbox) getResult() *pb.GenericResult {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sb.result
}

func (s *Server) lookup(id string) (*sandbox, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, ok := s.sandboxes[id]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "Sandbox with id: '%s' not found", id)
	}
	return sb, nil
}

func taskID(sandboxID string) string { return "ta-" + sandboxID[len("sb-"):] }

func (s *Server) byTask(task string) (*sandbox, error) {
	if len(task) < 4 || task[:3] != "ta-" {
		return nil, status.Errorf(codes.NotFound, "task %s not found", task)
	}
	return s.lookup("sb-" + task[3:])
}

// SandboxGetTaskId names the sandbox's task, with its result once it ended.
func (s *Server) SandboxGetTaskId(_ context.Context, req *pb.SandboxGetTaskIdRequest) (*pb.SandboxGetTaskIdResponse, error) {
	sb, err := s.lookup(req.GetSandboxId())
	if err != nil {
		return nil, err
	}
	id := taskID(sb.rec.ID)
	return pb.SandboxGetTaskIdResponse_builder{TaskId: &id, TaskResult: sb.getResult()}.Build(), nil
}

// SandboxGetFromName finds a running sandbox by app and name.
func (s *Server) SandboxGetFromName(_ context.Context, req *pb.SandboxGetFromNameRequest) (*pb.SandboxGetFromNameResponse, error) {
	if err := s.checkEnv(req.GetEnvironmentName()); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	appID := s.apps[req.GetEnvironmentName()+"/"+req.GetAppName()]
	for _, sb := range s.sandboxes {
		if appID != "" && sb.appID == appID && sb.rec.Name == req.GetSandboxName() && !sb.finished() {
			return pb.SandboxGetFromNameResponse_builder{SandboxId: sb.rec.ID}.Build(), nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "Sandbox with name '%s' not found", req.GetSandboxName())
}

// SandboxTerminate ends a sandbox; ending one that has ended already
// returns its result.
func (s *Server) SandboxTerminate(_ context.Context, req *pb.SandboxTerminateRequest) (*pb.SandboxTerminateResponse, error) {
	sb, err := s.lookup(req.GetSandboxId())
	if err != nil {
		return nil, err
	}
	if r := sb.getResult(); r != nil {
		return pb.SandboxTerminateResponse_builder{ExistingResult: r}.Build(), nil
	}
	if err := sb.finish(pb.GenericResult_GENERIC_STATUS_TERMINATED, "Sandbox terminated"); err != nil {
		return nil, status.Errorf(codes.Internal, "terminate: %v", redactErr(err, sb.secrets))
	}
	return &pb.SandboxTerminateResponse{}, nil
}

// SandboxWait waits up to timeout seconds (at most 55) for the sandbox to
// end; the result is empty while it runs.
func (s *Server) SandboxWait(ctx context.Context, req *pb.SandboxWaitRequest) (*pb.SandboxWaitResponse, error) {
	sb, err := s.lookup(req.GetSandboxId())
	if err != nil {
		return nil, err
	}
	wait := time.Duration(min(max(req.GetTimeout(), 0), 55) * float32(time.Second))
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-sb.done:
	case <-t.C:
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return pb.SandboxWaitResponse_builder{Result: sb.getResult()}.Build(), nil
}

const listPage = 50

// SandboxList lists sandboxes newest first, filtered by app, environment
// and tags (all must match), a page at a time before before_timestamp.
func (s *Server) SandboxList(_ context.Context, req *pb.SandboxListRequest) (*pb.SandboxListResponse, error) {
	if err := s.checkEnv(req.GetEnvironmentName()); err != nil {
		return nil, err
	}
	if err := checkTags(req.GetTags()); err != nil {
		return nil, err
	}
	s.mu.Lock()
	var all []*sandbox
	for _, sb := range s.sandboxes {
		all = append(all, sb)
	}
	s.mu.Unlock()
	sort.Slice(all, func(i, j int) bool { return all[i].created.After(all[j].created) })
	var out []*pb.SandboxInfo
	for _, sb := range all {
		ts := float64(sb.created.UnixNano()) / 1e9
		if (req.GetAppId() != "" && sb.appID != req.GetAppId()) || (!req.GetIncludeFinished() && sb.finished()) ||
			(req.GetBeforeTimestamp() != 0 && ts >= req.GetBeforeTimestamp()) || sb.env != req.GetEnvironmentName() {
			continue
		}
		sb.mu.Lock()
		match := true
		for _, t := range req.GetTags() {
			if v, ok := sb.rec.Tags[t.GetTagName()]; !ok || v != t.GetTagValue() {
				match = false
			}
		}
		tags := tagList(sb.rec.Tags)
		sb.mu.Unlock()
		if !match {
			continue
		}
		out = append(out, pb.SandboxInfo_builder{Id: sb.rec.ID, CreatedAt: ts, AppId: sb.appID, Tags: tags,
			Name: sb.rec.Name, TimeoutSecs: sb.rec.TimeoutSecs}.Build())
		if len(out) == listPage {
			break
		}
	}
	return pb.SandboxListResponse_builder{Sandboxes: out}.Build(), nil
}

func checkTags(tags []*pb.SandboxTag) error {
	if len(tags) > MaxTags {
		return invalid("at most %d tags", MaxTags)
	}
	for _, t := range tags {
		if t.GetTagName() == "" || len(t.GetTagName()) > MaxTagLen || len(t.GetTagValue()) > MaxTagLen {
			return invalid("tag names must be 1 to %d bytes and values at most %d", MaxTagLen, MaxTagLen)
		}
	}
	return nil
}

func tagList(m map[string]string) []*pb.SandboxTag {
	var out []*pb.SandboxTag
	for k, v := range m {
		out = append(out, pb.SandboxTag_builder{TagName: k, TagValue: v}.Build())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetTagName() < out[j].GetTagName() })
	return out
}

// SandboxTagsSet replaces a running sandbox's tags.
func (s *Server) SandboxTagsSet(_ context.Context, req *pb.SandboxTagsSetRequest) (*emptypb.Empty, error) {
	if err := checkTags(req.GetTags()); err != nil {
		return nil, err
	}
	sb, err := s.lookup(req.GetSandboxId())
	if err != nil {
		return nil, err
	}
	if sb.finished() {
		return nil, status.Errorf(codes.FailedPrecondition, "Sandbox %s has finished", sb.rec.ID)
	}
	tags := map[string]string{}
	for _, t := range req.GetTags() {
		tags[t.GetTagName()] = t.GetTagValue()
	}
	sb.mu.Lock()
	sb.rec.Tags = tags
	sb.mu.Unlock()
	return &emptypb.Empty{}, nil
}

// SandboxTagsGet returns a sandbox's tags.
func (s *Server) SandboxTagsGet(_ context.Context, req *pb.SandboxTagsGetRequest) (*pb.SandboxTagsGetResponse, error) {
	sb, err := s.lookup(req.GetSandboxId())
	if err != nil {
		return nil, err
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return pb.SandboxTagsGetResponse_builder{Tags: tagList(sb.rec.Tags)}.Build(), nil
}

func hashID(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:12])
}
