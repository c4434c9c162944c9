package backends

import (
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/capabilities"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Capabilities describes what one backend (or Docker runtime) can enforce;
// the data lives in package capabilities, which the policy engine reads
// without linking any backend.
type Capabilities = capabilities.Capabilities

// Caps modes.
const (
	CapsPerSandbox = capabilities.CapsPerSandbox
	CapsTemplate   = capabilities.CapsTemplate
	CapsNone       = capabilities.CapsNone
)

// Lookup returns the descriptor for a capability key (docker/<runtime>, or
// the backend scheme).
func Lookup(key string) (Capabilities, bool) { return capabilities.Lookup(key) }

// Keys lists every capability key, sorted.
func Keys() []string { return capabilities.Keys() }

// CapBounds returns the range every cap must lie in (SBX-RES-001).
func CapBounds() model.Bounds { return capabilities.CapBounds() }

// PoolBounds returns the largest warm pool size and the shortest idle time
// (SBX-WRM-002, SBX-WRM-003).
func PoolBounds() (sizeMax, idleMinSeconds int64) { return capabilities.PoolBounds() }

// MaxTimeoutSeconds returns the ceiling of timeout_seconds and
// lifetime_seconds (SBX-TMO-001, SBX-TMO-002).
func MaxTimeoutSeconds() int64 { return capabilities.MaxTimeoutSeconds() }

// BrokerForbiddenHeaders returns the request headers (lowercase) a brokered
// secret must never be written into, each with why.
func BrokerForbiddenHeaders() map[string]string { return capabilities.BrokerForbiddenHeaders() }
