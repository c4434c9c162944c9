package backends

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Registration is everything the rest of sandboxio knows about one backend,
// declared once by the backend's own package in an init function:
//
//	func init() { backends.Register(backends.Registration{Scheme: "docker", ...}) }
//
// The programs import internal/backends/all, so every part sees the same set.
// The capability descriptor is not restated: it is the capability data's entry
// (policies/capabilities/data.json) under SCHEME or SCHEME/RUNTIME.
type Registration struct {
	// Scheme is the DSN scheme, lower case.
	Scheme string
	// Order places the scheme in the lists shown to users (fixes and
	// messages); lower first.
	Order int
	// DSN describes the scheme's DSNs: what follows ://, the non-secret
	// query options and where the credentials come from.
	DSN DSNSyntax
	// DefaultRuntime is the runtime of a sandbox that names none, for a
	// backend whose capability data is keyed SCHEME/RUNTIME (Docker's
	// runc); the DSN then takes a runtime option whose values are the
	// runtimes in the capability data. Empty for a backend with a single
	// descriptor, keyed by the scheme.
	DefaultRuntime string
	// Open returns a backend that provisions sandboxes on the DSN's target
	// (the Modal app, the Vercel team and project; nothing for Docker, whose
	// options are read per sandbox). Credentials come from the environment,
	// never from the DSN. Nil means this build declares the scheme (DSN,
	// capabilities, policy) but cannot provision on it.
	Open func(dsn DSN) (Backend, error)
	// EndpointOptions are the DSN options that select the endpoint (E2B's
	// domain): the DSN Open receives keeps these and drops the rest, which
	// apply per sandbox.
	EndpointOptions []string
	// LiveCheck runs, without creating any sandbox, the checks that need
	// the live backend (a runtime registered, an image present, the
	// disk-cap strategy; on Kubernetes the egress lock, shown by short-lived
	// probe pods that are removed again): what template apply verifies and
	// open verifies again. Nil means the backend is checked when a sandbox
	// is opened only.
	LiveCheck func(ctx context.Context, spec model.Spec) (Preflight, error)
	// Unreachable is the fix given when the live checks cannot reach the
	// backend.
	Unreachable string
	// Variants are the DSN options whose value selects a capability
	// variant: docker://?egress=gateway is described by docker/runc+gateway.
	Variants []string
	// Lists says that the backends Open returns find their sandboxes by
	// label and implement Reaper: `sandboxio reap` sweeps them.
	Lists bool
}

// DSNSyntax is the form of one scheme's DSNs.
type DSNSyntax struct {
	Form    string   // the expected form, quoted in fixes: docker://, modal://APP
	Target  int      // TargetNone, TargetApp, TargetTeamProject or TargetContextNamespace
	Env     []string // the environment variables the credentials come from
	EnvHelp string   // the same, as a fix says it
	NoHost  string   // TargetNone: where an address goes instead of a host
	// Options are the query options besides runtime (which comes from the
	// capability data when DefaultRuntime is set).
	Options map[string]DSNOption
}

// Where a scheme takes its target.
const (
	TargetNone             = iota // docker://, e2b://, daytona://: nothing after ://
	TargetApp                     // modal://APP
	TargetTeamProject             // vercel://TEAM/PROJECT
	TargetContextNamespace        // kubernetes://CONTEXT/NAMESPACE
)

var registry struct {
	mu     sync.RWMutex
	byName map[string]*Registration
	sorted []*Registration
}

// Register adds a backend. It is called from the backend package's init
// function; registering a scheme twice, or an invalid one, is a defect of
// the build and panics there, as database/sql's Register does, so that no
// binary ships with it.
func Register(r Registration) {
	if r.Scheme == "" || r.Scheme != strings.ToLower(r.Scheme) || strings.ContainsAny(r.Scheme, ":/?#") {
		panic(fmt.Sprintf("backends: invalid scheme %q", r.Scheme))
	}
	if r.DSN.Form == "" {
		panic("backends: " + r.Scheme + " registered without a DSN form")
	}
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if _, dup := registry.byName[r.Scheme]; dup {
		panic("backends: " + r.Scheme + " registered twice")
	}
	if registry.byName == nil {
		registry.byName = map[string]*Registration{}
	}
	reg := r
	registry.byName[r.Scheme] = &reg
	registry.sorted = append(registry.sorted, &reg)
	sort.SliceStable(registry.sorted, func(i, j int) bool {
		a, b := registry.sorted[i], registry.sorted[j]
		if a.Order != b.Order {
			return a.Order < b.Order
		}
		return a.Scheme < b.Scheme
	})
	dsnCache.Store(nil) // the parser's tables are rebuilt on next use
}

// Registered returns a scheme's registration.
func Registered(scheme string) (*Registration, bool) {
	registry.mu.RLock()
	defer registry.mu.RUnlock()
	r, ok := registry.byName[scheme]
	return r, ok
}

// All returns every registration, in Order.
func All() []*Registration {
	registry.mu.RLock()
	defer registry.mu.RUnlock()
	return append([]*Registration(nil), registry.sorted...)
}

// Schemes lists the registered schemes, in Order.
func Schemes() []string {
	var out []string
	for _, r := range All() {
		out = append(out, r.Scheme)
	}
	return out
}

// Provisionable lists the schemes this build can open sandboxes on.
func Provisionable() []string {
	var out []string
	for _, r := range All() {
		if r.Open != nil {
			out = append(out, r.Scheme)
		}
	}
	return out
}

// Listable lists the schemes whose sandboxes reap can find and remove.
func Listable() []string {
	var out []string
	for _, r := range All() {
		if r.Open != nil && r.Lists {
			out = append(out, r.Scheme)
		}
	}
	return out
}

// CapabilityKey returns the key of the capability descriptor of a sandbox
// with the given runtime on this backend: SCHEME/RUNTIME (the default
// runtime when runtime is empty) for a backend with runtimes, else the
// scheme.
func (r *Registration) CapabilityKey(runtime string) string {
	if r.DefaultRuntime == "" {
		return r.Scheme
	}
	if runtime == "" {
		runtime = r.DefaultRuntime
	}
	return r.Scheme + "/" + runtime
}

// Capabilities returns the descriptor of a sandbox with the given runtime
// on this backend, from the policy bundle's capability data.
func (r *Registration) Capabilities(runtime string) (Capabilities, bool) {
	return Lookup(r.CapabilityKey(runtime))
}

// Runtimes lists the runtimes the capability data describes for this
// backend, sorted; nil for a backend without runtimes.
func (r *Registration) Runtimes() []string {
	if r.DefaultRuntime == "" {
		return nil
	}
	var out []string
	for _, k := range Keys() {
		if rt, ok := strings.CutPrefix(k, r.Scheme+"/"); ok && !strings.Contains(rt, "+") {
			out = append(out, rt)
		}
	}
	return out
}

// CapabilityKey returns the capability key of a backend scheme and runtime
// (see Registration.CapabilityKey). An unregistered scheme is its own key,
// which the capability data does not hold: the policy refuses it.
func CapabilityKey(scheme, runtime string) string {
	if r, ok := Registered(scheme); ok {
		return r.CapabilityKey(runtime)
	}
	return scheme
}
