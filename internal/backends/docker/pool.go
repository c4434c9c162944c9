package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Warm sandboxes (warm pools). Docker cannot change labels after creation, so
// the tenant binding is the name: Claim renames the container to the session's
// name (sessionName), which the daemon then refuses to anyone else. The init
// (sinit.go) ends an unclaimed sandbox at its idle time, and one lifetime after
// the claim line, read from a stdin that only the pool's attach can write and
// that closes with the pool. The expiry label is created + idle + lifetime.
// See docs/design/docker-backend.md.
const (
	labelPool      = model.ReservedLabelPrefix + "pool"         // poolWarm on every container created for a pool
	labelSpecHash  = model.ReservedLabelPrefix + "spec_sha256"  // the template spec's digest, of a warm sandbox
	labelIdleUntil = model.ReservedLabelPrefix + "idle_expires" // when an unclaimed warm sandbox ends
	poolWarm       = "warm"
	warmPrefix     = "sandboxio-w-"
	// claimLine starts the lifetime; claimedLine is the init's answer.
	claimLine   = "claim"
	claimedLine = "claimed"
	// switchBudget bounds the wait for the init's answer to the claim.
	switchBudget = 2 * time.Second
)

// warm is one unclaimed warm sandbox.
type warm struct {
	b         *dockerBackend
	s         *sandbox // as created; its name is the warm one
	p         createPlan
	idleUntil time.Time

	// attach holds the container's standard input; answered is closed
	// when the init's answer to the claim line was read from it.
	attach   types.HijackedResponse
	answered chan struct{}

	once backends.WarmOnce
}

// CreateWarm creates one warm sandbox of a pool from a template spec: the
// same validation, hardening, runtime check and start as Create, with no
// tenant, no session and no secret.
func (b *dockerBackend) CreateWarm(ctx context.Context, req backends.WarmRequest) (backends.Warm, error) {
	if err := backends.CheckWarmRequest(req); err != nil {
		return nil, err
	}
	p, err := validate(backends.CreateRequest{Spec: req.Spec, Timeout: req.Timeout}, false)
	if err != nil {
		return nil, err
	}
	if len(req.Spec.BrokeredSecrets) > 0 {
		// A warm sandbox's gateway starts before any value exists
		// (SBX-SEC-012): it would have no broker.
		return nil, backends.Backstop(Name, rules.SecBrokerPool, "warm_pool",
			fmt.Sprintf("a warm sandbox of a template with %d brokered secret(s)", len(req.Spec.BrokeredSecrets)))
	}
	// Secrets are given per exec, never in the container's environment:
	// a warm sandbox holds none, they reach it with the claim.
	p.secrets = nil
	p.warmIdle, p.warmSpecHash = req.MaxIdle, req.SpecSHA256
	cctx, cancel := context.WithTimeout(ctx, p.createTimeout)
	defer cancel()
	s, err := b.create(cctx, p)
	if err != nil {
		return nil, backends.WarmCreateError(ctx, cctx, p.createTimeout, "check the daemon's load", err)
	}
	w := &warm{b: b, s: s, p: p, idleUntil: s.created.Add(p.warmIdle), answered: make(chan struct{})}
	// Attached after the start: the init's input is a pipe the daemon
	// keeps open (OpenStdin) until an attached client leaves (StdinOnce),
	// and the answer comes only after the claim line, so nothing is lost.
	w.attach, err = b.cli.ContainerAttach(cctx, s.id, container.AttachOptions{Stream: true, Stdin: true, Stdout: true})
	if err != nil {
		_ = w.remove(ctx)
		return nil, fmt.Errorf("warm sandbox attach: %w", err)
	}
	go w.readAnswer()
	return w, nil
}

// readAnswer reads the init's standard output until the answer to the
// claim line, then drains it until the attach closes.
func (w *warm) readAnswer() {
	lw := &lineWatch{want: claimedLine + "\n", seen: w.answered}
	_, _ = stdcopy.StdCopy(lw, io.Discard, w.attach.Reader)
}

