package policycheck

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	tfjson "github.com/hashicorp/terraform-json"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
)

// planResource is one sandboxio resource of the plan as it will be after
// apply, with the attributes Terraform does not know yet.
type planResource struct {
	Address string
	Mode    tfjson.ResourceMode
	Type    string
	Action  string // create, update, replace, read, no-op, delete, ...
	// skip says why the check does not decide on the resource; it is then
	// reported as not checked, with this reason.
	skip string
	// later marks a skipped resource that will exist after apply and is
	// decided only by a later plan (deferred by Terraform, or left out of a
	// -target plan): --fail-on-deferred fails on it as on an apply-time check.
	later bool
	// after is the resource's values, a JSON object (planValue decodes it).
	after string
	// afterUnknown is the change's after_unknown as readMask reads it:
	// which values, at any depth, are unknown until apply.
	afterUnknown any
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
	typeBackend       = "sandboxio_backend"
)

// The provider's managed resource types and data sources. Terraform
// compares type names exactly: they are case-sensitive identifiers matched
// against the provider's schema, so "SandboxIO_template" is not
// sandboxio_template.
var (
	managedTypes = map[string]bool{typeNetworkPolicy: true, typeResourceCaps: true, typeTemplate: true}
	dataTypes    = map[string]bool{typeTenantSandbox: true, typeBackend: true}
)

func checkedType(mode tfjson.ResourceMode, typ string) bool {
	switch typ {
	case typeNetworkPolicy, typeResourceCaps, typeTemplate:
		return mode == tfjson.ManagedResourceMode
	case typeTenantSandbox:
		return mode == tfjson.DataResourceMode
	}
	return false
}

// sandboxioResource reports whether a resource belongs, or claims to
// belong, to the sandboxio provider: the provider it is bound to is
// sandboxio's, from any registry, mirror or alias (the provider address's
// type is sandboxio; Terraform normalizes provider types to lower case),
// or its type's prefix, which Terraform takes as the provider's local name
// when no provider is given, is sandboxio in any case. Any such resource
// the check does not decide on is reported, never dropped.
func sandboxioResource(typ, providerName string) bool {
	prefix, _, _ := strings.Cut(typ, "_")
	if strings.EqualFold(prefix, "sandboxio") {
		return true
	}
	i := strings.LastIndexByte(providerName, '/')
	return strings.EqualFold(providerName[i+1:], "sandboxio")
}

// skipReason says why the check does not decide on a sandboxio resource of
// this mode and type, or returns "" when it does.
func skipReason(mode tfjson.ResourceMode, typ string) string {
	if checkedType(mode, typ) {
		return ""
	}
	switch {
	case mode == tfjson.DataResourceMode && typ == typeBackend:
		return "no rule applies to data.sandboxio_backend: it reports a backend's capabilities and creates nothing"
	case mode == tfjson.DataResourceMode && managedTypes[typ]:
		return fmt.Sprintf("sandboxio has no data source %s (%s is a managed resource); a provider of another version may", typ, typ)
	case mode == tfjson.ManagedResourceMode && dataTypes[typ]:
		return fmt.Sprintf("sandboxio has no managed resource %s (it is a data source); a provider of another version may", typ)
	case mode != tfjson.ManagedResourceMode && mode != tfjson.DataResourceMode:
		return fmt.Sprintf("the resource mode %q is neither managed nor data", mode)
	}
	for _, known := range []string{typeNetworkPolicy, typeResourceCaps, typeTemplate, typeTenantSandbox, typeBackend} {
		if strings.EqualFold(typ, known) {
			return fmt.Sprintf("resource types are case-sensitive in Terraform: %s is not %s, and this build has no rules for it", typ, known)
		}
	}
	return fmt.Sprintf("this build of sandboxio has no rules for %s (a newer provider?); check the plan with the CLI of the provider's version", typ)
}

