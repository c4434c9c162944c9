package kubernetes

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// createPlan is a create request checked without any API call.
type createPlan struct {
	spec          model.Spec
	runtimeClass  string     // "" for the cluster's default handler
	tier          model.Tier // what the RuntimeClass's name claims; confirmed from inside
	caps          model.Caps
	createTimeout time.Duration
	callTimeout   time.Duration
	lifetime      time.Duration
	labels        map[string]string
	env           []string // NAME=value, sent in each exec's block
	secrets       []string // NAME=value, sent in each exec's block only
	egress        egressPlan
	onWarning     func(model.Warning)
	// A warm sandbox's idle time and template digest (pool.go); zero for
	// any other.
	warmIdle     time.Duration
	warmSpecHash string
}

// classTiers is the tier a RuntimeClass's name claims. The claim is only
// a claim: the kernel seen from inside the pod confirms it (probe.go).
func classTier(name string) (model.Tier, bool) {
	switch n := strings.ToLower(name); {
	case n == "" || n == "runc" || n == "crun":
		return model.TierContainer, true
	case n == "gvisor" || n == "runsc":
		return model.TierGVisor, true
	case strings.HasPrefix(n, "kata"):
		return model.TierMicroVM, true
	}
	return "", false
}

func checkRuntimeClass(v string) (string, bool) {
	return v, len(validation.IsDNS1123Subdomain(v)) == 0
}

func gap(rule, attribute, found string) error {
	return backends.Backstop(Name, rule, attribute, found)
}

// validate checks a request; checkSecrets is false for Preflight.
func (b *k8sBackend) validate(req backends.CreateRequest, checkSecrets bool) (createPlan, error) {
	s := req.Spec
	p := createPlan{spec: s, onWarning: req.OnWarning}
	if s.Backend != "" {
		d, err := backends.ParseDSN(s.Backend)
		if err != nil {
			return p, err
		}
		if d.Scheme != Name {
			return p, &model.Error{Class: model.ErrConfiguration, Attribute: "backend",
				Message: fmt.Sprintf("spec is for backend %s, not kubernetes", d.Scheme), Fix: "open the sandbox with the backend the spec names"}
		}
	}
	if strings.TrimSpace(s.Image) == "" {
		return p, &model.Error{Class: model.ErrConfiguration, Attribute: "image", Message: "no image",
			Fix: "set image to an image the cluster's nodes can run"}
	}
	if s.Volume != nil {
		return p, gap(rules.VolUnscoped, "volume", "a volume, which this backend does not provide")
	}
	if err := backends.NoBroker(Name, s); err != nil {
		return p, err
	}
	for _, step := range []func() error{
		p.planEgress,
		func() error { return p.planRuntime(b.runtime) },
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
	return p, nil
}

func (p *createPlan) planRuntime(dsnClass string) error {
	if p.spec.Runtime != "" {
		return gap(rules.IsoRuntimeElsewhere, "runtime", fmt.Sprintf("runtime %q (the RuntimeClass is the DSN's runtime_class option)", p.spec.Runtime))
	}
	p.runtimeClass = dsnClass
	tier, ok := classTier(p.runtimeClass)
	if !ok {
		// An unknown class name claims nothing; the probe may still show
		// the host's kernel (CONTAINER).
		tier = model.TierUnknown
	}
	p.tier = tier
	if r := p.spec.RequireIsolation; r != "" {
		if _, ok := r.Rank(); !ok || r == model.TierUnknown {
			return gap(rules.IsoNotATier, "require_isolation", fmt.Sprintf("require_isolation %q", r))
		}
		if tier != model.TierUnknown && !tier.Satisfies(r) {
			return gap(rules.IsoBelow, "require_isolation", fmt.Sprintf("RuntimeClass %q claims %s, %s is required", p.runtimeClass, tier, r))
		}
	}
	return nil
}

func (p *createPlan) planCaps() error {
	c := p.spec.Resources
	if err := c.CheckBounds(backends.CapBounds()); err != nil {
		return backends.BackstopOf(Name, err)
	}
	// Kubernetes has no per-container process limit: the node's
	// podPidsLimit is the ceiling (measured at create), whatever pids says.
	if c.Pids != model.DefaultCaps().Pids {
		return gap(rules.ResNotSettable, "resources.pids", fmt.Sprintf("pids %d, where the ceiling is the node's podPidsLimit", c.Pids))
	}
	p.caps = c
	return nil
}

func (p *createPlan) planTimeouts(create time.Duration) error {
	t, err := backends.PlanTimeouts(Name, p.spec, create)
	p.callTimeout, p.lifetime, p.createTimeout = t.Call, t.Lifetime, t.Create
	return err
}

// planLabels: the user's labels plus tenant, session and template under the
// reserved prefix, all of which must be valid Kubernetes labels (they are
// the pod's labels, which the reaper and List select on).
func (p *createPlan) planLabels() error {
	var err error
	if p.labels, err = backends.SandboxLabels(Name, p.spec); err != nil {
		return err
	}
	for _, k := range sortedKeys(p.labels) {
		errs := append(validation.IsQualifiedName(k), validation.IsValidLabelValue(p.labels[k])...)
		if len(errs) > 0 {
			return &model.Error{Class: model.ErrConfiguration, Attribute: "labels",
				Message: fmt.Sprintf("label %q is not a valid Kubernetes label: %s", k, strings.Join(errs, "; ")),
				Fix:     "use label keys and values of at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit (tenant and session ids included)"}
		}
	}
	return nil
}

func validEnvName(k string) bool { return k != "" && !strings.ContainsAny(k, "=\x00") }

func (p *createPlan) planEnv() error {
	for _, k := range sortedKeys(p.spec.Env) {
		if !validEnvName(k) || strings.Contains(p.spec.Env[k], "\x00") {
			return &model.Error{Class: model.ErrConfiguration, Attribute: "env",
				Message: fmt.Sprintf("%q is not an environment variable name (or its value holds NUL)", k), Fix: "use names without '=' or NUL"}
		}
		p.env = append(p.env, k+"="+p.spec.Env[k])
	}
	return nil
}

func (p *createPlan) planSecrets(values map[string]string, checkSecrets bool) error {
	for _, name := range p.spec.SecretNames {
		v, ok := values[name]
		if !ok && checkSecrets {
			return &model.Error{Class: model.ErrConfiguration, Rule: rules.SecretValues, Attribute: "secret_names",
				Message: fmt.Sprintf("no value was supplied for secret %q", name),
				Fix:     "pass the secret's value at run time (from the environment of the caller)"}
		}
		if !validEnvName(name) {
			return gap(rules.SecName, "secret_names", fmt.Sprintf("secret name %q", name))
		}
		if strings.Contains(v, "\x00") {
			return &model.Error{Class: model.ErrConfiguration, Attribute: "secret_names",
				Message: fmt.Sprintf("the value of secret %q holds a NUL byte, which no environment can carry", name), Fix: "pass a value without NUL"}
		}
		p.secrets = append(p.secrets, name+"="+v)
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
