package backends

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// The pieces the Docker and Kubernetes warm pools share.

// ClaimMargin: a warm sandbox this close to the end of its idle time is
// discarded rather than claimed, so that its idle time cannot end between
// the checks and the claim.
const ClaimMargin = 2 * time.Second

// WarmOnce hands a warm sandbox to the first Claim or Discard only: it is
// no longer the pool's after either.
type WarmOnce struct {
	mu    sync.Mutex
	taken bool
}

func (o *WarmOnce) take() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	first := !o.taken
	o.taken = true
	return first
}

// Discard runs remove unless the sandbox was claimed or discarded already.
func (o *WarmOnce) Discard(ctx context.Context, remove func(context.Context) error) error {
	if !o.take() {
		return nil
	}
	return remove(ctx)
}

// Claim runs claim once; a claim that fails removes the sandbox, so that it
// is never left to be claimed again.
func (o *WarmOnce) Claim(ctx context.Context, claim func(context.Context) (Sandbox, error), remove func(context.Context) error) (Sandbox, error) {
	if !o.take() {
		return nil, errors.New("warm sandbox: claimed or discarded already")
	}
	s, err := claim(ctx)
	if err != nil {
		_ = remove(ctx)
		return nil, err
	}
	return s, nil
}

// CheckWarmRequest refuses a warm request that is no template spec with an
// idle time and a digest.
func CheckWarmRequest(req WarmRequest) error {
	if req.Spec.TenantID != "" || req.Spec.SessionID != "" {
		return &model.Error{Class: model.ErrConfiguration, Attribute: "tenant_id",
			Message: "a warm sandbox is created from a template spec, with no tenant or session", Fix: "pass the template spec"}
	}
	if req.MaxIdle <= 0 || req.SpecSHA256 == "" {
		return &model.Error{Class: model.ErrConfiguration, Attribute: "warm_pool",
			Message: "a warm sandbox needs a positive idle time and its template's digest", Fix: "set warm_pool.max_idle_seconds"}
	}
	return nil
}

// WarmCreateError is the error of a warm create bounded by cctx: a
// CreateTimeout (with fix) when cctx's deadline, not ctx, ended it.
func WarmCreateError(ctx, cctx context.Context, timeout time.Duration, fix string, err error) error {
	if ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
		return &model.Error{Class: model.ErrCreateTimeout,
			Message: fmt.Sprintf("the warm sandbox was not ready within %s", timeout), Fix: fix, Err: err}
	}
	return err
}

// PlanClaim runs a claim's checks on the request, in order: a tenant and a
// session; the backend's validation of the per-tenant spec and its match
// with the warm sandbox's plan (same); the template digest the sandbox was
// created for (else tampered); ClaimMargin left of the idle time.
func PlanClaim[P any](req ClaimRequest, validate func(CreateRequest, bool) (P, error), same func(P) error,
	specSHA256 string, idleUntil time.Time, tampered func(why string) error) (P, error) {
	var none P
	if req.Spec.TenantID == "" || req.Spec.SessionID == "" {
		return none, &model.Error{Class: model.ErrConfiguration, Attribute: "tenant_id",
			Message: "a claim needs a tenant and a session", Fix: "pass the per-tenant spec"}
	}
	p, err := validate(CreateRequest{Spec: req.Spec, Secrets: req.Secrets, OnWarning: req.OnWarning}, true)
	if err != nil {
		return none, err
	}
	if err := same(p); err != nil {
		return none, err
	}
	if req.SpecSHA256 != specSHA256 {
		return none, tampered("it was made for another template spec")
	}
	if time.Until(idleUntil) < ClaimMargin {
		return none, &model.Error{Class: model.ErrSandboxGone, Message: "the warm sandbox's idle time is (nearly) over", Fix: "open a new sandbox"}
	}
	return p, nil
}

// SamePlan refuses a claim whose per-tenant spec would not have created the
// warm sandbox: same says whether the backend's plans agree on everything
// but the tenant, session and secrets; every warm label must be claimed too.
func SamePlan(same bool, warmLabels, claimLabels map[string]string) error {
	for k, v := range warmLabels {
		if claimLabels[k] != v {
			same = false
		}
	}
	if !same {
		return &model.Error{Class: model.ErrConfiguration, Attribute: "spec",
			Message: "the warm sandbox was created from another template spec than the one claiming it", Fix: "report this as a bug"}
	}
	return nil
}
