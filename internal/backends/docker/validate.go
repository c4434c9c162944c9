package docker

import (
	"crypto/x509"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/docker/docker/api/types/system"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker/egress"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker/egress/broker"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// createPlan is a create request checked and resolved without any API call:
// everything that can be refused on the request alone is refused here, so
// that nothing is created for a request that cannot be enforced.
type createPlan struct {
	spec          model.Spec
	runtime       string     // runtime name on the daemon
	tier          model.Tier // the tier the runtime name claims; confirmed against the daemon
	networkMode   string     // "none" or "bridge"
	diskStrategy  string     // from the DSN: "", auto, storage-opt or tmpfs
	caps          model.Caps
	createTimeout time.Duration
	callTimeout   time.Duration
	lifetime      time.Duration
	labels        map[string]string // user, tenant, session and template labels
	env           []string
	secrets       []string // NAME=value for every declared secret; exec-only
	onWarning     func(model.Warning)
	binds         []Bind // host directories bound in (CreateWithBinds only)
	// brokered are the brokered secrets with their values, until
	// openBroker hands them to the sandbox's broker (and clears them);
	// onBrokered gets the broker's audit entries.
	brokered    []broker.Secret
	broker      *broker.Broker
	brokerRoots *x509.CertPool // what the broker verifies upstream with
	brokerFiles *brokerFiles
	onBrokered  func(model.BrokeredRequest)
	// observe: the sandbox's denied egress is observed and reported (deny
	// and learn under runc); learn: the report was asked for, so a sandbox
	// whose observer cannot be attached is not created.
	observe, learn bool
	// gateway: the DSN asks for the egress gateway (egress=gateway);
	// forward: this sandbox gets one (deny under runc), with gwRules from
	// its allow list and the resolver option's DNS server (empty: the
	// host's, found at create).
	gateway, forward bool
	gwRules          egress.Rules
	resolver         string
	// gwProbe replaces the gateway's resolver and dialer for the gateway's
	// own proof (gwproof.go); nil for every other sandbox.
	gwProbe *gatewayProbe
	// A warm sandbox of a pool (CreateWarm): how long it waits for a claim,
	// and the digest of its template spec.
	warmIdle     time.Duration
	warmSpecHash string
	// Set by create: the host path of the sandbox init (sinit.go) and the
	// wall-clock ends it is given.
	initPath           string
	expires, idleUntil time.Time
}

// runtimeTiers maps the runtimes sandboxio knows to their isolation tier.
// Anything else is refused: a tier claim for an unknown runtime would be a
// guess, and tiers exist to be relied on.
var runtimeTiers = map[string]model.Tier{
	"runc":                    model.TierContainer,
	"io.containerd.runc.v2":   model.TierContainer,
	"runsc":                   model.TierGVisor,
	"kata":                    model.TierMicroVM,
	"kata-runtime":            model.TierMicroVM,
	"io.containerd.kata.v2":   model.TierMicroVM,
	"containerd-shim-kata-v2": model.TierMicroVM,
}

// tierOfRegistration names the tier of what the daemon runs for a runtime:
// its binary (the legacy "path" form) or its containerd shim ("runtimeType").
// Anything unrecognised confirms no tier.
func tierOfRegistration(rt system.Runtime) (model.Tier, bool) {
	if rt.Path != "" {
		return tierOfBinary(rt.Path)
	}
	switch t := rt.Type; {
	case t == "io.containerd.runc.v1" || t == "io.containerd.runc.v2":
		return model.TierContainer, true
	case t == "io.containerd.runsc.v1":
		return model.TierGVisor, true
	case t == "io.containerd.kata.v2" || strings.HasPrefix(t, "io.containerd.kata-"):
		return model.TierMicroVM, true
	case strings.HasPrefix(t, "/"):
		return tierOfBinary(t) // a shim given by its path
	}
	return "", false
}

// tierOfBinary names the tier of a runtime by the binary the daemon runs for
// it, so that a runtime registered as "runsc" but pointing at runc is not
// reported as GVISOR.
func tierOfBinary(p string) (model.Tier, bool) {
	switch base := path.Base(p); {
	case base == "runc":
		return model.TierContainer, true
	case base == "runsc":
		return model.TierGVisor, true
	case strings.HasPrefix(base, "kata") || strings.Contains(base, "shim-kata"):
		return model.TierMicroVM, true
	}
	return "", false
}

// validate checks a request without any API call. checkSecrets is false for
// Preflight, which runs before secret values exist.
//
// The policy bundle has decided on the spec before it reaches a backend;
// what validate finds that a rule should have refused is a Backstop error
// (the policy accepted a configuration Docker cannot enforce), never a
// refusal in Docker's own words.
func validate(req backends.CreateRequest, checkSecrets bool) (createPlan, error) {
	s := req.Spec
	p := createPlan{spec: s, onWarning: req.OnWarning, onBrokered: req.OnBrokered}
	dsnRuntime, err := p.resolveBackend()
	if err != nil {
		return p, err
	}
	if strings.TrimSpace(s.Image) == "" {
		return p, &model.Error{Class: model.ErrConfiguration, Attribute: "image",
			Message: "no image", Fix: "set image to an image present on the Docker daemon"}
	}
	if s.Volume != nil {
		return p, gap(rules.VolUnscoped, "volume", "a volume, which every tenant's sandboxes would share")
	}
	for _, step := range []func() error{
		p.planNetwork,
		func() error { return p.planRuntime(dsnRuntime) },
		p.planCaps,
		func() error { return p.planTimeouts(req.Timeout) },
		p.planLabels,
		p.planEnv,
		func() error { return p.planSecrets(req.Secrets, checkSecrets) },
	} {
		if err := step(); err != nil {
			return p, err
		}
	}
	// gVisor answers the sandbox's packets in its own network stack, which
	// under --network=none has loopback only: nothing reaches the
	// namespace the observer would watch (docs/design/docker-backend.md).
	p.observe = p.networkMode == "none" && p.tier == model.TierContainer
	// The gateway's device lives in the container's namespace, which only
	// runc's sandboxes use (as for the observer); learn stays observed.
	p.forward = p.gateway && p.observe && !p.learn
	if len(p.gwRules.Blocks)+len(p.gwRules.Names) > 0 && !p.forward {
		return p, gap(rules.NetAllowList, "network.allow", fmt.Sprintf("an allow list on runtime %s, where the egress gateway cannot see the sandbox's traffic", p.runtime))
	}
	// Only the gateway that forwards this sandbox's traffic could broker
	// its secrets; anywhere else the value would have nowhere to go but
	// the environment.
	if !p.forward {
		if err := backends.NoBroker(Name, s); err != nil {
			return p, err
		}
	}
	if err := p.planBrokered(req.Brokered, checkSecrets); err != nil {
		return p, err
	}
	if p.learn && !p.observe {
		return p, gap(rules.NetLearn, "network.egress", fmt.Sprintf(`egress "learn" on runtime %s, where blocked egress is not observed`, p.runtime))
	}
	return p, nil
}

// resolveBackend checks that the spec is for Docker and returns the DSN's
// runtime option; it takes the DSN's disk strategy.
func (p *createPlan) resolveBackend() (string, error) {
	if p.spec.Backend == "" {
		return "", nil
	}
	d, err := backends.ParseDSN(p.spec.Backend)
	if err != nil {
		return "", err
	}
	if d.Scheme != Name {
		return "", &model.Error{Class: model.ErrConfiguration, Attribute: "backend",
			Message: fmt.Sprintf("spec is for backend %s, not docker", d.Scheme),
			Fix:     "open the sandbox with the backend the spec names"}
	}
	p.diskStrategy = d.Options["disk_strategy"]
	p.gateway = d.Options["egress"] == egressGateway
	p.resolver = d.Options["resolver"]
	return d.Options["runtime"], nil
}

// gap is the Backstop error of this backend.
func gap(rule, attribute, found string) error {
	return backends.Backstop(Name, rule, attribute, found)
}

// planNetwork picks the network mode: none for deny, the egress bridge for
// an explicit allow. Docker has no per-host egress filter.
func (p *createPlan) planNetwork() error {
	n := p.spec.Network.Normalized()
	switch n.Egress {
	case model.EgressDeny:
		p.networkMode = "none"
	case model.EgressAllow:
		p.networkMode = "bridge"
	case model.EgressLearn:
		// Deny plus a record: the same network mode, observed.
		p.networkMode, p.learn = "none", true
	default:
		return gap(rules.NetEgressMode, "network.egress", fmt.Sprintf("egress %q", n.Egress))
	}
	if p.gateway && n.Egress == model.EgressAllow {
		return gap(rules.NetOpenUnsupported, "network.egress", `egress "allow" with the egress gateway, which forwards listed destinations only`)
	}
	if len(n.Allow) == 0 {
		return nil
	}
	if !p.gateway {
		return gap(rules.NetAllowList, "network.allow", fmt.Sprintf("an allow list of %d entries", len(n.Allow)))
	}
	if n.Egress != model.EgressDeny {
		return gap(rules.NetAllowList, "network.allow", fmt.Sprintf("an allow list with egress %q", n.Egress))
	}
	r, err := gatewayRules(n.Allow)
	if err != nil {
		return err
	}
	p.gwRules = r
	return nil
}

// egressGateway is the DSN's egress option value that turns the gateway on.
const egressGateway = "gateway"

// gatewayRules parses an allow list into the gateway's rules, with the
// parser the policy uses: an entry the plan would refuse is a Backstop.
func gatewayRules(allow []string) (egress.Rules, error) {
	var r egress.Rules
	for i, a := range allow {
		e, err := model.ParseEgressEntry(a)
		if err != nil {
			return r, gap(rules.NetAllowKind, "network.allow", fmt.Sprintf("allow[%d], which is no entry the gateway takes (%v)", i, err))
		}
		if egress.NeverEntry(e.Prefix, e.Name) {
			return r, gap(rules.NetNever, "network.allow", fmt.Sprintf("allow[%d], which no sandbox may reach", i))
		}
		switch e.Kind {
		case "domain":
			r.Names = append(r.Names, e.Name)
		default:
			r.Blocks = append(r.Blocks, egress.Block{Prefix: e.Prefix, Port: e.Port, Entry: a})
		}
	}
	return r, nil
}

// planRuntime resolves the runtime (the spec's, the DSN's, then runc) and
// the tier its name claims, and checks the requirement against it.
func (p *createPlan) planRuntime(dsnRuntime string) error {
	p.runtime = p.spec.Runtime
	if p.runtime == "" {
		p.runtime = dsnRuntime
	}
	if p.runtime == "" {
		p.runtime = "runc"
	}
	tier, ok := runtimeTiers[p.runtime]
	if !ok {
		return gap(rules.IsoNoCapsData, "runtime", fmt.Sprintf("runtime %q, of no known tier", p.runtime))
	}
	p.tier = tier
	if p.spec.RequireIsolation != "" {
		return checkRequirement(tier, p.spec.RequireIsolation, p.runtime)
	}
	return nil
}

// planCaps takes the caps: every one always applies. Zero or negative is
// never "no limit", nor is a value outside the range Docker can apply
// (cap_bounds in the capability data): 1e-10 CPU would round to NanoCPUs 0
// and 2^44 MiB would overflow to 0 bytes, both "no limit".
func (p *createPlan) planCaps() error {
	c := p.spec.Resources
	if err := c.CheckBounds(backends.CapBounds()); err != nil {
		return backends.BackstopOf(Name, err)
	}
	if caps, ok := backends.Lookup(backends.CapabilityKey(Name, p.runtime)); ok && caps.Caps.MaxPids > 0 && c.Pids > caps.Caps.MaxPids {
		return gap(rules.ResPidsCeiling, "resources.pids", fmt.Sprintf("pids %d, above the ceiling %d of runtime %s", c.Pids, caps.Caps.MaxPids, p.runtime))
	}
	p.caps = c
	return nil
}

// planTimeouts: see backends.PlanTimeouts.
func (p *createPlan) planTimeouts(create time.Duration) error {
	t, err := backends.PlanTimeouts(Name, p.spec, create)
	p.callTimeout, p.lifetime, p.createTimeout = t.Call, t.Lifetime, t.Create
	return err
}

// planLabels sets the user's labels plus tenant, session and template under
// the reserved prefix. A user may repeat those (a rendered per-tenant spec
// carries them) but not contradict them or set any other reserved label.
func (p *createPlan) planLabels() (err error) {
	p.labels, err = backends.SandboxLabels(Name, p.spec)
	return err
}

// planEnv renders the spec's environment; a name Docker cannot pass is
// refused.
func (p *createPlan) planEnv() error {
	for _, k := range sortedKeys(p.spec.Env) {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return &model.Error{Class: model.ErrConfiguration, Attribute: "env",
				Message: fmt.Sprintf("%q is not an environment variable name", k), Fix: "use names without '=' or NUL"}
		}
		p.env = append(p.env, k+"="+p.spec.Env[k])
	}
	return nil
}