// lineWatch closes seen once what is written to it starts with want.
type lineWatch struct {
	want string
	buf  []byte
	seen chan struct{}
	done bool
}

func (l *lineWatch) Write(p []byte) (int, error) {
	if !l.done {
		l.buf = append(l.buf, p...)
		if len(l.buf) >= len(l.want) {
			l.done = true
			if string(l.buf[:len(l.want)]) == l.want {
				close(l.seen)
			}
		}
	}
	return len(p), nil
}

func (w *warm) ID() string           { return w.s.id }
func (w *warm) IdleUntil() time.Time { return w.idleUntil }

// Discard removes the warm sandbox (if it was not claimed); idempotent.
func (w *warm) Discard(ctx context.Context) error {
	return w.once.Discard(ctx, w.remove)
}

// remove ends a warm sandbox as Close ends any sandbox: the kill, which no
// write slot holds up, is confirmed within the teardown grace and the removal
// of the stopped container may finish after; a kill that cannot be confirmed
// is an *OrphanedError with the container's id and labels. (Removing it
// outright, as before, waited for a write slot: with many closes at once on
// a busy host the grace ran out before the removal began, and a running warm
// sandbox was left with only a plain error.)
func (w *warm) remove(ctx context.Context) error {
	if w.attach.Conn != nil {
		w.attach.Close()
	}
	return w.s.Close(ctx)
}

// Claim binds the warm sandbox to the tenant and session of req.Spec: the idle
// time must not be about to end; the container must be running and unchanged
// since creation (labels, resources, network, capabilities, runtime: `docker
// update` and `network connect` can change them); it is renamed to the
// session's name, which the daemon refuses while another sandbox holds it; its
// init is given the claim line. Any failure removes it. No probe command runs:
// the creation check and the inspect already show what one would.
func (w *warm) Claim(ctx context.Context, req backends.ClaimRequest) (backends.Sandbox, error) {
	return w.once.Claim(ctx, func(ctx context.Context) (backends.Sandbox, error) { return w.claim(ctx, req) }, w.remove)
}

func (w *warm) claim(ctx context.Context, req backends.ClaimRequest) (*sandbox, error) {
	b := w.b
	p, err := backends.PlanClaim(req, validate, func(p createPlan) error { return samePlan(w.p, p) },
		w.p.warmSpecHash, w.idleUntil, func(why string) error { return tampered(w.s.id, why) })
	if err != nil {
		return nil, err
	}
	ins, err := b.cli.ContainerInspect(ctx, w.s.id)
	if err != nil {
		return nil, fmt.Errorf("warm sandbox inspect: %w", err)
	}
	if err := w.unchanged(ins, req.SpecSHA256); err != nil {
		return nil, err
	}
	name := sessionName(b.cfg.scope, p.spec.TenantID, p.spec.SessionID)
	if err := b.rename(ctx, w.s.id, name, p); err != nil {
		return nil, err
	}
	// From here the container is the session's: the claim is the start of
	// its lifetime.
	claimed := time.Now()
	if err := w.startLifetime(ctx); err != nil {
		return nil, err
	}
	s := w.claimedSandbox(p, name, claimed)
	if p.networkMode == "bridge" && req.OnWarning != nil {
		ow := backends.RuleWarning(model.OpenEgressWarning, rules.NetOpenEgress, "network.egress")
		ow.SandboxID, ow.Labels = s.id, s.Info().Labels
		req.OnWarning(ow)
	}
	return s, nil
}

