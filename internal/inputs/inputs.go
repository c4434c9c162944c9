// Package inputs builds the policy input document of each sandboxio resource
// from plain Go values. The provider (at plan and again at apply),
// `sandboxio policy check` (from `terraform show -json` output) and the
// run-time helper (from a spec) all build documents here, so the rules see
// the same document whichever of them asks: one builder, one decision.
package inputs

import (
	"fmt"
	"strconv"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
	"github.com/sandboxio/terraform-provider-sandboxio/policies"
)

// Backend parses a DSN (falling back to defaultBackend) and selects the
// capability descriptor for the runtime. It returns the reference and the
// normalized DSN. An empty DSN and no default give a nil reference:
// backend-specific rules then do not apply.
func Backend(dsn, runtime, defaultBackend string) (*policy.BackendRef, string, error) {
	if dsn == "" {
		dsn = defaultBackend
	}
	if dsn == "" {
		return nil, "", nil
	}
	parsed, err := backends.ParseDSN(dsn)
	if err != nil {
		return nil, "", err
	}
	ref := &policy.BackendRef{
		DSN:     parsed.String(),
		Scheme:  parsed.Scheme,
		Runtime: parsed.Runtime(runtime),
		Key:     parsed.CapabilityKey(runtime),
		Options: parsed.Options,
	}
	return ref, parsed.String(), nil
}

// NetworkPolicy is a sandboxio_network_policy as configured: empty and nil
// mean unset.
type NetworkPolicy struct {
	Egress  string
	Allow   []string
	Backend string
	// EgressEmpty says egress was configured as the empty string, not
	// left unset: the document keeps "" so that a rule refuses it
	// (SBX-NET-002) instead of it passing as the default, deny.
	EgressEmpty bool
}

// Build returns the input document and the effective (normalized) policy.
// A DSN error is returned as is, a *model.Error on the backend attribute.
func (c NetworkPolicy) Build(defaultBackend string) (policy.Input, model.NetworkPolicy, error) {
	n := model.NetworkPolicy{Egress: c.Egress, Allow: c.Allow}.Normalized()
	if c.EgressEmpty && c.Egress == "" {
		n.Egress = ""
	}
	ref, _, err := Backend(c.Backend, "", defaultBackend)
	if err != nil {
		return policy.Input{}, n, err
	}
	return policy.Input{Kind: policy.KindNetworkPolicy, Backend: ref, Network: &n}, n, nil
}

// ResourceCaps is a sandboxio_resource_caps as configured: nil caps take
// their defaults.
type ResourceCaps struct {
	Caps    model.CapsRequest
	Backend string
}

// Build returns the input document and the effective caps.
func (c ResourceCaps) Build(defaultBackend string) (policy.Input, model.Caps, error) {
	caps := c.Caps.Resolve()
	ref, _, err := Backend(c.Backend, "", defaultBackend)
	if err != nil {
		return policy.Input{}, caps, err
	}
	return policy.Input{Kind: policy.KindResourceCaps, Backend: ref, Resources: &caps}, caps, nil
}

// Template is a sandboxio_template as configured; nil and empty mean unset.
type Template struct {
	Name, Backend, Image, Runtime, RequireIsolation string
	Egress                                          string
	// EgressEmpty says network.egress was configured as the empty string,
	// not left unset (see NetworkPolicy.EgressEmpty).
	EgressEmpty                     bool
	Allow                           []string
	Caps                            model.CapsRequest
	TimeoutSeconds, LifetimeSeconds *int64
	Env, Labels                     map[string]string
	SecretNames                     []string
	// BrokeredSecrets are the brokered secrets as configured; nil or
	// empty when there are none.
	BrokeredSecrets map[string]model.BrokeredSecret
	// Volume is the template's volume; nil when it names none.
	Volume *model.Volume
	// WarmPool is the template's warm pool; nil when it has none.
	WarmPool *model.WarmPool
}

