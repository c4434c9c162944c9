package backends

import (
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Timeouts are what a create plan takes from a spec's timeouts.
type Timeouts struct {
	Call, Lifetime time.Duration
	Create         time.Duration // the create's bound: create, or else the call timeout
}

// PlanTimeouts converts the spec's timeouts: a spec carries both (defaults
// filled in when it was rendered), so zero, negative or above the ceiling
// is never replaced by a default (a Backstop of backend); the conversion
// cannot overflow. A negative create is refused; 0 inherits the call
// timeout.
func PlanTimeouts(backend string, s model.Spec, create time.Duration) (Timeouts, error) {
	var t Timeouts
	var err error
	if t.Call, t.Lifetime, err = model.Durations(s.TimeoutSeconds, s.LifetimeSeconds); err != nil {
		return t, BackstopOf(backend, err)
	}
	if create < 0 {
		return t, &model.Error{Class: model.ErrConfiguration, Attribute: "timeout",
			Message: "create timeout must be positive", Fix: "pass 0 to inherit the spec's timeout"}
	}
	t.Create = model.EffectiveTimeout(create, t.Call)
	return t, nil
}