// claimedSandbox is the sandbox handed to the tenant. Its labels are the
// container's plus the tenant, session and template labels the claim bound
// it to by its name, and sandboxio.binding=name saying so.
func (w *warm) claimedSandbox(p createPlan, name string, claimed time.Time) *sandbox {
	ws := w.s
	labels := maps.Clone(ws.labels)
	maps.Copy(labels, p.labels)
	labels[labelBinding] = bindingName
	return &sandbox{
		b: w.b, id: ws.id, name: name, runtime: ws.runtime, tier: ws.tier, caps: ws.caps,
		callTimeout: p.callTimeout, created: claimed, expires: claimed.Add(p.lifetime),
		labels: labels, secrets: p.secrets, shell: ws.shell, onWarning: p.onWarning,
		diskCap: ws.diskCap, pidsCap: ws.pidsCap,
		// The observer attached at creation goes with the sandbox: the
		// tenant's attempts are counted from the claim (none before it,
		// a warm sandbox runs nothing).
		egress: ws.egress, hostPids: ws.hostPids,
	}
}

// labelBinding marks the labels of a claimed warm sandbox that are bound by
// its name rather than set on the container.
const (
	labelBinding = model.ReservedLabelPrefix + "binding"
	bindingName  = "name"
)

// samePlan refuses a claim whose per-tenant spec would not have created the
// warm sandbox: anything but the tenant, session and secrets differs.
func samePlan(w, p createPlan) error {
	same := w.runtime == p.runtime && w.tier == p.tier && w.networkMode == p.networkMode &&
		w.caps == p.caps && w.lifetime == p.lifetime && w.callTimeout == p.callTimeout &&
		slices.Equal(w.env, p.env) && w.spec.Image == p.spec.Image && w.diskStrategy == p.diskStrategy
	return backends.SamePlan(same, w.labels, p.labels)
}

func tampered(id, why string) error {
	return &model.Error{Class: model.ErrSandboxGone, Attribute: "warm_pool",
		Message: fmt.Sprintf("warm sandbox %s was refused: %s; it was removed", short(id), why),
		Fix:     "find out what changes sandboxio's containers on this daemon; a cold open is not affected"}
}

// unchanged checks, from the daemon's own view, that a warm sandbox is
// running, unclaimed, labelled for this template spec and this process, and
// hardened as created.
func (w *warm) unchanged(ins container.InspectResponse, specHash string) error {
	id := w.s.id
	if ins.State == nil || !ins.State.Running || ins.State.Paused || ins.State.Restarting {
		return tampered(id, "it is not running")
	}
	if ins.Config == nil || ins.HostConfig == nil {
		return tampered(id, "the daemon does not describe it")
	}
	l := ins.Config.Labels
	switch {
	case strings.TrimPrefix(ins.Name, "/") != w.s.name:
		return tampered(id, "it was renamed")
	case l[labelPool] != poolWarm || l[labelSpecHash] != specHash:
		return tampered(id, "its spec digest label does not match the template spec")
	case l[labelOwner] != w.b.owner.ID:
		return tampered(id, "it belongs to another process")
	}
	want, got := w.hostConfig(), ins.HostConfig
	switch {
	case got.Memory != want.Memory || got.MemorySwap != want.MemorySwap || got.NanoCPUs != want.NanoCPUs ||
		got.CPUQuota != 0 || got.CPUPeriod != 0:
		return tampered(id, "its memory or CPU limits were changed")
	case got.PidsLimit == nil || want.PidsLimit == nil || *got.PidsLimit != *want.PidsLimit:
		return tampered(id, "its process ceiling was changed")
	case string(got.NetworkMode) != string(want.NetworkMode) || ins.NetworkSettings == nil || len(ins.NetworkSettings.Networks) != 1:
		return tampered(id, "its network was changed")
	case !slices.Equal(got.CapDrop, want.CapDrop) || len(got.CapAdd) > 0 || !slices.Equal(got.SecurityOpt, want.SecurityOpt) ||
		got.Privileged || got.Runtime != want.Runtime || got.ReadonlyRootfs != want.ReadonlyRootfs:
		return tampered(id, "its hardening differs from what was created")
	}
	if want.NetworkMode == "none" {
		if _, ok := ins.NetworkSettings.Networks["none"]; !ok {
			return tampered(id, "its network was changed")
		}
	}
	return nil
}