// resources lists the plan's sandboxio resources, sorted by address. A
// resource with a change is read from resource_changes (which also says
// what is unknown); the others from planned_values, and the data sources
// Terraform read while planning from prior_state. Resources the check does
// not decide on (deleted, deferred to a later plan, of a type without
// rules) are listed too, with the reason.
func (p *plan) resources(file string) ([]*planResource, error) {
	l := &resourceLister{file: file, defaults: p.defaultBackends(), seen: map[string]bool{}}
	if err := l.changes(p.ResourceChanges); err != nil {
		return nil, err
	}
	l.deferred(p.DeferredChanges)
	if p.PlannedValues != nil {
		if err := l.walk("planned_values", p.PlannedValues.RootModule, func(res *resource) string {
			if res.Mode == tfjson.DataResourceMode {
				return "read"
			}
			return "no-op"
		}); err != nil {
			return nil, err
		}
	}
	if p.PriorState != nil && p.PriorState.Values != nil {
		// Data sources read during plan. A managed resource here without a
		// change was left out of the plan (-target): reported, not checked.
		if err := l.walk("prior_state", p.PriorState.Values.RootModule, func(res *resource) string {
			if res.Mode == tfjson.DataResourceMode {
				return "read"
			}
			return "not planned"
		}); err != nil {
			return nil, err
		}
		for _, r := range l.out {
			if r.Action == "not planned" && r.skip == "" {
				r.skip = "it is in the prior state but the plan has no change for it (a -target plan?); the plan does not say what it will be"
				r.later = true
			}
		}
	}
	sort.SliceStable(l.out, func(i, j int) bool { return l.out[i].Address < l.out[j].Address })
	return l.out, nil
}

// resourceLister collects the resources of one plan, each address once.
type resourceLister struct {
	file     string
	defaults *providerDefaults
	seen     map[string]bool
	out      []*planResource
}

// changes lists the resources with a change in resource_changes.
func (l *resourceLister) changes(changes []resourceChange) error {
	for i := range changes {
		rc := &changes[i]
		l.seen[rc.Address] = true
		if !sandboxioResource(rc.Type, rc.ProviderName) {
			continue
		}
		action, keep := actionOf(rc.Change.Actions)
		r := &planResource{Address: rc.Address, Mode: rc.Mode, Type: rc.Type, Action: action, skip: skipReason(rc.Mode, rc.Type)}
		switch {
		case !keep && rc.DeposedKey != "":
			r.skip = fmt.Sprintf("a deposed object (%s) being deleted (%s): nothing of it remains after apply", rc.DeposedKey, action)
		case !keep:
			r.skip = fmt.Sprintf("it is being deleted (%s): nothing of it remains after apply", action)
		}
		if r.skip != "" {
			l.out = append(l.out, r)
			continue
		}
		if t := strings.TrimSpace(string(rc.Change.After)); t == "" || t == "null" {
			// A resource that will exist has values: read as {}, every
			// attribute would take its default and pass as a made-up config.
			return &InputError{File: l.file, Msg: fmt.Sprintf("%s: change.after is missing for a %s: the plan does not say what the resource will be", rc.Address, action)}
		}
		var err error
		if r.after, err = objectText(rc.Change.After); err != nil {
			return &InputError{File: l.file, Msg: fmt.Sprintf("%s: change.after: %v", rc.Address, err)}
		}
		if r.afterUnknown, err = readMask(rc.Change.AfterUnknown); err != nil {
			return &InputError{File: l.file, Msg: fmt.Sprintf("%s: change.after_unknown: %v", rc.Address, err)}
		}
		r.defaultBackend, r.defaultUnknown = l.defaults.lookup(rc.ModuleAddress, rc.Mode, rc.Type, rc.Name)
		l.out = append(l.out, r)
	}
	return nil
}

// deferred lists the resources Terraform deferred to a later plan, which
// the check does not decide on.
func (l *resourceLister) deferred(changes []deferredChange) {
	for _, dc := range changes {
		rc := dc.ResourceChange
		if !sandboxioResource(rc.Type, rc.ProviderName) {
			continue
		}
		action := "unknown"
		if rc.Change != nil {
			action, _ = actionOf(rc.Change.Actions)
		}
		reason := dc.Reason
		if reason == "" {
			reason = "no reason given"
		}
		l.seen[rc.Address] = true
		l.out = append(l.out, &planResource{Address: rc.Address, Mode: rc.Mode, Type: rc.Type, Action: action, later: true,
			skip: fmt.Sprintf("Terraform deferred it to a later plan (%s): run terraform plan again after this apply and check that plan", reason)})
	}
}

