// Package capabilities reads what each backend can enforce from the policy
// bundle's capabilities/data.json. It is data only: the policy engine
// knows backends through it and links no backend implementation.
package capabilities

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"sort"
	"strings"
	"sync"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
	"github.com/sandboxio/terraform-provider-sandboxio/policies"
)

// Capabilities describes what one backend (or Docker runtime) can enforce.
// The descriptors are read from the policy bundle's capabilities/data.json,
// the same data the Rego rules see, so Go and Rego cannot disagree.
type Capabilities struct {
	Key     string     `json:"key"`
	Backend string     `json:"backend"`
	Runtime string     `json:"runtime"`
	Tier    model.Tier `json:"tier"`
	// Variant names the DSN option value that selects this descriptor over
	// the plain SCHEME/RUNTIME one (gateway: docker://?egress=gateway); the
	// key is then SCHEME/RUNTIME+VARIANT.
	Variant string `json:"variant,omitempty"`
	Network struct {
		Deny          bool     `json:"deny"`
		OpenEgress    bool     `json:"open_egress"` // egress = "allow" can be given (not runsc on Docker)
		DenyControl   string   `json:"deny_control"`
		Allowlist     bool     `json:"allowlist"`
		AllowKinds    []string `json:"allow_kinds"`
		AllowlistNote string   `json:"allowlist_note"`
		// IPv4Only: allow-list entries must be IPv4 (Kubernetes routes
		// IPv4 only and cuts IPv6 in every mode).
		IPv4Only bool `json:"ipv4_only,omitempty"`
		// AllowPorts: a CIDR or IP entry may name one port
		// (198.18.1.0/24:443, [2001:db8::1]:443).
		AllowPorts bool `json:"allow_ports,omitempty"`
		// SecretBroker: a broker runs between the sandbox and the network
		// that can write a brokered secret's value into requests to its
		// hosts (brokered_secrets), so the sandbox never holds it;
		// SecretBrokerNote says how, or why not.
		SecretBroker     bool   `json:"secret_broker"`
		SecretBrokerNote string `json:"secret_broker_note"`
	} `json:"network"`
	Caps struct {
		Mode             string   `json:"mode"` // per_sandbox | template | none
		Settable         []string `json:"settable"`
		MemoryBoundsSwap bool     `json:"memory_bounds_swap"`
		PidsCeiling      bool     `json:"pids_ceiling"`
		MaxPids          int64    `json:"max_pids"`
		Note             string   `json:"note,omitempty"`
		// UnitMB: memory and disk are taken in whole units of this many
		// MB (Daytona: GiB); 0 means any value.
		UnitMB int64 `json:"unit_mb,omitempty"`
	} `json:"caps"`
	NativeLabels  bool `json:"native_labels"`
	TenantStorage bool `json:"tenant_storage"`
	// WarmPool: the backend keeps warm pools (sandboxes created ahead of
	// time, bound to a tenant at claim).
	WarmPool               bool  `json:"warm_pool"`
	BlockedEgressReporting bool  `json:"blocked_egress_reporting"`
	MaxLifetimeSeconds     int64 `json:"max_lifetime_seconds"`
	// LifetimeEnforcement is "absolute" (the backend ends the sandbox at
	// its lifetime) or "idle" (only after that long without activity).
	LifetimeEnforcement string   `json:"lifetime_enforcement"`
	LiveChecks          []string `json:"live_checks"`
	// Notes give the sources of the descriptor's claims.
	Notes []string `json:"notes,omitempty"`
}

// Caps modes.
const (
	CapsPerSandbox = "per_sandbox"
	CapsTemplate   = "template"
	CapsNone       = "none"
)

type capabilityData struct {
	Backends map[string]Capabilities `json:"backends"`
	Tiers    map[model.Tier]int      `json:"tiers"`
	Defaults model.Caps              `json:"default_caps"`
	Bounds   model.Bounds            `json:"cap_bounds"`
	// MaxTimeout is the ceiling of timeout_seconds and lifetime_seconds.
	MaxTimeout int64 `json:"max_timeout_seconds"`
	PoolBounds struct {
		SizeMax           int64 `json:"size_max"`
		MaxIdleSecondsMin int64 `json:"max_idle_seconds_min"`
	} `json:"warm_pool_bounds"`
	SecretTokens []SecretToken `json:"secret_tokens"`
	// BrokerForbidden are the request headers no brokered secret may be
	// written into (lowercase), each with why.
	BrokerForbidden map[string]string `json:"broker_forbidden_headers"`
	NeverEgress     struct {
		Blocks   map[string]string `json:"blocks"`
		Names    map[string]string `json:"names"`
		Suffixes map[string]string `json:"suffixes"`
	} `json:"never_egress"`
}