// planSecrets renders the secrets, exec-only. checkSecrets is false for
// Preflight, which runs before secret values exist.
func (p *createPlan) planSecrets(values map[string]string, checkSecrets bool) error {
	for _, name := range p.spec.SecretNames {
		v, ok := values[name]
		if !ok && checkSecrets {
			// Name only: the value is never part of an error.
			return &model.Error{Class: model.ErrConfiguration, Rule: rules.SecretValues, Attribute: "secret_names",
				Message: fmt.Sprintf("no value was supplied for secret %q", name),
				Fix:     "pass the secret's value at run time (from the environment of the caller)"}
		}
		if name == "" || strings.ContainsAny(name, "=\x00") {
			return gap(rules.SecName, "secret_names", fmt.Sprintf("secret name %q", name))
		}
		p.secrets = append(p.secrets, name+"="+v)
	}
	return nil
}

// checkRequirement backstops the isolation rules: the requirement is a tier
// other than UNKNOWN, and the runtime's tier meets it.
func checkRequirement(tier, required model.Tier, runtime string) error {
	if _, ok := required.Rank(); !ok {
		return gap(rules.IsoNotATier, "require_isolation", fmt.Sprintf("require_isolation %q", required))
	}
	if required == model.TierUnknown {
		return gap(rules.IsoUnknown, "require_isolation", "require_isolation UNKNOWN")
	}
	if !tier.Satisfies(required) {
		return gap(rules.IsoBelow, "require_isolation", fmt.Sprintf("runtime %s gives %s, %s is required", runtime, tier, required))
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
