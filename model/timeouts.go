package model

import "time"

// Timeout defaults. A call never runs unbounded: a nil timeout inherits the
// sandbox's, which itself defaults to DefaultTimeoutSeconds.
const (
	DefaultTimeoutSeconds  = 300
	DefaultLifetimeSeconds = 300
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
