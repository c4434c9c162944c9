package policycheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// planResource is one sandboxio resource of the plan as it will be after
// apply, with the attributes Terraform does not know yet.
type planResource struct {
	Address string
	Mode    string // managed or data
	Type    string
	Action  string // create, update, replace, read, no-op
	values  map[string]any
	unknown map[string]bool // top-level attributes unknown until apply
	// The provider's default_backend for this resource; defaultUnknown when
	// the plan does not hold its value (a reference the check cannot follow).
	defaultBackend string
	defaultUnknown bool
}

// Resource types the check builds documents for.
const (
	typeNetworkPolicy = "sandboxio_network_policy"
	typeResourceCaps  = "sandboxio_resource_caps"
	typeTemplate      = "sandboxio_template"
	typeTenantSandbox = "sandboxio_tenant_sandbox"
)

func checkedType(mode, typ string) bool {
	switch typ {
	case typeNetworkPolicy, typeResourceCaps, typeTemplate:
		return mode == "managed"
	case typeTenantSandbox:
		return mode == "data"
	}
	return false
}

// ours reports whether a provider name is sandboxio's, from any registry
// or mirror: registry.terraform.io/sandboxio/sandboxio.
func ours(providerName string) bool {
	return providerName == "" || strings.HasSuffix(providerName, "/sandboxio") || providerName == "sandboxio"
}

// resources lists the plan's sandboxio resources, sorted by address. A
// resource with a change is read from resource_changes (which also says
// what is unknown); the others, such as a data source read during plan,
// from planned_values. Resources about to be deleted are skipped.
func (p *plan) resources(file string) ([]*planResource, error) {
	defaults := p.defaultBackends()
	var out []*planResource
	seen := map[string]bool{}
	for i := range p.ResourceChanges {
		rc := &p.ResourceChanges[i]
		seen[rc.Address] = true
		if !checkedType(rc.Mode, rc.Type) || !ours(rc.ProviderName) {
			continue
		}
		action, keep := actionOf(rc.Change.Actions)
		if !keep {
			continue
		}
		r := &planResource{Address: rc.Address, Mode: rc.Mode, Type: rc.Type, Action: action}
		var err error
		if r.values, err = decodeObject(rc.Change.After); err != nil {
			return nil, &InputError{File: file, Msg: fmt.Sprintf("%s: change.after: %v", rc.Address, err)}
		}
		if r.unknown, err = unknownAttributes(rc.Change.AfterUnknown); err != nil {
			return nil, &InputError{File: file, Msg: fmt.Sprintf("%s: change.after_unknown: %v", rc.Address, err)}
		}
		r.defaultBackend, r.defaultUnknown = defaults.lookup(rc.ModuleAddress, rc.Mode, rc.Type, rc.Name)
		out = append(out, r)
	}
	if p.PlannedValues != nil && p.PlannedValues.RootModule != nil {
		var walk func(m *module, depth int) error
		walk = func(m *module, depth int) error {
			if depth > 100 {
				return &InputError{File: file, Msg: "planned_values: modules nested more than 100 deep"}
			}
			for i := range m.Resources {
				res := &m.Resources[i]
				if seen[res.Address] || !checkedType(res.Mode, res.Type) || !ours(res.ProviderName) {
					continue
				}
				seen[res.Address] = true
				r := &planResource{Address: res.Address, Mode: res.Mode, Type: res.Type, Action: "no-op", unknown: map[string]bool{}}
				if res.Mode == "data" {
					r.Action = "read"
				}
				var err error
				if r.values, err = decodeObject(res.Values); err != nil {
					return &InputError{File: file, Msg: fmt.Sprintf("%s: values: %v", res.Address, err)}
				}
				r.defaultBackend, r.defaultUnknown = defaults.lookup(m.Address, res.Mode, res.Type, res.Name)
				out = append(out, r)
			}
			for i := range m.ChildModules {
				if err := walk(&m.ChildModules[i], depth+1); err != nil {
					return err
				}
			}
			return nil
		}
		if err := walk(p.PlannedValues.RootModule, 0); err != nil {
			return nil, err
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Address < out[j].Address })
	return out, nil
}

// actionOf names a change's actions; keep is false for a resource that will
// not exist after apply.
func actionOf(actions []string) (name string, keep bool) {
	switch strings.Join(actions, ",") {
	case "create":
		return "create", true
	case "update":
		return "update", true
	case "delete,create", "create,delete":
		return "replace", true
	case "read":
		return "read", true
	case "no-op", "":
		return "no-op", true
	case "delete", "forget":
		return "", false
	}
	return strings.Join(actions, "+"), true
}

// decodeObject decodes resource values with exact numbers; null gives an
// empty object.
func decodeObject(raw json.RawMessage) (map[string]any, error) {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("want an object of attribute values: %w", err)
	}
	return m, nil
}

