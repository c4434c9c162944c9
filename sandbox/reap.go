package sandbox

import (
	"context"
	"errors"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// ReapOptions select what Reap removes.
type ReapOptions struct {
	// Backend is the DSN of the backend to sweep; empty means every
	// registered backend that can list its sandboxes.
	Backend string
	// DryRun lists what would be removed and removes nothing.
	DryRun bool
	// Labels narrows the sweep to sandboxes carrying all of these labels.
	Labels map[string]string
}

// Reaped is one sandbox that Reap removed (or would remove).
type Reaped struct {
	ID        string
	Backend   string
	Tier      model.Tier
	TenantID  string
	SessionID string
	Template  string
	Labels    map[string]string
	Expires   time.Time
	// Reason is "expired" (its lifetime passed) or "owner gone" (the process
	// that opened it is verifiably dead and its watcher did not remove it).
	Reason string
	// Left, when set, says why the sandbox was left in place for all its
	// Reason: it is not verifiably one sandboxio created (on Docker, no
	// valid mark under this host's reap key). It is never removed.
	Left string
}

// Reap removes sandboxes whose lifetime has passed or whose owner is verifiably
// gone; an owner that cannot be judged from here counts as alive. A container
// sandboxio did not create is returned with Left set, and left. Each removal is
// audited. Without opts.Backend it sweeps every registered backend that can
// list; one failing does not stop the others, and the first failure is returned.
func (c *Client) Reap(ctx context.Context, opts ReapOptions) ([]Reaped, error) {
	targets, err := reapTargets(opts.Backend)
	if err != nil {
		return nil, err
	}
	var out []Reaped
	var first error
	for _, target := range targets {
		got, err := c.reapBackend(ctx, target, opts)
		if opts.Backend == "" && errors.Is(err, backends.ErrNoCredentials) {
			continue // a cloud backend this machine has no credentials for
		}
		out = append(out, got...)
		if err != nil && first == nil {
			first = err
		}
	}
	return out, first
}

// reapTargets returns the backends a sweep covers: the DSN's target, or
// every registered backend that can list (with no app or project: a sweep
// by label covers the whole account).
func reapTargets(dsn string) ([]backends.DSN, error) {
	if dsn == "" {
		var out []backends.DSN
		for _, s := range backends.Listable() {
			out = append(out, backends.DSN{Scheme: s, Options: map[string]string{}})
		}
		return out, nil
	}
	d, err := backends.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	r, _ := backends.Registered(d.Scheme)
	if r == nil || r.Open == nil {
		return nil, notInBuild(d.Scheme)
	}
	if !r.Lists {
		return nil, noReaper(d.Scheme)
	}
	return []backends.DSN{d.Target()}, nil
}

// reapBackend sweeps one backend.
func (c *Client) reapBackend(ctx context.Context, target backends.DSN, opts ReapOptions) ([]Reaped, error) {
	scheme := target.Scheme
	b, err := c.backendFor(target)
	if err != nil {
		return nil, classify(err, scheme, "reap", Secrets{})
	}
	r, ok := b.(backends.Reaper)
	if !ok {
		return nil, noReaper(scheme)
	}
	start := time.Now()
	got, err := r.Reap(ctx, backends.ReapOptions{DryRun: opts.DryRun, Labels: opts.Labels})
	out := make([]Reaped, 0, len(got))
	for _, g := range got {
		in := g.Info
		out = append(out, Reaped{ID: in.ID, Backend: in.Backend, Tier: in.Tier, TenantID: in.Labels[model.LabelTenantID],
			SessionID: in.Labels[model.LabelSessionID], Template: in.Labels[model.LabelTemplate], Labels: in.Labels,
			Expires: in.Expires, Reason: g.Reason, Left: g.Left})
		if g.Left != "" {
			continue // nothing was done to it: no audit record
		}
		ev := EventOrphaned
		if g.Reason == "expired" {
			ev = EventExpired
		}
		c.audit(Record{Event: ev, Op: "reap", SandboxID: ptr(in.ID), Backend: in.Backend, Tier: in.Tier,
			TenantID: in.Labels[model.LabelTenantID], SessionID: in.Labels[model.LabelSessionID], Template: in.Labels[model.LabelTemplate],
			Labels: in.Labels, DiskCapStrategy: in.DiskCapStrategy, PidsCapStrategy: in.PidsCapStrategy, BlockedEgress: in.BlockedEgress,
			Reason: g.Reason, DryRun: opts.DryRun, DurationMS: ms(time.Since(start))}, Secrets{})
	}
	if err != nil {
		return out, classify(err, scheme, "reap", Secrets{})
	}
	return out, nil
}

func noReaper(scheme string) error {
	return &model.Error{Class: model.ErrCapabilityNotSupported, Attribute: "backend",
		Message: "backend " + scheme + " has no reaper", Fix: "remove its sandboxes with the backend's own tools"}
}
