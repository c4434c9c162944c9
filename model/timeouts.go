package model

import (
	"fmt"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
)

// Timeout defaults. A call never runs unbounded: a nil timeout inherits the
// sandbox's, which itself defaults to DefaultTimeoutSeconds.
const (
	DefaultTimeoutSeconds  = 300
	DefaultLifetimeSeconds = 300
	// MaxTimeoutSeconds is the ceiling of timeout_seconds and of
	// lifetime_seconds (30 days), the same as max_timeout_seconds in the
	// policy bundle's capabilities/data.json (a test checks they agree). It
	// keeps both far below the ~292 years at which a time.Duration
	// overflows.
	MaxTimeoutSeconds = 30 * 24 * 60 * 60
	// TeardownGrace bounds how long closing a sandbox may take before an
	// OrphanedSandboxWarning is emitted.
	TeardownGrace = 5 * time.Second
)

// EffectiveTimeout returns the bound of one call: the call's own timeout when
// positive, otherwise the sandbox's, otherwise the default. It never returns
// zero or a negative duration.
func EffectiveTimeout(call, sandbox time.Duration) time.Duration {
	switch {
	case call > 0:
		return call
	case sandbox > 0:
		return sandbox
	default:
		return DefaultTimeoutSeconds * time.Second
	}
}

// Durations converts a spec's timeout_seconds and lifetime_seconds to the
// bounds that are enforced. A value that is no bound is refused, never
// replaced: zero or negative (SBX-TMO-001, SBX-TMO-002; a spec always
// carries both, defaults filled in when it was rendered) or above
// MaxTimeoutSeconds (SBX-TMO-001, SBX-TMO-002), where the conversion could
// overflow. The error is a ConfigurationError, the same refusal the policy
// bundle makes.
func Durations(timeoutSeconds, lifetimeSeconds int64) (call, lifetime time.Duration, err error) {
	if call, err = seconds(timeoutSeconds, "timeout_seconds", rules.TmoCall, rules.TmoCall, DefaultTimeoutSeconds); err != nil {
		return 0, 0, err
	}
	if lifetime, err = seconds(lifetimeSeconds, "lifetime_seconds", rules.TmoLifetime, rules.TmoLifetime, DefaultLifetimeSeconds); err != nil {
		return 0, 0, err
	}
	return call, lifetime, nil
}

func seconds(n int64, attr, ruleNotPositive, ruleAboveCeiling string, def int) (time.Duration, error) {
	switch {
	case n <= 0:
		return 0, &Error{Class: ErrConfiguration, Rule: ruleNotPositive, Attribute: attr,
			Message: fmt.Sprintf("%s is %d: it must be a positive number of seconds, never unbounded", attr, n),
			Fix:     fmt.Sprintf("set %s to a positive number of seconds, or leave it out to get the default (%d)", attr, def)}
	case n > MaxTimeoutSeconds:
		return 0, &Error{Class: ErrConfiguration, Rule: ruleAboveCeiling, Attribute: attr,
			Message: fmt.Sprintf("%s = %d is above the ceiling of %d seconds (30 days)", attr, n, MaxTimeoutSeconds),
			Fix:     fmt.Sprintf("lower %s to %d or less", attr, MaxTimeoutSeconds)}
	}
	return time.Duration(n) * time.Second, nil
}
