package capabilities

import (
	"slices"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// The capability data is read by both the Go backends and the Rego rules;
// these tests keep it consistent with the domain model and with itself.

// tierRanks returns the tier ranks the Rego rules use.
func tierRanks() map[model.Tier]int { return data().Tiers }

// defaultCaps returns the default caps the Rego rules use.
func defaultCaps() model.Caps { return data().Defaults }

func TestCapabilitiesTierRanksMatchModel(t *testing.T) {
	ranks := tierRanks()
	if len(ranks) != len(model.Tiers) {
		t.Fatalf("data has %d tiers %v, the model %d %v", len(ranks), ranks, len(model.Tiers), model.Tiers)
	}
	for i, tier := range model.Tiers {
		got, ok := ranks[tier]
		if !ok {
			t.Errorf("tier %s missing from capabilities/data.json", tier)
			continue
		}
		if got != i {
			t.Errorf("tier %s: data rank %d, model rank %d", tier, got, i)
		}
		if r, _ := tier.Rank(); r != got {
			t.Errorf("tier %s: Rank() %d, data %d", tier, r, got)
		}
	}
}

func TestCapabilitiesDefaultCapsMatchModel(t *testing.T) {
	if got, want := defaultCaps(), model.DefaultCaps(); got != want {
		t.Fatalf("data default_caps %+v, model.DefaultCaps() %+v", got, want)
	}
}

// The cap bounds and the timeout ceiling are read by the Rego rules
// (SBX-RES-001, SBX-TMO-001/006) from the data and by the Go run-time checks
// from the model; both must say the same.
func TestCapabilitiesBoundsMatchModel(t *testing.T) {
	if got, want := CapBounds(), model.CapBounds(); got != want {
		t.Fatalf("data cap_bounds %+v, model.CapBounds() %+v", got, want)
	}
	if got := MaxTimeoutSeconds(); got != model.MaxTimeoutSeconds {
		t.Fatalf("data max_timeout_seconds %d, model.MaxTimeoutSeconds %d", got, model.MaxTimeoutSeconds)
	}
}

// SBX-RES-001 lets caps equal to the defaults through without testing each
// cap, which is only right while the defaults lie within the bounds; the
// ceiling must leave room for the default timeouts and every backend's own
// maximum lifetime.
func TestCapabilitiesBoundsConsistent(t *testing.T) {
	b, d := CapBounds(), defaultCaps()
	for _, c := range []struct {
		name  string
		bound model.Bound
		def   float64
	}{
		{"cpu", b.CPU, d.CPU}, {"memory_mb", b.MemoryMB, float64(d.MemoryMB)},
		{"disk_mb", b.DiskMB, float64(d.DiskMB)}, {"pids", b.Pids, float64(d.Pids)},
	} {
		if !(c.bound.Min > 0 && c.bound.Min < c.bound.Max) {
			t.Errorf("cap_bounds.%s %+v: want 0 < min < max", c.name, c.bound)
		}
		if !c.bound.Contains(c.def) {
			t.Errorf("default %s %v is outside cap_bounds %+v", c.name, c.def, c.bound)
		}
	}
	ceiling := MaxTimeoutSeconds()
	if ceiling < model.DefaultTimeoutSeconds || ceiling < model.DefaultLifetimeSeconds {
		t.Errorf("max_timeout_seconds %d is below the defaults", ceiling)
	}
	for _, key := range Keys() {
		c, _ := Lookup(key)
		if c.MaxLifetimeSeconds > ceiling {
			t.Errorf("descriptor %q: max_lifetime_seconds %d above max_timeout_seconds %d", key, c.MaxLifetimeSeconds, ceiling)
		}
		if float64(c.Caps.MaxPids) > b.Pids.Max {
			t.Errorf("descriptor %q: max_pids %d above cap_bounds.pids.max %v", key, c.Caps.MaxPids, b.Pids.Max)
		}
	}
}

func TestCapabilitiesTiersAreModelTiers(t *testing.T) {
	for _, key := range Keys() {
		c, _ := Lookup(key)
		if _, ok := c.Tier.Rank(); !ok {
			t.Errorf("descriptor %q: tier %q is not a model tier", key, c.Tier)
		}
	}
}

func TestCapabilitiesAllowKinds(t *testing.T) {
	kinds := []string{"cidr", "ip", "domain"}
	for _, key := range Keys() {
		c, _ := Lookup(key)
		for _, k := range c.Network.AllowKinds {
			if !slices.Contains(kinds, k) {
				t.Errorf("descriptor %q: allow kind %q is not one of %v", key, k, kinds)
			}
		}
		// A backend with an allow list takes at least one kind of entry; one
		// without takes none.
		if c.Network.Allowlist != (len(c.Network.AllowKinds) > 0) {
			t.Errorf("descriptor %q: allowlist %v with allow_kinds %v", key, c.Network.Allowlist, c.Network.AllowKinds)
		}
		if c.Network.AllowlistNote == "" {
			t.Errorf("descriptor %q: allowlist_note is empty; SBX-NET-003 and SBX-NET-005 quote it", key)
		}
	}
}

// Docker daemons register runsc with --network=none, so a runsc container
// cannot be given a bridge network: open egress is refused there
// (SBX-NET-010) and given everywhere else, except through the egress
// gateway, which forwards listed destinations only.
func TestCapabilitiesOpenEgress(t *testing.T) {
	for _, key := range Keys() {
		c, _ := Lookup(key)
		if want := key != "docker/runsc" && c.Variant != "gateway"; c.Network.OpenEgress != want {
			t.Errorf("descriptor %q: open_egress %v, want %v", key, c.Network.OpenEgress, want)
		}
	}
}

func TestCapabilitiesCaps(t *testing.T) {
	caps := []string{"cpu", "memory_mb", "disk_mb", "pids"}
	for _, key := range Keys() {
		c, _ := Lookup(key)
		switch c.Caps.Mode {
		case CapsPerSandbox:
		case CapsTemplate:
			if len(c.Caps.Settable) != 0 {
				t.Errorf("descriptor %q: template-owned caps but settable %v", key, c.Caps.Settable)
			}
		default:
			// "none" exists for the rules (SBX-RES-003); a real backend that
			// can apply no caps must not be described at all.
			t.Errorf("descriptor %q: caps mode %q, want %s or %s", key, c.Caps.Mode, CapsPerSandbox, CapsTemplate)
		}
		for _, s := range c.Caps.Settable {
			if !slices.Contains(caps, s) {
				t.Errorf("descriptor %q: settable cap %q is not one of %v", key, s, caps)
			}
		}
		if c.Caps.MaxPids < 0 || (c.Caps.PidsCeiling && c.Caps.MaxPids == 0) {
			t.Errorf("descriptor %q: pids_ceiling %v with max_pids %d", key, c.Caps.PidsCeiling, c.Caps.MaxPids)
		}
		if c.MaxLifetimeSeconds < 0 {
			t.Errorf("descriptor %q: max_lifetime_seconds %d", key, c.MaxLifetimeSeconds)
		}
	}
}

// The Rego rules test some descriptor fields for an exact value (allowlist ==
// false, deny == false, mode == "none", tier == "UNKNOWN") so that OPA can skip
// them; a missing field would silently disable such a rule. Decoding into the
// struct cannot tell a missing field from its zero value, so this reads the raw
// JSON the rules see.
func TestCapabilitiesRawFieldsPresent(t *testing.T) {
	type field struct {
		path []string
		kind string // bool, string, number, array
	}
	fields := []field{
		{[]string{"key"}, "string"},
		{[]string{"backend"}, "string"},
		{[]string{"runtime"}, "string"},
		{[]string{"tier"}, "string"},
		{[]string{"network", "deny"}, "bool"},
		{[]string{"network", "open_egress"}, "bool"},
		{[]string{"network", "allowlist"}, "bool"},
		{[]string{"network", "allow_kinds"}, "array"},
		{[]string{"network", "allowlist_note"}, "string"},
		{[]string{"caps", "mode"}, "string"},
		{[]string{"caps", "settable"}, "array"},
		{[]string{"caps", "memory_bounds_swap"}, "bool"},
		{[]string{"caps", "pids_ceiling"}, "bool"},
		{[]string{"caps", "max_pids"}, "number"},
		{[]string{"native_labels"}, "bool"},
		{[]string{"tenant_storage"}, "bool"},
		{[]string{"max_lifetime_seconds"}, "number"},
	}
	for _, key := range Keys() {
		raw, ok := LookupRaw(key)
		if !ok {
			t.Fatalf("LookupRaw(%q) failed", key)
		}
		for _, f := range fields {
			var v any = raw
			for _, p := range f.path {
				m, ok := v.(map[string]any)
				if !ok {
					v = nil
					break
				}
				v = m[p]
			}
			ok := false
			switch f.kind {
			case "bool":
				_, ok = v.(bool)
			case "string":
				_, ok = v.(string)
			case "number":
				_, ok = v.(float64)
			case "array":
				_, ok = v.([]any)
			}
			if !ok {
				t.Errorf("descriptor %q: %v is %T, want a %s", key, f.path, v, f.kind)
			}
		}
	}
}