// unknownAttributes reads after_unknown: true at an attribute, or anywhere
// inside it, means its value is only known at apply.
func unknownAttributes(raw json.RawMessage) (map[string]bool, error) {
	out := map[string]bool{}
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) || bytes.Equal(raw, []byte("false")) {
		return out, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	switch x := v.(type) {
	case bool:
		// The whole object is unknown.
		out["*"] = x
	case map[string]any:
		for k, sub := range x {
			if containsTrue(sub, 0) {
				out[k] = true
			}
		}
	default:
		return nil, fmt.Errorf("want an object or a boolean, got %s", describe(v))
	}
	return out, nil
}

func containsTrue(v any, depth int) bool {
	if depth > 64 {
		return true // absurdly deep: treat as unknown rather than trust it
	}
	switch x := v.(type) {
	case bool:
		return x
	case map[string]any:
		for _, s := range x {
			if containsTrue(s, depth+1) {
				return true
			}
		}
	case []any:
		for _, s := range x {
			if containsTrue(s, depth+1) {
				return true
			}
		}
	}
	return false
}

// providerDefaults resolves each resource's provider configuration to its
// default_backend.
type providerDefaults struct {
	keys      map[string]string // "module.a.module.b." + config address -> provider_config_key
	providers map[string]providerConfig
	variables map[string]variable
}

func (p *plan) defaultBackends() *providerDefaults {
	d := &providerDefaults{keys: map[string]string{}, variables: p.Variables}
	if p.Configuration == nil {
		return d
	}
	d.providers = p.Configuration.ProviderConfig
	var walk func(prefix string, m *configModule, depth int)
	walk = func(prefix string, m *configModule, depth int) {
		if m == nil || depth > 100 {
			return
		}
		for _, r := range m.Resources {
			d.keys[prefix+r.Address] = r.ProviderConfigKey
		}
		for name, call := range m.ModuleCalls {
			walk(prefix+"module."+name+".", call.Module, depth+1)
		}
	}
	walk("", p.Configuration.RootModule, 0)
	return d
}

// lookup returns the default_backend of the provider configuration a
// resource uses, and whether it is unknown to the check.
func (d *providerDefaults) lookup(moduleAddress, mode, typ, name string) (string, bool) {
	addr := typ + "." + name
	if mode == "data" {
		addr = "data." + addr
	}
	prefix := ""
	if moduleAddress != "" {
		prefix = stripInstanceKeys(moduleAddress) + "."
	}
	key, ok := d.keys[prefix+addr]
	if !ok {
		key = "sandboxio"
	}
	pc, ok := d.providers[key]
	if !ok {
		return "", false // no provider block: no default
	}
	expr, ok := pc.Expressions["default_backend"]
	if !ok {
		return "", false
	}
	if len(expr.ConstantValue) > 0 {
		var s *string
		if err := json.Unmarshal(expr.ConstantValue, &s); err != nil {
			return "", true
		}
		if s == nil {
			return "", false
		}
		return *s, false
	}
	// A root-module variable is in the plan; anything else is known only
	// to Terraform at apply.
	if len(expr.References) > 0 && !strings.Contains(key, ":") {
		ref := expr.References[0]
		if v, ok := strings.CutPrefix(ref, "var."); ok && !strings.ContainsAny(v, ".[") {
			if vv, ok := d.variables[v]; ok {
				var s *string
				if err := json.Unmarshal(vv.Value, &s); err == nil {
					if s == nil {
						return "", false
					}
					return *s, false
				}
			}
		}
	}
	return "", true
}

// stripInstanceKeys turns a module instance address (module.a["x"].module.b[0])
// into its configuration path (module.a.module.b).
func stripInstanceKeys(addr string) string {
	var b strings.Builder
	forEachOutsideKeys(addr, func(_ int, r rune) { b.WriteRune(r) })
	return b.String()
}

// forEachOutsideKeys calls visit for every rune of an address that lies
// outside its instance keys ([0], ["a.b"]), brackets excluded. Quoted keys
// may hold dots, brackets and escaped quotes.
func forEachOutsideKeys(addr string, visit func(i int, r rune)) {
	depth, inString, escaped := 0, false, false
	for i, r := range addr {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case r == '\\':
				escaped = true
			case r == '"':
				inString = false
			}
		case r == '"' && depth > 0:
			inString = true
		case r == '[':
			depth++
		case r == ']':
			if depth > 0 {
				depth--
			}
		case depth == 0:
			visit(i, r)
		}
	}
}

func describe(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case json.Number, float64:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// providerPolicy returns the root sandboxio provider's policy_paths and
// policy_waivers where the plan holds them as constants.
func (p *plan) providerPolicy() (paths []string, waivers string) {
	if p.Configuration == nil {
		return nil, ""
	}
	pc, ok := p.Configuration.ProviderConfig["sandboxio"]
	if !ok {
		return nil, ""
	}
	if e, ok := pc.Expressions["policy_paths"]; ok && len(e.ConstantValue) > 0 {
		_ = json.Unmarshal(e.ConstantValue, &paths)
	}
	if e, ok := pc.Expressions["policy_waivers"]; ok && len(e.ConstantValue) > 0 {
		_ = json.Unmarshal(e.ConstantValue, &waivers)
	}
	return paths, waivers
}
