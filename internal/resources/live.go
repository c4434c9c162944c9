package resources

import (
	"context"
	"errors"
	"fmt"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
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

// hasLiveChecks reports whether templates on this backend are checked
// against the live system at apply. Only Docker is implemented in this
// build; other backends are checked again when a sandbox is opened.
func hasLiveChecks(spec model.Spec) bool {
	d, err := backends.ParseDSN(spec.Backend)
	return err == nil && d.Scheme == "docker"
}

// preflight runs the backend's live checks, bounded by the template's own
// timeout. Nothing is provisioned.
func preflight(ctx context.Context, spec model.Spec) (*liveFacts, error) {
	if !hasLiveChecks(spec) {
		return nil, nil
	}
	b, err := docker.New(docker.WithoutWatcher())
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	defer b.Close()
	pf, ok := b.(backends.Preflighter)
	if !ok {
		return nil, errors.New("the docker backend has no live checks")
	}
	// The same conversion as at run time: a timeout that is no bound is
	// refused, never overflowed into a default.
	timeout, _, err := model.Durations(spec.TimeoutSeconds, spec.LifetimeSeconds)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	p, err := pf.Preflight(ctx, spec)
	if err != nil {
		var me *model.Error
		if errors.As(err, &me) {
			return nil, err
		}
		return nil, &model.Error{Class: model.ConfigurationError, Attribute: "backend",
			Message: "the Docker daemon could not check the template: " + err.Error(),
			Fix:     "start the daemon (or point DOCKER_HOST at it) before apply; plan needs no daemon, apply does"}
	}
	// The tier the live daemon gives must still meet the requirement.
	if spec.RequireIsolation != "" && !p.Tier.Satisfies(spec.RequireIsolation) {
		return nil, &model.Error{Class: model.ConfigurationError, Rule: rules.IsoBelow, Attribute: "require_isolation",
			Message: fmt.Sprintf("the daemon gives tier %s for runtime %q, below the required %s", p.Tier, spec.Runtime, spec.RequireIsolation),
			Fix:     "register a runtime of the required tier on the daemon, or lower require_isolation"}
	}
	return &liveFacts{ImageID: p.ImageID, DiskCapStrategy: p.DiskCapStrategy, PidsCapStrategy: p.PidsCapStrategy}, nil
}
