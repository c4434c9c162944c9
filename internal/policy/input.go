package policy

import (
	"encoding/json"
	"strconv"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// InputVersion is the version of the input document. policies/README.md
// documents its shape; team policies and `sandboxio policy check` rely on it.
const InputVersion = 1

// Input kinds: which resource (or run-time object) the document describes.
const (
	KindTemplate      = "template"
	KindNetworkPolicy = "network_policy"
	KindResourceCaps  = "resource_caps"
	KindTenantSandbox = "tenant_sandbox"
	KindSpec          = "spec"
)

// Input is the normalized configuration evaluated by the policy bundle.
// Parts that do not apply to the kind are nil and absent from the document.
type Input struct {
	Kind      string
	Address   string
	Backend   *BackendRef
	Template  *TemplateInput
	Network   *model.NetworkPolicy
	Resources *model.Caps
	Tenant    *TenantInput
}

// BackendRef is the parsed backend DSN and the capability key it selects.
type BackendRef struct {
	DSN     string
	Scheme  string
	Runtime string
	Key     string
	Options map[string]string
}

// TemplateInput holds the template attributes other than network and caps.
type TemplateInput struct {
	Name             string
	Image            string
	Runtime          string
	RequireIsolation string
	TimeoutSeconds   int64
	LifetimeSeconds  int64
	Env              map[string]string
	SecretNames      []string
	Labels           map[string]string
}

// TenantInput identifies the tenant and session of a per-tenant sandbox.
type TenantInput struct {
	TenantID  string
	SessionID string
	Labels    map[string]string
}

// FromSpec builds the input document of a rendered spec, as the run-time
// helper evaluates it before provisioning.
func FromSpec(s model.Spec, backend *BackendRef) Input {
	net := s.Network.Normalized()
	caps := s.Resources
	in := Input{
		Kind:    KindSpec,
		Backend: backend,
		Template: &TemplateInput{
			Name:             s.Name,
			Image:            s.Image,
			Runtime:          s.Runtime,
			RequireIsolation: string(s.RequireIsolation),
			TimeoutSeconds:   s.TimeoutSeconds,
			LifetimeSeconds:  s.LifetimeSeconds,
			Env:              s.Env,
			SecretNames:      s.SecretNames,
			Labels:           userLabels(s.Labels),
		},
		Network:   &net,
		Resources: &caps,
	}
	if s.TenantID != "" || s.SessionID != "" {
		in.Tenant = &TenantInput{TenantID: s.TenantID, SessionID: s.SessionID}
	}
	return in
}

// userLabels drops the labels sandboxio itself sets, so that a rendered
// per-tenant spec is not refused for carrying its own reserved labels.
func userLabels(labels map[string]string) map[string]string {
	out := make(map[string]string, len(labels))
	for k, v := range labels {
		switch k {
		case model.LabelTenantID, model.LabelSessionID, model.LabelTemplate:
			continue
		}
		out[k] = v
	}
	return out
}

// capabilityValues caches each descriptor's AST form: converting it on every
// evaluation would dominate the allocation budget.
var capabilityValues = func() map[string]ast.Value {
	m := map[string]ast.Value{}
	for _, key := range backends.Keys() {
		raw, _ := backends.LookupRaw(key)
		v, err := ast.InterfaceToValue(raw)
		if err != nil {
			panic("capabilities: " + err.Error())
		}
		m[key] = v
	}
	return m
}()

// Value returns the document as an OPA value, built directly rather than
// through JSON so that evaluation stays cheap.
func (in Input) Value() ast.Value {
	obj := ast.NewObject(
		item("input_version", ast.InternedTerm(InputVersion)),
		item("kind", ast.InternedTerm(in.Kind)),
		item("address", ast.InternedTerm(in.Address)),
	)
	if b := in.Backend; b != nil {
		obj.Insert(keyTerms["backend"], ast.NewTerm(ast.NewObject(
			item("dsn", ast.InternedTerm(b.DSN)),
			item("scheme", ast.InternedTerm(b.Scheme)),
			item("runtime", ast.InternedTerm(b.Runtime)),
			item("key", ast.InternedTerm(b.Key)),
			item("options", stringMap(b.Options)),
		)))
		if caps, ok := capabilityValues[b.Key]; ok {
			obj.Insert(keyTerms["capabilities"], ast.NewTerm(caps))
		}
	}
	if t := in.Template; t != nil {
		obj.Insert(keyTerms["template"], ast.NewTerm(ast.NewObject(
			item("name", ast.StringTerm(t.Name)),
			item("image", ast.StringTerm(t.Image)),
			item("runtime", ast.InternedTerm(t.Runtime)),
			item("require_isolation", ast.InternedTerm(t.RequireIsolation)),
			item("timeout_seconds", intTerm(t.TimeoutSeconds)),
			item("lifetime_seconds", intTerm(t.LifetimeSeconds)),
			item("env", stringMap(t.Env)),
			item("secret_names", stringList(t.SecretNames)),
			item("labels", stringMap(t.Labels)),
		)))
	}
	if n := in.Network; n != nil {
		obj.Insert(keyTerms["network"], ast.NewTerm(ast.NewObject(
			item("egress", ast.InternedTerm(n.Egress)),
			item("allow", stringList(n.Allow)),
		)))
	}
	if c := in.Resources; c != nil {
		obj.Insert(keyTerms["resources"], ast.NewTerm(ast.NewObject(
			item("cpu", ast.NumberTerm(jsonNumber(c.CPU))),
			item("memory_mb", intTerm(c.MemoryMB)),
			item("disk_mb", intTerm(c.DiskMB)),
			item("pids", intTerm(c.Pids)),
		)))
	}
	if t := in.Tenant; t != nil {
		obj.Insert(keyTerms["tenant"], ast.NewTerm(ast.NewObject(
			item("tenant_id", ast.StringTerm(t.TenantID)),
			item("session_id", ast.StringTerm(t.SessionID)),
			item("labels", stringMap(t.Labels)),
		)))
	}
	return obj
}

// Map returns the document as generic JSON, for display and for
// `sandboxio policy check --format json`.
func (in Input) Map() (map[string]any, error) {
	v, err := ast.JSON(in.Value())
	if err != nil {
		return nil, err
	}
	m, _ := v.(map[string]any)
	return m, nil
}

// keyTerms holds the document's keys, built once: most are not among the
// strings OPA interns, and the input is rebuilt for every evaluation.
var keyTerms = map[string]*ast.Term{}

func init() {
	for _, k := range []string{
		"input_version", "kind", "address", "backend", "dsn", "scheme", "runtime", "key", "options", "capabilities",
		"template", "name", "image", "require_isolation", "timeout_seconds", "lifetime_seconds", "env", "secret_names",
		"labels", "network", "egress", "allow", "resources", "cpu", "memory_mb", "disk_mb", "pids", "tenant",
		"tenant_id", "session_id",
	} {
		keyTerms[k] = ast.StringTerm(k)
	}
	// Interning the enumerated values spares an allocation per value per
	// evaluation. OPA's intern table is written only here, during init.
	ast.InternStringTerm(KindTemplate, KindNetworkPolicy, KindResourceCaps, KindTenantSandbox, KindSpec,
		"docker", "e2b", "modal", "vercel", "daytona", "runc", "runsc", "kata",
		"docker/runc", "docker/runsc", "docker/kata", "docker://", "e2b://", "daytona://",
		model.EgressDeny, model.EgressAllow, model.EgressLearn,
		string(model.TierUnknown), string(model.TierContainer), string(model.TierGVisor), string(model.TierMicroVM))
}

func item(k string, v *ast.Term) [2]*ast.Term {
	t, ok := keyTerms[k]
	if !ok {
		t = ast.StringTerm(k)
	}
	return ast.Item(t, v)
}

func intTerm(i int64) *ast.Term { return ast.InternedTerm(i) }

func jsonNumber(f float64) json.Number { return json.Number(strconv.FormatFloat(f, 'g', -1, 64)) }

func stringList(xs []string) *ast.Term {
	if len(xs) == 0 {
		return ast.ArrayTerm()
	}
	terms := make([]*ast.Term, len(xs))
	for i, x := range xs {
		terms[i] = ast.StringTerm(x)
	}
	return ast.ArrayTerm(terms...)
}

// stringMap converts a map; OPA objects keep their keys ordered
// themselves, so the iteration order does not matter.
func stringMap(m map[string]string) *ast.Term {
	if len(m) == 0 {
		return ast.ObjectTerm()
	}
	items := make([][2]*ast.Term, 0, len(m))
	for k, v := range m {
		items = append(items, ast.Item(ast.StringTerm(k), ast.StringTerm(v)))
	}
	return ast.ObjectTerm(items...)
}
