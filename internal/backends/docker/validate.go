package docker

import (
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/docker/docker/api/types/system"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
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
func validate(req backends.CreateRequest, checkSecrets bool) (createPlan, error) {
	s := req.Spec
	p := createPlan{spec: s, onWarning: req.OnWarning}

	var dsnRuntime string
	if s.Backend != "" {
		d, err := backends.ParseDSN(s.Backend)
		if err != nil {
			return p, err
		}
		if d.Scheme != "docker" {
			return p, &model.Error{Class: model.ConfigurationError, Attribute: "backend",
				Message: fmt.Sprintf("spec is for backend %s, not docker", d.Scheme),
				Fix:     "open the sandbox with the backend the spec names"}
		}
		dsnRuntime = d.Options["runtime"]
		p.diskStrategy = d.Options["disk_strategy"]
	}
	if strings.TrimSpace(s.Image) == "" {
		return p, &model.Error{Class: model.ConfigurationError, Attribute: "image",
			Message: "no image", Fix: "set image to an image present on the Docker daemon"}
	}

	// Network: refuse what Docker cannot enforce before anything else.
	n := s.Network.Normalized()
	switch n.Egress {
	case model.EgressDeny:
		p.networkMode = "none"
	case model.EgressAllow:
		p.networkMode = "bridge"
	case model.EgressLearn:
		return p, &model.Error{Class: model.CapabilityNotSupported, Rule: rules.NetLearn, Attribute: "network.egress",
			Message: `egress "learn" is not available in this version`,
			Fix:     `use egress = "deny" (the default) or an explicit egress = "allow"`}
	default:
		return p, &model.Error{Class: model.ConfigurationError, Rule: rules.NetEgressMode, Attribute: "network.egress",
			Message: fmt.Sprintf("egress %q is not a network mode", n.Egress),
			Fix:     `use egress = "deny" or "allow"`}
	}
	if len(n.Allow) > 0 {
		return p, &model.Error{Class: model.CapabilityNotSupported, Rule: rules.NetAllowList, Attribute: "network.allow",
			Message: "Docker cannot enforce an egress allow list: its network modes are none, bridge, host, container or a custom network, with no per-host filter",
			Fix:     "remove the allow list and bake dependencies into the image or upload a wheelhouse, or use a backend with allow lists (E2B, Modal)"}
	}

	// Runtime and tier.
	p.runtime = s.Runtime
	if p.runtime == "" {
		p.runtime = dsnRuntime
	}
	if p.runtime == "" {
		p.runtime = "runc"
	}
	tier, ok := runtimeTiers[p.runtime]
	if !ok {
		return p, &model.Error{Class: model.ConfigurationError, Rule: rules.IsoNoCapsData, Attribute: "runtime",
			Message: fmt.Sprintf("Docker runtime %q has no known isolation tier", p.runtime),
			Fix:     "set runtime to runc (CONTAINER), runsc (GVISOR) or kata (MICROVM)"}
	}
	p.tier = tier
	if s.RequireIsolation != "" {
		if err := checkRequirement(tier, s.RequireIsolation, p.runtime); err != nil {
			return p, err
		}
	}

	// Caps: every one always applies. Zero or negative is a refusal, never
	// "no limit", and so is a value outside the range Docker can apply
	// (cap_bounds in the capability data): 1e-10 CPU would round to
	// NanoCPUs 0 and 2^44 MiB would overflow to 0 bytes, both "no limit".
	c := s.Resources
	if err := c.CheckBounds(backends.CapBounds()); err != nil {
		return p, err
	}
	if caps, ok := backends.Lookup(backends.CapabilityKey("docker", p.runtime)); ok && caps.Caps.MaxPids > 0 && c.Pids > caps.Caps.MaxPids {
		return p, &model.Error{Class: model.CapabilityNotSupported, Rule: rules.ResPidsCeiling, Attribute: "resources.pids",
			Message: fmt.Sprintf("pids %d is above the Docker ceiling of %d", c.Pids, caps.Caps.MaxPids),
			Fix:     fmt.Sprintf("set pids to at most %d", caps.Caps.MaxPids)}
	}
	p.caps = c

	// Timeouts: a spec carries both (defaults filled in when it was
	// rendered), so zero, negative or above the ceiling is refused, never
	// replaced by a default; the conversion cannot overflow.
	var err error
	if p.callTimeout, p.lifetime, err = model.Durations(s.TimeoutSeconds, s.LifetimeSeconds); err != nil {
		return p, err
	}
	if req.Timeout < 0 {
		return p, &model.Error{Class: model.ConfigurationError, Attribute: "timeout",
			Message: "create timeout must be positive", Fix: "pass 0 to inherit the spec's timeout"}
	}
	p.createTimeout = model.EffectiveTimeout(req.Timeout, p.callTimeout)

	// Labels: the user's own, plus tenant, session and template under the
	// reserved prefix. A user may repeat those (a rendered per-tenant spec
	// carries them) but not contradict them or set any other reserved label.
	p.labels = map[string]string{model.LabelManaged: "true"}
	if s.TenantID != "" {
		p.labels[model.LabelTenantID] = s.TenantID
	}
	if s.SessionID != "" {
		p.labels[model.LabelSessionID] = s.SessionID
	}
	if s.Name != "" {
		p.labels[model.LabelTemplate] = s.Name
	}
	for k, v := range s.Labels {
		if strings.HasPrefix(k, model.ReservedLabelPrefix) {
			if own, ok := p.labels[k]; ok && own == v && k != model.LabelManaged {
				continue
			}
			return p, &model.Error{Class: model.ConfigurationError, Rule: rules.LblReserved, Attribute: "labels",
				Message: fmt.Sprintf("label %q is under the reserved prefix %q", k, model.ReservedLabelPrefix),
				Fix:     "rename the label; tenant_id and session_id are set from the spec"}
		}
		if k == "" {
			return p, &model.Error{Class: model.ConfigurationError, Rule: rules.LblMalformed, Attribute: "labels",
				Message: "empty label key", Fix: "give every label a non-empty key"}
		}
		p.labels[k] = v
	}

	for _, k := range sortedKeys(s.Env) {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return p, &model.Error{Class: model.ConfigurationError, Attribute: "env",
				Message: fmt.Sprintf("%q is not an environment variable name", k), Fix: "use names without '=' or NUL"}
		}
		p.env = append(p.env, k+"="+s.Env[k])
	}
	for _, name := range s.SecretNames {
		v, ok := req.Secrets[name]
		if !ok && checkSecrets {
			// Name only: the value is never part of an error.
			return p, &model.Error{Class: model.ConfigurationError, Rule: rules.SecretValues, Attribute: "secret_names",
				Message: fmt.Sprintf("no value was supplied for secret %q", name),
				Fix:     "pass the secret's value at run time (from the environment of the caller)"}
		}
		if name == "" || strings.ContainsAny(name, "=\x00") {
			return p, &model.Error{Class: model.ConfigurationError, Rule: rules.SecName, Attribute: "secret_names",
				Message: fmt.Sprintf("%q is not an environment variable name", name), Fix: "use names without '=' or NUL"}
		}
		p.secrets = append(p.secrets, name+"="+v)
	}
	return p, nil
}

func checkRequirement(tier, required model.Tier, runtime string) error {
	if _, ok := required.Rank(); !ok {
		return &model.Error{Class: model.ConfigurationError, Rule: rules.IsoNotATier, Attribute: "require_isolation",
			Message: fmt.Sprintf("%q is not an isolation tier", required), Fix: "use one of CONTAINER, GVISOR or MICROVM"}
	}
	if required == model.TierUnknown {
		return &model.Error{Class: model.ConfigurationError, Rule: rules.IsoUnknown, Attribute: "require_isolation",
			Message: "UNKNOWN satisfies no requirement and cannot be required", Fix: "require CONTAINER, GVISOR or MICROVM"}
	}
	if !tier.Satisfies(required) {
		return &model.Error{Class: model.ConfigurationError, Rule: rules.IsoBelow, Attribute: "require_isolation",
			Message: fmt.Sprintf("docker with runtime %s gives %s, below the required %s", runtime, tier, required),
			Fix:     "use runtime runsc (GVISOR) or kata (MICROVM), or a backend of the required tier"}
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
