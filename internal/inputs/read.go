package inputs

import (
	"fmt"
	"maps"
	"math/big"
	"sort"

	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// One reader for a resource's attributes. The provider hands it the
// configuration Terraform sends (a tftypes.Value); `sandboxio policy check`
// decodes a plan's after and after_unknown into a value of the same type
// (TemplateType, NetworkPolicyType, ResourceCapsType, which
// TestSchemaTypes holds to the provider's schemas). Both then read it
// here: the same attributes, the same unknowns, the same number checks,
// so both decide alike.

var (
	networkType = tftypes.Object{AttributeTypes: map[string]tftypes.Type{
		"egress": tftypes.String, "allow": tftypes.List{ElementType: tftypes.String},
	}}
	volumeType = tftypes.Object{AttributeTypes: map[string]tftypes.Type{
		"name": tftypes.String, "mount_path": tftypes.String,
	}}
	warmPoolType = tftypes.Object{AttributeTypes: map[string]tftypes.Type{
		"size": tftypes.Number, "max_idle_seconds": tftypes.Number,
	}}
	brokeredType = tftypes.Map{ElementType: tftypes.Object{AttributeTypes: map[string]tftypes.Type{
		"hosts": tftypes.List{ElementType: tftypes.String}, "header": tftypes.String, "format": tftypes.String,
	}}}
	capsType = tftypes.Object{AttributeTypes: map[string]tftypes.Type{
		"cpu": tftypes.Number, "memory_mb": tftypes.Number, "disk_mb": tftypes.Number, "pids": tftypes.Number,
	}}

	// TemplateType is sandboxio_template's value type.
	TemplateType = tftypes.Object{AttributeTypes: map[string]tftypes.Type{
		"id": tftypes.String, "name": tftypes.String, "backend": tftypes.String, "image": tftypes.String,
		"runtime": tftypes.String, "require_isolation": tftypes.String, "network": networkType, "resources": capsType,
		"timeout_seconds": tftypes.Number, "lifetime_seconds": tftypes.Number,
		"env": tftypes.Map{ElementType: tftypes.String}, "secret_names": tftypes.List{ElementType: tftypes.String},
		"labels": tftypes.Map{ElementType: tftypes.String}, "isolation_tier": tftypes.String, "spec": tftypes.String,
		"spec_sha256": tftypes.String, "image_id": tftypes.String, "disk_cap_strategy": tftypes.String,
		"pids_cap_strategy": tftypes.String, "volume": volumeType, "warm_pool": warmPoolType,
		"brokered_secrets": brokeredType,
	}}
	// NetworkPolicyType is sandboxio_network_policy's value type.
	NetworkPolicyType = tftypes.Object{AttributeTypes: map[string]tftypes.Type{
		"id": tftypes.String, "egress": tftypes.String, "allow": tftypes.List{ElementType: tftypes.String},
		"backend": tftypes.String, "policy": networkType,
	}}
	// ResourceCapsType is sandboxio_resource_caps's value type.
	ResourceCapsType = tftypes.Object{AttributeTypes: map[string]tftypes.Type{
		"id": tftypes.String, "cpu": tftypes.Number, "memory_mb": tftypes.Number, "disk_mb": tftypes.Number,
		"pids": tftypes.Number, "backend": tftypes.String, "caps": capsType,
	}}
)

// The configured attributes each document is built from; computed ones
// (spec, id, ...) are not read.
var (
	templateAttributes = []string{"name", "backend", "image", "runtime", "require_isolation", "network", "resources",
		"timeout_seconds", "lifetime_seconds", "env", "secret_names", "brokered_secrets", "labels", "volume", "warm_pool"}
	networkPolicyAttributes = []string{"egress", "allow", "backend"}
	resourceCapsAttributes  = []string{"cpu", "memory_mb", "disk_mb", "pids", "backend"}
)

// The parts of those types the readers read: all a value needs to hold for
// its reader (a plan's other attributes need not be decoded).
var (
	TemplateReadType      = subset(TemplateType, templateAttributes)
	NetworkPolicyReadType = subset(NetworkPolicyType, networkPolicyAttributes)
	ResourceCapsReadType  = subset(ResourceCapsType, resourceCapsAttributes)
)

func subset(t tftypes.Object, names []string) tftypes.Object {
	out := tftypes.Object{AttributeTypes: make(map[string]tftypes.Type, len(names))}
	for _, n := range names {
		out.AttributeTypes[n] = t.AttributeTypes[n]
	}
	return out
}

// Read is a resource's configuration as read from its Terraform value.
type Read[T any] struct {
	Config T
	// Backend is the configured backend, also while other values are
	// unknown; "" when unset or unknown.
	Backend string
	// BackendSet says the backend attribute holds a value (is not null).
	BackendSet bool
	// Unknown names, sorted, the attributes unknown at plan that a
	// decision depends on: the check waits for apply. Config is then
	// empty but for the backend, when that is known.
	Unknown []string
	// Placeholders names, sorted, the attributes unknown at plan that no
	// rule of the bundle decides on (DecisionFree): Config holds
	// placeholders for them, so that the plan can still decide.
	Placeholders []string
}

// Known reports whether the check can decide now.
func (r Read[T]) Known() bool { return len(r.Unknown) == 0 }

// WholeUnknown is what Unknown holds when the whole value is unknown.
const WholeUnknown = "the whole configuration"

// DecisionFree are the template attributes no rule of the bundle decides on,
// and the placeholder each takes while unknown at plan. env and labels are
// decision-free only in their values, once the map (hence its keys) is known:
// rules decide on the keys, and SBX-SEC-002's warning on a credential-shaped
// value comes at apply. TestDecisionFree_PlaceholdersDecideAsRealValues holds
// the bundle to this; team rules may read them (PlaceholderPaths).
var DecisionFree = map[string]string{"image": "", "env": "", "labels": ""}

// placeholderPaths are the input paths of the decision-free attributes.
var placeholderPaths = map[string][]string{
	"image":  {"template", "image"},
	"env":    {"template", "env"},
	"labels": {"template", "labels"},
}

// PlaceholderPaths returns the input paths of the named decision-free
// attributes, for policy.Engine.TeamReads.
func PlaceholderPaths(names []string) [][]string {
	out := make([][]string, 0, len(names))
	for _, n := range names {
		out = append(out, placeholderPaths[n])
	}
	return out
}

// ReadTemplate reads a sandboxio_template. Unknown values no decision
// depends on are replaced by placeholders; any other unknown value leaves
// the check to apply. A number out of its type's range is refused with a
// *model.Error (ConfigurationError).
func ReadTemplate(v tftypes.Value) (Read[Template], error) {
	var r Read[Template]
	attrs, unknown, err := readAttributes(v, templateAttributes, false)
	if err != nil || len(unknown) > 0 {
		r.Unknown = unknown
		return r, err
	}
	// the backend, when known, says whether the provider default is
	// awaited too
	r.Backend, _ = String(attrs["backend"])
	own := false // attrs is still v's own map: read only
	for _, name := range templateAttributes {
		a := attrs[name]
		if a.IsFullyKnown() {
			continue
		}
		placeholder, free := DecisionFree[name]
		if free && !own && (name == "image" || a.IsKnown()) {
			attrs, own = maps.Clone(attrs), true
		}
		switch {
		case free && name == "image":
			attrs[name] = tftypes.NewValue(tftypes.String, placeholder)
		case free && a.IsKnown():
			// a map of strings whose keys are known: only values are not
			if attrs[name], err = withPlaceholders(a, placeholder); err != nil {
				return r, err
			}
		default:
			r.Unknown = append(r.Unknown, unknownAttributes(name, a)...)
			continue
		}
		r.Placeholders = append(r.Placeholders, name)
	}
	if len(r.Unknown) > 0 {
		sort.Strings(r.Unknown)
		r.Placeholders = nil
		return r, nil
	}
	sort.Strings(r.Placeholders)
	r.BackendSet = !attrs["backend"].IsNull()
	r.Config, err = readTemplateAttrs(attrs)
	return r, err
}

// readTemplateAttrs reads the attributes of a configuration with no
// unknown value left.
func readTemplateAttrs(attrs map[string]tftypes.Value) (c Template, err error) {
	for _, f := range [...]struct {
		name string
		dst  *string
	}{
		{"name", &c.Name}, {"backend", &c.Backend}, {"image", &c.Image}, {"runtime", &c.Runtime},
		{"require_isolation", &c.RequireIsolation},
	} {
		if err = stringTo(attrs[f.name], f.dst); err != nil {
			return c, err
		}
	}
	if network, err := object(attrs["network"]); err != nil {
		return c, err
	} else if network != nil {
		if c.Egress, c.EgressEmpty, err = readEgress(network["egress"]); err != nil {
			return c, err
		}
		if c.Allow, err = stringList(network["allow"]); err != nil {
			return c, err
		}
	}
	if caps, err := object(attrs["resources"]); err != nil {
		return c, err
	} else if caps != nil {
		if c.Caps, err = readCaps(caps); err != nil {
			return c, err
		}
	}
	if c.TimeoutSeconds, err = int64Of(attrs["timeout_seconds"], "timeout_seconds"); err != nil {
		return c, err
	}
	if c.LifetimeSeconds, err = int64Of(attrs["lifetime_seconds"], "lifetime_seconds"); err != nil {
		return c, err
	}
	if c.Env, err = StringMap(attrs["env"]); err != nil {
		return c, err
	}
	if c.Labels, err = StringMap(attrs["labels"]); err != nil {
		return c, err
	}
	if c.SecretNames, err = stringList(attrs["secret_names"]); err != nil {
		return c, err
	}
	if c.SecretNames == nil {
		c.SecretNames = []string{}
	}
	if c.BrokeredSecrets, err = readBrokered(attrs["brokered_secrets"]); err != nil {
		return c, err
	}
	if c.Volume, err = readVolume(attrs["volume"]); err != nil {
		return c, err
	}
	c.WarmPool, err = readWarmPool(attrs["warm_pool"])
	return c, err
}

// readBrokered reads the brokered_secrets map; nil when it is not set. A
// missing header reads as "", which the policy refuses, and a missing
// format as "", which normalises to model.DefaultBrokeredFormat.
func readBrokered(v tftypes.Value) (map[string]model.BrokeredSecret, error) {
	if v.IsNull() {
		return nil, nil
	}
	var elems map[string]tftypes.Value
	if err := v.As(&elems); err != nil {
		return nil, fmt.Errorf("read map: %w", err)
	}
	out := make(map[string]model.BrokeredSecret, len(elems))
	for name, e := range elems {
		attrs, err := object(e)
		if err != nil {
			return nil, err
		}
		var b model.BrokeredSecret
		if b.Hosts, err = stringList(attrs["hosts"]); err != nil {
			return nil, err
		}
		if err := stringTo(attrs["header"], &b.Header); err != nil {
			return nil, err
		}
		if err := stringTo(attrs["format"], &b.Format); err != nil {
			return nil, err
		}
		out[name] = b
	}
	return out, nil
}

// readWarmPool reads the warm_pool attribute; nil when it is not set. A
// missing size reads as 0, which the policy refuses; a missing
// max_idle_seconds is model.DefaultPoolIdleSeconds.
func readWarmPool(v tftypes.Value) (*model.WarmPool, error) {
	attrs, err := object(v)
	if err != nil || attrs == nil {
		return nil, err
	}
	p := model.WarmPool{MaxIdleSeconds: model.DefaultPoolIdleSeconds}
	size, err := int64Of(attrs["size"], "warm_pool.size")
	if err != nil {
		return nil, err
	}
	if size != nil {
		p.Size = *size
	}
	idle, err := int64Of(attrs["max_idle_seconds"], "warm_pool.max_idle_seconds")
	if err != nil {
		return nil, err
	}
	if idle != nil {
		p.MaxIdleSeconds = *idle
	}
	return &p, nil
}

// readVolume reads the volume block; nil when it is not set. A missing name
// or mount path reads as "", which the policy refuses.
func readVolume(v tftypes.Value) (*model.Volume, error) {
	attrs, err := object(v)
	if err != nil || attrs == nil {
		return nil, err
	}
	var vol model.Volume
	if err := stringTo(attrs["name"], &vol.Name); err != nil {
		return nil, err
	}
	if err := stringTo(attrs["mount_path"], &vol.MountPath); err != nil {
		return nil, err
	}
	return &vol, nil
}

// ReadNetworkPolicy reads a sandboxio_network_policy. Any unknown value
// leaves the check to apply.
func ReadNetworkPolicy(v tftypes.Value) (Read[NetworkPolicy], error) {
	return readAll(v, networkPolicyAttributes, func(c *NetworkPolicy, attrs map[string]tftypes.Value) (err error) {
		if c.Egress, c.EgressEmpty, err = readEgress(attrs["egress"]); err != nil {
			return err
		}
		c.Allow, err = stringList(attrs["allow"])
		return err
	}, func(c *NetworkPolicy, backend string) { c.Backend = backend })
}

// ReadResourceCaps reads a sandboxio_resource_caps. Any unknown value
// leaves the check to apply.
func ReadResourceCaps(v tftypes.Value) (Read[ResourceCaps], error) {
	return readAll(v, resourceCapsAttributes, func(c *ResourceCaps, attrs map[string]tftypes.Value) (err error) {
		c.Caps, err = readCaps(attrs)
		return err
	}, func(c *ResourceCaps, backend string) { c.Backend = backend })
}

// readAll reads a resource with no decision-free attribute: its backend,
// then, once every value is known, the rest.
func readAll[T any](v tftypes.Value, names []string, read func(*T, map[string]tftypes.Value) error,
	setBackend func(*T, string)) (Read[T], error) {
	var r Read[T]
	attrs, unknown, err := readAttributes(v, names, true)
	if err == nil && attrs != nil {
		r.Backend, err = String(attrs["backend"])
		setBackend(&r.Config, r.Backend)
		r.BackendSet = attrs["backend"].IsKnown() && !attrs["backend"].IsNull()
	}
	if r.Unknown = unknown; err != nil || len(unknown) > 0 {
		return r, err
	}
	return r, read(&r.Config, attrs)
}

// readAttributes returns the attributes of an object value, which has
// the named ones (and may have others): v's own map, read only. Where v is
// wholly unknown, unknown is WholeUnknown; with listUnknown, it names the
// named attributes not fully known.
func readAttributes(v tftypes.Value, names []string, listUnknown bool) (attrs map[string]tftypes.Value, unknown []string, err error) {
	if !v.IsKnown() {
		return nil, []string{WholeUnknown}, nil
	}
	if err := v.As(&attrs); err != nil {
		return nil, nil, fmt.Errorf("read object: %w", err)
	}
	for _, n := range names {
		a, ok := attrs[n]
		if !ok {
			return nil, nil, fmt.Errorf("read object: no attribute %q", n)
		}
		if listUnknown && !a.IsFullyKnown() {
			unknown = append(unknown, n)
		}
	}
	sort.Strings(unknown)
	return attrs, unknown, nil
}

// readEgress reads an egress; empty says it was configured as "", kept as
// written so that SBX-NET-002 refuses it (see NetworkPolicy.EgressEmpty).
func readEgress(v tftypes.Value) (egress string, empty bool, err error) {
	egress, err = String(v)
	return egress, err == nil && !v.IsNull() && egress == "", err
}

// readCaps reads cpu, memory_mb, disk_mb and pids, named resources.* in
// refusals as the policy names them.
func readCaps(attrs map[string]tftypes.Value) (c model.CapsRequest, err error) {
	if c.CPU, err = float64Of(attrs["cpu"]); err != nil {
		return c, err
	}
	for _, f := range []struct {
		name string
		dst  **int64
	}{{"memory_mb", &c.MemoryMB}, {"disk_mb", &c.DiskMB}, {"pids", &c.Pids}} {
		if *f.dst, err = int64Of(attrs[f.name], "resources."+f.name); err != nil {
			return c, err
		}
	}
	return c, nil
}

// withPlaceholders replaces the unknown elements of a known map of strings.
func withPlaceholders(m tftypes.Value, placeholder string) (tftypes.Value, error) {
	var elems map[string]tftypes.Value
	if err := m.As(&elems); err != nil {
		return m, fmt.Errorf("read map: %w", err)
	}
	out := make(map[string]tftypes.Value, len(elems))
	for k, e := range elems {
		if !e.IsKnown() {
			e = tftypes.NewValue(tftypes.String, placeholder)
		}
		out[k] = e
	}
	return tftypes.NewValue(m.Type(), out), nil
}

// unknownAttributes names what is unknown in an attribute: the attribute,
// or, in a known object (network, resources), its unknown attributes.
func unknownAttributes(name string, v tftypes.Value) []string {
	if v.IsKnown() && v.Type().Is(tftypes.Object{}) {
		if attrs, err := object(v); err == nil {
			var out []string
			for k, a := range attrs {
				if !a.IsFullyKnown() {
					out = append(out, name+"."+k)
				}
			}
			if len(out) > 0 {
				return out
			}
		}
	}
	return []string{name}
}

// Object returns an object's attributes; a null or unknown object gives
// nil. The map is the caller's to change.
func Object(v tftypes.Value) (map[string]tftypes.Value, error) {
	m, err := object(v)
	// As hands out the value's own map; a copy keeps the value immutable
	// when the caller fills in attributes.
	return maps.Clone(m), err
}

// object returns an object's attributes, the value's own map: read only.
func object(v tftypes.Value) (map[string]tftypes.Value, error) {
	if v.IsNull() || !v.IsKnown() {
		return nil, nil
	}
	var m map[string]tftypes.Value
	if err := v.As(&m); err != nil {
		return nil, fmt.Errorf("read object: %w", err)
	}
	return m, nil
}

// String reads a string; null (or unknown) gives "".
func String(v tftypes.Value) (string, error) {
	var s string
	err := stringTo(v, &s)
	return s, err
}

// stringTo reads a string into dst, as String does: reading into a field
// of a value already on the heap allocates nothing.
func stringTo(v tftypes.Value, dst *string) error {
	if v.IsNull() || !v.IsKnown() {
		*dst = ""
		return nil
	}
	if err := v.As(dst); err != nil {
		return fmt.Errorf("read string: %w", err)
	}
	return nil
}

// int64Of returns nil for null. A value that is not a whole number in
// int64's range is refused with a ConfigurationError naming the attribute:
// clamping it to the range, or truncating it, would check and store a
// value other than the one configured.
func int64Of(v tftypes.Value, attribute string) (*int64, error) {
	if v.IsNull() {
		return nil, nil
	}
	var f big.Float
	if err := v.As(&f); err != nil {
		return nil, fmt.Errorf("read number: %w", err)
	}
	i, acc := f.Int64()
	if f.IsInf() || acc != big.Exact {
		shown := f.Text('g', 10)
		if len(shown) > 40 {
			shown = shown[:40] + "…"
		}
		want := "a whole number in the 64-bit integer range"
		return nil, &model.Error{
			Class: model.ErrConfiguration, Attribute: attribute,
			Message: fmt.Sprintf("%s is %s, which is not %s", attribute, shown, want),
			Fix:     fmt.Sprintf("set %s to %s", attribute, want),
		}
	}
	return &i, nil
}

// float64Of reads a cpu (resources.cpu); null gives nil. A value a float64 cannot hold as
// written is refused (CPU).
func float64Of(v tftypes.Value) (*float64, error) {
	if v.IsNull() {
		return nil, nil
	}
	var f big.Float
	if err := v.As(&f); err != nil {
		return nil, fmt.Errorf("read number: %w", err)
	}
	x, err := CPU(&f, "resources.cpu")
	if err != nil {
		return nil, err
	}
	return &x, nil
}

// stringList reads a list of strings; null gives nil.
func stringList(v tftypes.Value) ([]string, error) {
	if v.IsNull() {
		return nil, nil
	}
	var elems []tftypes.Value
	if err := v.As(&elems); err != nil {
		return nil, fmt.Errorf("read list: %w", err)
	}
	out := make([]string, len(elems))
	for i, e := range elems {
		s, err := String(e)
		if err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}

// StringMap reads a map of strings; null gives an empty map.
func StringMap(v tftypes.Value) (map[string]string, error) {
	out := map[string]string{}
	if v.IsNull() {
		return out, nil
	}
	var elems map[string]tftypes.Value
	if err := v.As(&elems); err != nil {
		return nil, fmt.Errorf("read map: %w", err)
	}
	for k, e := range elems {
		s, err := String(e)
		if err != nil {
			return nil, err
		}
		out[k] = s
	}
	return out, nil
}
