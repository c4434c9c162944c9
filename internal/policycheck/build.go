package policycheck

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strconv"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// The attributes each document is built from. The provider waits for apply
// while any of them is unknown, and so does the check.
var documentAttributes = map[string][]string{
	typeNetworkPolicy: {"egress", "allow", "backend"},
	typeResourceCaps:  {"cpu", "memory_mb", "disk_mb", "pids", "backend"},
	typeTemplate: {"name", "backend", "image", "runtime", "require_isolation", "network", "resources",
		"timeout_seconds", "lifetime_seconds", "env", "secret_names", "labels"},
	typeTenantSandbox: {"tenant_id", "session_id", "extra_labels", "template_spec"},
}

// document is what the check evaluates for one resource.
type document struct {
	in policy.Input
	// part is true when only part of the resource could be checked (a
	// tenant sandbox whose template spec is unknown: its tenant part).
	part bool
	// deferred lists what is unknown until apply; with no document at all
	// (in.Kind == "") the whole resource is checked at apply.
	deferred []string
	// refusal is a refusal that comes before any document: a DSN or a spec
	// that does not parse (the provider refuses these at plan too).
	refusal *model.Error
}

// build returns the resource's document. A value of the wrong type is an
// input error: Terraform never writes one, so the file was edited or
// damaged.
func (r *planResource) build() (document, error) {
	var doc document
	doc.deferred = r.unknownOf(documentAttributes[r.Type]...)
	v := values{addr: r.Address, m: r.values}
	if len(doc.deferred) > 0 && r.defaultUnknown && r.Type != typeTenantSandbox && (r.unknown["backend"] || v.m["backend"] == nil) {
		// Most likely the cause: the provider waits for its default.
		doc.deferred = append([]string{"the provider's default_backend"}, doc.deferred...)
	}
	switch r.Type {
	case typeNetworkPolicy, typeResourceCaps:
		if len(doc.deferred) > 0 {
			return doc, nil
		}
		backend := v.str("backend")
		if backend == "" && r.defaultUnknown {
			doc.deferred = []string{"the provider's default_backend"}
			return doc, nil
		}
		var err error
		if r.Type == typeNetworkPolicy {
			// An empty egress stays empty, as in the provider, so that
			// SBX-NET-002 refuses it.
			doc.in, _, err = inputs.NetworkPolicy{Egress: v.str("egress"), Allow: v.strList("allow"), Backend: backend,
				EgressEmpty: v.m["egress"] == ""}.Build(r.defaultBackend)
		} else {
			cpu, cpuErr := v.cpu("cpu")
			caps := model.CapsRequest{CPU: cpu, MemoryMB: v.int("memory_mb"), DiskMB: v.int("disk_mb"), Pids: v.int("pids")}
			if v.err == nil && cpuErr != nil {
				doc.refusal = refusalOf(cpuErr, "resources.cpu")
				return doc, nil
			}
			doc.in, _, err = inputs.ResourceCaps{Caps: caps, Backend: backend}.Build(r.defaultBackend)
		}
		if v.err != nil {
			return doc, v.err
		}
		doc.refusal = refusalOf(err, "backend")
	case typeTemplate:
		if len(doc.deferred) > 0 {
			return doc, nil
		}
		t := inputs.Template{
			Name: v.str("name"), Backend: v.str("backend"), Image: v.str("image"), Runtime: v.str("runtime"),
			RequireIsolation: v.str("require_isolation"),
			TimeoutSeconds:   v.int("timeout_seconds"), LifetimeSeconds: v.int("lifetime_seconds"),
			Env: v.strMap("env"), Labels: v.strMap("labels"), SecretNames: v.strList("secret_names"),
		}
		if network := v.object("network"); network != nil {
			n := values{addr: r.Address + ".network", m: network}
			t.Egress, t.Allow, t.EgressEmpty = n.str("egress"), n.strList("allow"), network["egress"] == ""
			v.keep(n.err)
		}
		var cpuErr error
		if caps := v.object("resources"); caps != nil {
			c := values{addr: r.Address + ".resources", m: caps}
			var cpu *float64
			cpu, cpuErr = c.cpu("cpu")
			t.Caps = model.CapsRequest{CPU: cpu, MemoryMB: c.int("memory_mb"), DiskMB: c.int("disk_mb"), Pids: c.int("pids")}
			v.keep(c.err)
		}
		if v.err != nil {
			return doc, v.err
		}
		if cpuErr != nil {
			doc.refusal = refusalOf(cpuErr, "resources.cpu")
			return doc, nil
		}
		if t.Backend == "" && r.defaultUnknown {
			doc.deferred = []string{"the provider's default_backend"}
			return doc, nil
		}
		var err error
		_, doc.in, err = t.Build(r.defaultBackend)
		doc.refusal = refusalOf(err, "backend")
	case typeTenantSandbox:
		if len(r.unknownOf("tenant_id", "session_id", "extra_labels")) > 0 {
			return doc, nil
		}
		tenant := inputs.Tenant{TenantID: v.str("tenant_id"), SessionID: v.str("session_id"), ExtraLabels: v.strMap("extra_labels")}
		spec := v.str("template_spec")
		if v.err != nil {
			return doc, v.err
		}
		if r.unknown["template_spec"] || r.unknown["*"] {
			// As the data source does at plan: the tenant part now, the
			// rest once the template's spec is known.
			doc.in, doc.part = tenant.Part(), true
			return doc, nil
		}
		doc.deferred = nil
		template, err := model.ParseSpec([]byte(spec))
		if err != nil {
			doc.refusal = refusalOf(err, "template_spec")
			return doc, nil
		}
		_, doc.in, err = tenant.Sandbox(template)
		doc.refusal = refusalOf(err, "template_spec")
	}
	doc.in.Address = r.Address
	return doc, nil
}

