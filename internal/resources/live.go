package resources

import (
	"context"
	"errors"
	"fmt"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// liveFacts is what a reachable backend says about a template's spec: the
// checks plan cannot make offline (runtime registered, image present, which
// disk-cap and process-ceiling strategies this daemon gets).
type liveFacts struct {
	ImageID         string
	DiskCapStrategy string
	PidsCapStrategy string
}

// liveChecks returns the registration of the template's backend when that
// backend has live checks (the registry says which); other backends are
// checked again when a sandbox is opened.
func liveChecks(spec model.Spec) *backends.Registration {
	d, err := backends.ParseDSN(spec.Backend)
	if err != nil {
		return nil
	}
	r, ok := backends.Registered(d.Scheme)
	if !ok || r.LiveCheck == nil {
		return nil
	}
	return r
}

// hasLiveChecks reports whether templates on this backend are checked
// against the live system at apply.
func hasLiveChecks(spec model.Spec) bool { return liveChecks(spec) != nil }

// preflight runs the backend's live checks, bounded by the template's own
// timeout. Nothing is provisioned.
func preflight(ctx context.Context, spec model.Spec) (*liveFacts, error) {
	reg := liveChecks(spec)
	if reg == nil {
		return nil, nil
	}
	// The same conversion as at run time: a timeout that is no bound is
	// refused, never overflowed into a default.
	timeout, _, err := model.Durations(spec.TimeoutSeconds, spec.LifetimeSeconds)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	p, err := reg.LiveCheck(ctx, spec)
	if err != nil {
		var me *model.Error
		if errors.As(err, &me) {
			return nil, err
		}
		return nil, &model.Error{Class: model.ErrConfiguration, Attribute: "backend",
			Message: fmt.Sprintf("the %s backend could not check the template: %v", reg.Scheme, err),
			Fix:     reg.Unreachable}
	}
	// The tier the live backend gives must still meet the requirement the
	// policy checked against the capability data.
	if err := backends.CheckLiveTier(reg.Scheme, spec.RequireIsolation, p.Tier, spec.Runtime); err != nil {
		return nil, err
	}
	return &liveFacts{ImageID: p.ImageID, DiskCapStrategy: p.DiskCapStrategy, PidsCapStrategy: p.PidsCapStrategy}, nil
}