// Build normalizes the template into its input document and its spec
// (defaults filled in). With no backend on the template and no default, it
// returns a ConfigurationError (SBX-DSN-001) on the backend attribute.
func (c Template) Build(defaultBackend string) (model.Spec, policy.Input, error) {
	ref, dsn, err := Backend(c.Backend, c.Runtime, defaultBackend)
	if err != nil {
		return model.Spec{}, policy.Input{}, err
	}
	if ref == nil {
		return model.Spec{}, policy.Input{}, &model.Error{
			Class: model.ErrConfiguration, Rule: rules.DSNUnknown, Attribute: "backend",
			Message: "the template has no backend and the provider sets no default_backend",
			Fix:     `set backend (for example "docker://") on the template, or default_backend on the provider`,
		}
	}
	network := model.NetworkPolicy{Egress: c.Egress, Allow: c.Allow}.Normalized()
	if c.EgressEmpty && c.Egress == "" {
		network.Egress = ""
	}
	caps := c.Caps.Resolve()
	timeout, lifetime := int64(model.DefaultTimeoutSeconds), int64(model.DefaultLifetimeSeconds)
	if c.TimeoutSeconds != nil {
		timeout = *c.TimeoutSeconds
	}
	if c.LifetimeSeconds != nil {
		lifetime = *c.LifetimeSeconds
	}
	tier := model.TierUnknown
	if d, ok := backends.Lookup(ref.Key); ok {
		tier = d.Tier
	}
	runtime := ref.Runtime // "" on a backend without runtimes
	env, labels, secrets := c.Env, c.Labels, c.SecretNames
	if env == nil {
		env = map[string]string{}
	}
	if labels == nil {
		labels = map[string]string{}
	}
	if secrets == nil {
		secrets = []string{}
	}
	brokered := model.NormalizeBrokered(c.BrokeredSecrets)
	in := policy.Input{
		Kind:    policy.KindTemplate,
		Backend: ref,
		Template: &policy.TemplateInput{
			Name: c.Name, Image: c.Image, Runtime: c.Runtime, RequireIsolation: c.RequireIsolation,
			TimeoutSeconds: timeout, LifetimeSeconds: lifetime,
			Env: env, SecretNames: secrets, BrokeredSecrets: brokered, Labels: labels, Volume: c.Volume, WarmPool: c.WarmPool,
		},
		Network:   &network,
		Resources: &caps,
	}
	spec := model.Spec{
		SpecVersion: model.SpecVersion, Name: c.Name, Backend: dsn, Image: c.Image,
		Runtime: runtime, RequireIsolation: model.Tier(c.RequireIsolation), IsolationTier: tier,
		Network: network, Resources: caps, TimeoutSeconds: timeout, LifetimeSeconds: lifetime,
		Env: env, SecretNames: secrets, BrokeredSecrets: brokered, Labels: labels, Volume: c.Volume, WarmPool: c.WarmPool,
	}
	return spec, in, nil
}

// Tenant is the per-tenant part of a data.sandboxio_tenant_sandbox.
type Tenant struct {
	TenantID, SessionID string
	ExtraLabels         map[string]string
}

// Part returns the document of the tenant part alone: what the data source
// checks at plan while its template spec may still be unknown. The tenancy
// and label rules need nothing else.
func (t Tenant) Part() policy.Input {
	return policy.Input{Kind: policy.KindTenantSandbox, Tenant: t.input()}
}

// Sandbox renders the per-tenant spec of a template spec and its document.
// The spec is checked as Spec checks it, so what the data source and
// `sandboxio policy check` accept at plan is what the run-time helper
// accepts: the backend comes from the spec alone (a rendered spec never
// falls back to a provider default), and the isolation tier is the one the
// capability data gives that backend, filled in when the spec leaves it out.
func (t Tenant) Sandbox(template model.Spec) (model.Spec, policy.Input, error) {
	spec := template.ForTenant(t.TenantID, t.SessionID, t.ExtraLabels)
	in, tier, err := Spec(spec)
	if err != nil {
		return model.Spec{}, policy.Input{}, err
	}
	spec.IsolationTier = tier
	in.Kind = policy.KindTenantSandbox
	in.Tenant = t.input()
	// The labels as given, before rendering set the reserved ones: a key
	// under the reserved prefix in the template spec (edited by hand) or in
	// the extra labels is refused (SBX-LBL-001), not silently overwritten.
	in.Template.Labels = policy.UserLabels(template)
	return spec, in, nil
}