func (r *planResource) unknownOf(attrs ...string) []string {
	if r.unknown["*"] {
		return []string{"every attribute"}
	}
	var out []string
	for _, a := range attrs {
		if r.unknown[a] {
			out = append(out, a)
		}
	}
	sort.Strings(out)
	return out
}

// refusalOf keeps a typed refusal; any other error becomes one so that
// nothing a builder returns is lost.
func refusalOf(err error, attribute string) *model.Error {
	if err == nil {
		return nil
	}
	var me *model.Error
	if !errors.As(err, &me) {
		me = &model.Error{Class: model.ConfigurationError, Message: err.Error()}
	}
	out := *me
	if out.Attribute == "" {
		out.Attribute = attribute
	}
	return &out
}

// values reads typed attribute values and keeps the first type error.
type values struct {
	addr string
	m    map[string]any
	err  error
}

func (v *values) keep(err error) {
	if v.err == nil && err != nil {
		v.err = err
	}
}

func (v *values) wrong(key, want string, got any) {
	what := describe(got)
	if n, ok := got.(json.Number); ok {
		what = "the number " + string(n)
		if len(n) > 40 {
			what = "a number of " + strconv.Itoa(len(n)) + " characters"
		}
	}
	v.keep(fmt.Errorf("%s: attribute %s holds %s, not %s", v.addr, key, what, want))
}

func (v *values) str(key string) string {
	switch x := v.m[key].(type) {
	case nil:
		return ""
	case string:
		return x
	default:
		v.wrong(key, "a string", x)
		return ""
	}
}

func (v *values) number(key string) *big.Float {
	switch x := v.m[key].(type) {
	case nil:
		return nil
	case json.Number:
		// At Terraform's precision, so that cpu reads as written.
		f, _, err := big.ParseFloat(string(x), 10, 512, big.ToNearestEven)
		if err != nil {
			v.wrong(key, "a number", x)
			return nil
		}
		return f
	default:
		v.wrong(key, "a number", x)
		return nil
	}
}

// int reads a whole number in int64's range: the schema's Int64 type lets
// Terraform write nothing else, so anything else is a damaged plan.
func (v *values) int(key string) *int64 {
	f := v.number(key)
	if f == nil {
		return nil
	}
	i, acc := f.Int64()
	if acc != big.Exact {
		v.wrong(key, "a whole number in the 64-bit range", v.m[key])
		return nil
	}
	return &i
}

// cpu reads a cpu as the provider does (inputs.CPU): a value a float64
// cannot hold as written is a refusal (SBX-RES-001), returned apart from
// type errors, which stay in v.err.
func (v *values) cpu(key string) (*float64, error) {
	f := v.number(key)
	if f == nil {
		return nil, nil
	}
	x, err := inputs.CPU(f, "resources."+key)
	if err != nil {
		return nil, err
	}
	return &x, nil
}

func (v *values) strList(key string) []string {
	switch x := v.m[key].(type) {
	case nil:
		return nil
	case []any:
		out := make([]string, len(x))
		for i, e := range x {
			s, ok := e.(string)
			if !ok {
				v.wrong(fmt.Sprintf("%s[%d]", key, i), "a string", e)
				return nil
			}
			out[i] = s
		}
		return out
	default:
		v.wrong(key, "a list of strings", x)
		return nil
	}
}

func (v *values) strMap(key string) map[string]string {
	switch x := v.m[key].(type) {
	case nil:
		return map[string]string{}
	case map[string]any:
		out := make(map[string]string, len(x))
		for k, e := range x {
			s, ok := e.(string)
			if !ok {
				v.wrong(fmt.Sprintf("%s[%q]", key, k), "a string", e)
				return nil
			}
			out[k] = s
		}
		return out
	default:
		v.wrong(key, "a map of strings", x)
		return nil
	}
}

func (v *values) object(key string) map[string]any {
	switch x := v.m[key].(type) {
	case nil:
		return nil
	case map[string]any:
		return x
	default:
		v.wrong(key, "an object", x)
		return nil
	}
}