// NeverEgress are the destinations no sandbox may reach whatever its allow
// list says (never_egress in the data): the plan refuses entries inside
// them (SBX-NET-014) and the egress gateway refuses them at run time.
type NeverEgress struct {
	Blocks   []netip.Prefix
	Names    []string // exact names
	Suffixes []string // the name itself and every name below it
}

// Never returns the never-reachable destinations, sorted.
func Never() NeverEgress {
	d := data()
	var n NeverEgress
	for b := range d.NeverEgress.Blocks {
		n.Blocks = append(n.Blocks, netip.MustParsePrefix(b)) // checked at load
	}
	sort.Slice(n.Blocks, func(i, j int) bool { return n.Blocks[i].String() < n.Blocks[j].String() })
	for k := range d.NeverEgress.Names {
		n.Names = append(n.Names, k)
	}
	for k := range d.NeverEgress.Suffixes {
		n.Suffixes = append(n.Suffixes, k)
	}
	sort.Strings(n.Names)
	sort.Strings(n.Suffixes)
	return n
}

// SecretToken is one well-known key or token format: the one list both the
// DSN parser (by Prefixes) and the Rego rules (by Pattern, lib.rego's
// known_token) detect credentials from. Examples are made up; tests check
// that both detectors flag every one.
type SecretToken struct {
	Name     string   `json:"name"`
	Prefixes []string `json:"prefixes"`
	Pattern  string   `json:"pattern"`
	Examples []string `json:"examples"`
}

// SecretTokens lists the well-known token formats.
func SecretTokens() []SecretToken { return data().SecretTokens }

var (
	loadOnce sync.Once
	loaded   capabilityData
	loadErr  error
	raw      map[string]any
)

func load() {
	b, err := policies.Bundle.ReadFile(policies.CapabilitiesPath)
	if err != nil {
		loadErr = fmt.Errorf("capabilities read: %w", err)
		return
	}
	if err := json.Unmarshal(b, &loaded); err != nil {
		loadErr = fmt.Errorf("capabilities decode: %w", err)
		return
	}
	var whole struct {
		Backends map[string]any `json:"backends"`
	}
	if err := json.Unmarshal(b, &whole); err != nil {
		loadErr = fmt.Errorf("capabilities decode: %w", err)
		return
	}
	raw = whole.Backends
	for b := range loaded.NeverEgress.Blocks {
		if pf, err := netip.ParsePrefix(b); err != nil || pf != pf.Masked() {
			loadErr = fmt.Errorf("capabilities: never_egress block %q is not a canonical CIDR block", b)
			return
		}
	}
	for h := range loaded.BrokerForbidden {
		if h == "" || h != strings.ToLower(h) {
			loadErr = fmt.Errorf("capabilities: broker_forbidden_headers key %q is not a lowercase header name", h)
			return
		}
	}
	if len(loaded.NeverEgress.Blocks) == 0 {
		loadErr = fmt.Errorf("capabilities: never_egress has no blocks")
	}
}

func data() capabilityData {
	loadOnce.Do(load)
	if loadErr != nil {
		// The file is embedded at build time and checked by tests; failing
		// here means the binary itself is broken.
		panic(loadErr)
	}
	return loaded
}

// Lookup returns the descriptor for a capability key (docker/<runtime>, or
// the backend scheme).
func Lookup(key string) (Capabilities, bool) {
	c, ok := data().Backends[key]
	return c, ok
}

// LookupRaw returns the descriptor as generic JSON, as the policy input
// document carries it.
func LookupRaw(key string) (map[string]any, bool) {
	data()
	m, ok := raw[key].(map[string]any)
	return m, ok
}

// Keys lists every capability key, sorted.
func Keys() []string {
	keys := make([]string, 0, len(data().Backends))
	for k := range data().Backends {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// CapBounds returns the range every cap must lie in (SBX-RES-001).
func CapBounds() model.Bounds { return data().Bounds }

// PoolBounds returns the largest warm pool size and the shortest idle time
// (SBX-WRM-002, SBX-WRM-003).
func PoolBounds() (sizeMax, idleMinSeconds int64) {
	b := data().PoolBounds
	return b.SizeMax, b.MaxIdleSecondsMin
}

// MaxTimeoutSeconds returns the ceiling of timeout_seconds and
// lifetime_seconds (SBX-TMO-001, SBX-TMO-002).
func MaxTimeoutSeconds() int64 { return data().MaxTimeout }

// BrokerForbiddenHeaders returns the request headers (lowercase) that a
// brokered secret must never be written into, each with why: the plan
// refuses them (SBX-SEC-009) and a broker must refuse them too.
func BrokerForbiddenHeaders() map[string]string { return maps.Clone(data().BrokerForbidden) }