func (t Tenant) input() *policy.TenantInput {
	extra := t.ExtraLabels
	if extra == nil {
		extra = map[string]string{}
	}
	return &policy.TenantInput{TenantID: t.TenantID, SessionID: t.SessionID, Labels: extra}
}

// Spec returns the document of a spec, as the run-time helper evaluates it
// before provisioning (and as Sandbox builds it at plan), and its backend's
// isolation tier. It refuses what no rule can decide: a spec with no backend
// (SBX-DSN-001; never a provider's default_backend), and an isolation_tier
// other than the capability data's for its backend and runtime (SBX-SPC-005:
// refused, not corrected, so MICROVM never silently becomes CONTAINER). A spec
// without isolation_tier gets its backend's; no descriptor gives UNKNOWN,
// which the rules refuse (SBX-ISO-005).
func Spec(s model.Spec) (policy.Input, model.Tier, error) {
	ref, _, err := Backend(s.Backend, s.Runtime, "")
	if err != nil {
		return policy.Input{}, "", err
	}
	if ref == nil {
		return policy.Input{}, "", &model.Error{
			Class: model.ErrConfiguration, Rule: rules.DSNUnknown, Attribute: "backend",
			Message: "the spec has no backend: a spec names its backend, it never falls back to the provider's default_backend",
			Fix:     `set "backend" in the spec (for example "docker://"), or pass the spec of a sandboxio_template (sandboxio_template.NAME.spec), which names it`,
		}
	}
	tier, err := specTier(s, ref)
	if err != nil {
		return policy.Input{}, "", err
	}
	return policy.FromSpec(s, ref), tier, nil
}

// specTier returns the tier the capability data gives the backend and
// refuses a spec that states another.
func specTier(s model.Spec, ref *policy.BackendRef) (model.Tier, error) {
	d, ok := backends.Lookup(ref.Key)
	if !ok {
		return model.TierUnknown, nil
	}
	claim := s.IsolationTier
	if claim == "" || claim == d.Tier {
		return d.Tier, nil
	}
	fix := fmt.Sprintf(`set isolation_tier to %q, or leave it out and it is filled in; better, pass sandboxio_template.NAME.spec, which computes it`, d.Tier)
	var msg string
	if _, known := claim.Rank(); !known {
		msg = fmt.Sprintf("isolation_tier %s is not an isolation tier; backend %s gives %s", quoteTier(claim), ref.Key, d.Tier)
	} else {
		msg = fmt.Sprintf("the spec says isolation_tier %s but backend %s gives %s: the tier comes from the backend and its runtime, never from the spec",
			claim, ref.Key, d.Tier)
		if r, _ := claim.Rank(); r > tierRank(d.Tier) {
			fix = fmt.Sprintf(`to run at %s, use a backend or runtime that gives it (%s for GVISOR; %s for MICROVM) and set require_isolation = %q, so that nothing weaker is accepted; otherwise %s`,
				claim, policies.Expand("${tier_GVISOR|or}"), policies.Expand("${tier_MICROVM|or}"), claim, fix)
		}
	}
	return "", &model.Error{Class: model.ErrConfiguration, Rule: rules.SpecTierLies, Attribute: "isolation_tier", Message: msg, Fix: fix}
}

func tierRank(t model.Tier) int {
	r, _ := t.Rank()
	return r
}

// quoteTier quotes a tier that is not one, clipped: it is written by hand.
func quoteTier(t model.Tier) string {
	s := string(t)
	if len(s) > 32 {
		s = s[:32] + "…"
	}
	return strconv.Quote(s)
}