// walk lists the resources of a module tree that no change listed.
func (l *resourceLister) walk(section string, root *module, action func(res *resource) string) error {
	if root == nil {
		return nil
	}
	return l.visit(section, root, 0, action)
}

func (l *resourceLister) visit(section string, m *module, depth int, action func(res *resource) string) error {
	if depth > 100 {
		return &InputError{File: l.file, Msg: section + ": modules nested more than 100 deep"}
	}
	for i := range m.Resources {
		res := &m.Resources[i]
		if l.seen[res.Address] || !sandboxioResource(res.Type, res.ProviderName) {
			continue
		}
		l.seen[res.Address] = true
		r := &planResource{Address: res.Address, Mode: res.Mode, Type: res.Type, Action: action(res),
			skip: skipReason(res.Mode, res.Type)}
		if r.skip == "" {
			var err error
			if r.after, err = objectText(res.Values); err != nil {
				return &InputError{File: l.file, Msg: fmt.Sprintf("%s: %s: values: %v", section, res.Address, err)}
			}
			r.defaultBackend, r.defaultUnknown = l.defaults.lookup(m.Address, res.Mode, res.Type, res.Name)
		}
		l.out = append(l.out, r)
	}
	for i := range m.ChildModules {
		if err := l.visit(section, &m.ChildModules[i], depth+1, action); err != nil {
			return err
		}
	}
	return nil
}

// actionOf names a change's actions; keep is false for a resource that will
// not exist after apply.
func actionOf(actions tfjson.Actions) (name string, keep bool) {
	switch {
	case actions.Create():
		return "create", true
	case actions.Update():
		return "update", true
	case actions.Replace():
		return "replace", true
	case actions.Read():
		return "read", true
	case actions.NoOp(), len(actions) == 0, len(actions) == 1 && actions[0] == "":
		return "no-op", true
	case actions.Delete(), actions.Forget():
		return "", false
	}
	names := make([]string, len(actions))
	for i, a := range actions {
		names[i] = string(a)
	}
	return strings.Join(names, "+"), true
}

// objectText returns resource values, which encoding/json has checked,
// as text for planValue; null gives an empty object.
func objectText(raw jsonText) (string, error) {
	text := strings.TrimSpace(string(raw))
	switch {
	case text == "" || text == "null":
		return "{}", nil
	case text[0] != '{':
		return "", fmt.Errorf("want an object of attribute values, got %s", jsonWhat(text[0]))
	}
	return text, nil
}

// jsonWhat names the kind of JSON value that starts with c.
func jsonWhat(c byte) string {
	switch c {
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case '[':
		return "a list"
	case '{':
		return "an object"
	case 'n':
		return "null"
	}
	return "a number"
}

// unknownAt reports whether the attribute's value, or anything inside
// it, is unknown until apply.
func (r *planResource) unknownAt(attr string) bool {
	if r.wholeUnknown() {
		return true
	}
	m, _ := r.afterUnknown.(map[string]any)
	return containsTrue(m[attr])
}

// wholeUnknown reports whether the whole value is unknown until apply.
func (r *planResource) wholeUnknown() bool {
	u, _ := r.afterUnknown.(bool)
	return u
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
// resource uses, and whether it is unknown to the check. A provider that
// sets none (or no provider block) defaults to backends.DefaultDSN, as the
// provider itself does.
func (d *providerDefaults) lookup(moduleAddress string, mode tfjson.ResourceMode, typ, name string) (string, bool) {
	dsn, unknown := d.configured(moduleAddress, mode, typ, name)
	if dsn == "" && !unknown {
		return backends.DefaultDSN, false
	}
	return dsn, unknown
}

// configured returns the default_backend the provider configuration sets,
// "" when it sets none.
func (d *providerDefaults) configured(moduleAddress string, mode tfjson.ResourceMode, typ, name string) (string, bool) {
	addr := typ + "." + name
	if mode == tfjson.DataResourceMode {
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