// hostConfig is the host configuration the warm sandbox was created with
// (the disk strategy as its label records it).
func (w *warm) hostConfig() *container.HostConfig {
	strategy := DiskTmpfs
	if strings.HasPrefix(w.s.labels[labelDiskCap], DiskStorageOpt) {
		strategy = DiskStorageOpt
	}
	netMode := "none"
	if w.p.networkMode == "bridge" {
		netMode = w.b.egressNetID()
	}
	_, hc := containerConfig(w.p, strategy, netMode, nil)
	return hc
}

// rename gives the container its session's name. A name held by a live
// sandbox refuses the claim (one sandbox per tenant and session, across
// processes); one held by a container that is no sandbox any more is freed.
func (b *dockerBackend) rename(ctx context.Context, id, name string, p createPlan) error {
	for try := 0; ; try++ {
		err := b.cli.ContainerRename(ctx, id, name)
		if err == nil {
			return nil
		}
		if !cerrdefs.IsConflict(err) && !strings.Contains(err.Error(), "already in use") {
			return fmt.Errorf("warm sandbox rename: %w", err)
		}
		if try == 3 {
			return busyError(p, "", nil, time.Time{}, backends.Verdict{})
		}
		if ferr := b.freeName(ctx, name, p); ferr != nil {
			if !errors.Is(ferr, errNameInFlight) {
				return ferr
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}

// startLifetime writes the claim line and waits for the init's answer,
// then lets go of the container's input.
func (w *warm) startLifetime(ctx context.Context) error {
	_ = w.attach.Conn.SetWriteDeadline(time.Now().Add(switchBudget))
	if _, err := w.attach.Conn.Write([]byte(claimLine + "\n")); err != nil {
		return fmt.Errorf("warm sandbox: the claim did not reach it: %w", err)
	}
	t := time.NewTimer(switchBudget)
	defer t.Stop()
	select {
	case <-w.answered:
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return errors.New("warm sandbox: the claim did not start its lifetime: no answer")
	}
	w.attach.Close()
	return nil
}

// egressNetID is the id of EgressNetwork as this backend last found it.
func (b *dockerBackend) egressNetID() string {
	b.netMu.Lock()
	defer b.netMu.Unlock()
	return b.egressNet
}

// listClaimed lists the claimed warm sandboxes of the tenant (and session,
// when given) in labels: their tenant and session are in their names, not
// their labels. Each is returned with the labels the claim bound it to.
func (b *dockerBackend) listClaimed(ctx context.Context, labels map[string]string) ([]container.Summary, error) {
	tenant := labels[model.LabelTenantID]
	session, bySession := labels[model.LabelSessionID]
	rest := map[string]string{labelPool: poolWarm}
	for k, v := range labels {
		if k != model.LabelTenantID && k != model.LabelSessionID {
			rest[k] = v
		}
	}
	prefix := tenantNamePrefix(b.cfg.scope, tenant)
	cs, err := b.listLabelled(ctx, rest, prefix)
	if err != nil {
		return nil, err
	}
	var out []container.Summary
	for _, c := range cs {
		name := ""
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		if !strings.HasPrefix(name, prefix) || (bySession && name != sessionName(b.cfg.scope, tenant, session)) {
			continue
		}
		c.Labels = maps.Clone(c.Labels)
		c.Labels[model.LabelTenantID] = tenant
		if !bySession {
			session = sessionOfName(b.cfg.scope, tenant, name)
		}
		if session != "" {
			c.Labels[model.LabelSessionID] = session
		}
		c.Labels[labelBinding] = bindingName
		out = append(out, c)
	}
	return out, nil
}

// claimedByName reports whether a listed container is a warm sandbox that
// was claimed: renamed to a session's name.
func claimedByName(c container.Summary) bool {
	return c.Labels[labelPool] == poolWarm && len(c.Names) > 0 && strings.HasPrefix(strings.TrimPrefix(c.Names[0], "/"), "sandboxio-s-")
}
