package model

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestTierSatisfies(t *testing.T) {
	cases := []struct {
		have, want Tier
		ok         bool
	}{
		{TierContainer, TierContainer, true},
		{TierGVisor, TierContainer, true},
		{TierMicroVM, TierGVisor, true},
		{TierContainer, TierGVisor, false},
		{TierGVisor, TierMicroVM, false},
		{TierUnknown, TierContainer, false}, // UNKNOWN satisfies nothing
		{TierMicroVM, TierUnknown, false},   // UNKNOWN is never a requirement
		{TierUnknown, TierUnknown, false},
		{Tier("VM"), TierContainer, false},
		{TierMicroVM, Tier("VM"), false},
	}
	for _, c := range cases {
		if got := c.have.Satisfies(c.want); got != c.ok {
			t.Errorf("%s.Satisfies(%s) = %v, want %v", c.have, c.want, got, c.ok)
		}
	}
}

func TestTierRankOrder(t *testing.T) {
	prev := -1
	for _, tier := range Tiers {
		r, ok := tier.Rank()
		if !ok || r <= prev {
			t.Fatalf("tier %s rank %d after %d", tier, r, prev)
		}
		prev = r
	}
	if _, ok := Tier("gvisor").Rank(); ok {
		t.Fatal("tiers are case-sensitive names")
	}
}

func TestCapsResolve(t *testing.T) {
	if c := (CapsRequest{}).Resolve(); c != DefaultCaps() || c.MemoryMB != DefaultMemoryMB || c.Pids != DefaultPids {
		t.Fatalf("empty request resolves to %+v", c)
	}
	mem, zero := int64(2048), int64(0)
	c := CapsRequest{MemoryMB: &mem, Pids: &zero}.Resolve()
	if c.MemoryMB != 2048 || c.CPU != DefaultCPU || c.DiskMB != DefaultDiskMB {
		t.Fatalf("raised memory: %+v", c)
	}
	// Zero is kept so that the policy refuses it, never replaced by a default.
	if c.Pids != 0 {
		t.Fatalf("an explicit 0 was replaced: %+v", c)
	}
}

func TestEffectiveTimeoutNeverUnbounded(t *testing.T) {
	cases := []struct{ call, sandbox, want time.Duration }{
		{0, 0, DefaultTimeoutSeconds * time.Second},
		{-1, 0, DefaultTimeoutSeconds * time.Second},
		{0, 30 * time.Second, 30 * time.Second},
		{5 * time.Second, 30 * time.Second, 5 * time.Second},
		{0, -time.Second, DefaultTimeoutSeconds * time.Second},
	}
	for _, c := range cases {
		if got := EffectiveTimeout(c.call, c.sandbox); got != c.want {
			t.Errorf("EffectiveTimeout(%v, %v) = %v, want %v", c.call, c.sandbox, got, c.want)
		}
	}
}

func TestErrorClassMatching(t *testing.T) {
	err := fmt.Errorf("open: %w", &Error{Class: ErrResourceLimitExceeded, Limit: LimitMemory, Message: "the sandbox ran out of memory"})
	if !errors.Is(err, ErrResourceLimitExceeded) || errors.Is(err, ErrSandboxGone) {
		t.Fatalf("errors.Is on class: %v", err)
	}
	var e *Error
	if !errors.As(err, &e) || e.Limit != LimitMemory {
		t.Fatalf("errors.As: %v", err)
	}
	if !strings.HasPrefix(e.Error(), "ResourceLimitExceeded(memory): ") {
		t.Fatalf("text: %q", e.Error())
	}
	full := (&Error{Class: ErrCapabilityNotSupported, Rule: "SBX-NET-003", Attribute: "network.allow", Message: "m", Fix: "f"}).Error()
	if full != "CapabilityNotSupported: m [SBX-NET-003, attribute network.allow]; fix: f" {
		t.Fatalf("text: %q", full)
	}
}

func TestWarningString(t *testing.T) {
	w := Warning{Class: OrphanedSandboxWarning, Message: "teardown grace expired", SandboxID: "abc",
		Labels: map[string]string{LabelTenantID: "acme", "b": "2"}}
	s := w.String()
	if !strings.Contains(s, "sandbox abc") || !strings.Contains(s, "b=2,sandboxio.tenant_id=acme") {
		t.Fatalf("warning text: %q", s)
	}
}

func testSpec() Spec {
	return Spec{SpecVersion: SpecVersion, Name: "python", Backend: "docker://", Image: "img", Runtime: "runc",
		IsolationTier: TierContainer, Network: NetworkPolicy{}.Normalized(), Resources: DefaultCaps(),
		TimeoutSeconds: 300, LifetimeSeconds: 300, Env: map[string]string{"B": "2", "A": "1"},
		SecretNames: []string{"TOKEN"}, Labels: map[string]string{"team": "agents"}}
}

func TestSpecCanonicalRoundTrip(t *testing.T) {
	s := testSpec()
	b1, sum1, err := s.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b1), `"env":{"A":"1","B":"2"}`) {
		t.Fatalf("map keys not sorted: %s", b1)
	}
	back, err := ParseSpec(b1)
	if err != nil {
		t.Fatal(err)
	}
	b2, sum2, _ := back.Canonical()
	if string(b1) != string(b2) || sum1 != sum2 || len(sum1) != 64 {
		t.Fatalf("round trip changed the spec:\n%s\n%s", b1, b2)
	}
	s.Image = "other"
	if _, sum3, _ := s.Canonical(); sum3 == sum1 {
		t.Fatal("a changed spec kept its digest")
	}
}

// A volume is part of the canonical form and the digest; a spec without
// one renders as before (no "volume" key), so existing digests hold.
func TestSpecVolumeCanonical(t *testing.T) {
	s := testSpec()
	plain, sum, err := s.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(plain), "volume") {
		t.Fatalf("a spec without a volume renders one: %s", plain)
	}
	s.Volume = &Volume{Name: "datasets", MountPath: "/data"}
	b, vsum, err := s.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	if vsum == sum || !strings.Contains(string(b), `"labels":{"team":"agents"},"volume":{"name":"datasets","mount_path":"/data"}`) {
		t.Fatalf("volume not in the canonical form or digest: %s", b)
	}
	back, err := ParseSpec(b)
	if err != nil || back.Volume == nil || *back.Volume != *s.Volume {
		t.Fatalf("round trip lost the volume: %+v %v", back.Volume, err)
	}
	if _, sum2, _ := back.Canonical(); sum2 != vsum {
		t.Fatal("round trip changed the digest")
	}
	s.Volume.MountPath = "/other"
	if _, sum3, _ := s.Canonical(); sum3 == vsum {
		t.Fatal("a changed mount path kept the digest")
	}
	tenant := s.ForTenant("acme", "s1", nil)
	tenant.Volume.Name = "changed"
	if s.Volume.Name != "datasets" {
		t.Fatal("ForTenant shares the volume with the template spec")
	}
}

func TestParseSpecRefusals(t *testing.T) {
	good, _, _ := testSpec().Canonical()
	for name, in := range map[string]string{
		"not json":      "nope",
		"unknown field": `{"spec_version":1,"surprise":true}`,
		"trailing":      string(good) + ` {}`,
		"version":       strings.Replace(string(good), `"spec_version":1`, `"spec_version":2`, 1),
		"empty":         "",
	} {
		_, err := ParseSpec([]byte(in))
		if !errors.Is(err, ErrConfiguration) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestForTenant(t *testing.T) {
	tmpl := testSpec()
	s := tmpl.ForTenant("acme", "s-1", map[string]string{"run": "x"})
	want := map[string]string{"team": "agents", "run": "x", LabelTenantID: "acme", LabelSessionID: "s-1", LabelTemplate: "python"}
	if len(s.Labels) != len(want) {
		t.Fatalf("labels %v", s.Labels)
	}
	for k, v := range want {
		if s.Labels[k] != v {
			t.Fatalf("label %s = %q, want %q", k, s.Labels[k], v)
		}
	}
	if s.TenantID != "acme" || s.SessionID != "s-1" {
		t.Fatalf("ids: %+v", s)
	}
	// Extra labels cannot overwrite the reserved ones.
	s = tmpl.ForTenant("acme", "s-1", map[string]string{LabelTenantID: "evil"})
	if s.Labels[LabelTenantID] != "acme" {
		t.Fatal("an extra label replaced the tenant label")
	}
	s.Env["A"] = "changed"
	if tmpl.Env["A"] != "1" {
		t.Fatal("ForTenant shares the template's env map")
	}
}

func FuzzParseSpec(f *testing.F) {
	good, _, _ := testSpec().Canonical()
	f.Add(good)
	f.Add([]byte(`{"spec_version":1}`))
	f.Add([]byte(`{"spec_version":1,"resources":{"cpu":"x"}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSpec(data)
		if err != nil {
			if !errors.Is(err, ErrConfiguration) {
				t.Fatalf("error of another class: %v", err)
			}
			return
		}
		// Whatever parses renders canonically and parses back to the same digest.
		b, sum, err := s.Canonical()
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseSpec(b)
		if err != nil {
			t.Fatalf("canonical form does not parse: %v", err)
		}
		if _, sum2, _ := back.Canonical(); sum2 != sum {
			t.Fatal("canonical form is not stable")
		}
	})
}

// A timeout or lifetime is converted exactly, or refused: never overflowed,
// never replaced by a default.
func TestDurationsRefuseWhatIsNoBound(t *testing.T) {
	call, life, err := Durations(MaxTimeoutSeconds, 1)
	if err != nil || call != MaxTimeoutSeconds*time.Second || life != time.Second {
		t.Fatalf("Durations(max, 1) = %s, %s, %v", call, life, err)
	}
	for _, tc := range []struct {
		timeout, lifetime int64
		rule, attr        string
	}{
		{0, 300, "SBX-TMO-001", "timeout_seconds"},
		{-1, 300, "SBX-TMO-001", "timeout_seconds"},
		{300, 0, "SBX-TMO-002", "lifetime_seconds"},
		{MaxTimeoutSeconds + 1, 300, "SBX-TMO-001", "timeout_seconds"},
		{1e10, 1e10, "SBX-TMO-001", "timeout_seconds"},
		{300, 18446744074, "SBX-TMO-002", "lifetime_seconds"}, // 2^64 ns and a little: would wrap to 290 ms
		{300, 1<<63 - 1, "SBX-TMO-002", "lifetime_seconds"},
	} {
		_, _, err := Durations(tc.timeout, tc.lifetime)
		var me *Error
		if !errors.As(err, &me) || me.Class != ErrConfiguration || me.Rule != tc.rule || me.Attribute != tc.attr || me.Fix == "" {
			t.Errorf("Durations(%d, %d) = %v, want %s on %s", tc.timeout, tc.lifetime, err, tc.rule, tc.attr)
		}
	}
}

func TestCapsCheckBounds(t *testing.T) {
	b := CapBounds()
	if err := DefaultCaps().CheckBounds(b); err != nil {
		t.Fatalf("defaults refused: %v", err)
	}
	lo := Caps{CPU: MinCPU, MemoryMB: MinMemoryMB, DiskMB: MinDiskMB, Pids: MinPids}
	hi := Caps{CPU: MaxCPU, MemoryMB: MaxMemoryMB, DiskMB: MaxDiskMB, Pids: MaxPids}
	for _, c := range []Caps{lo, hi} {
		if err := c.CheckBounds(b); err != nil {
			t.Errorf("%+v refused: %v", c, err)
		}
	}
	for _, tc := range []struct {
		mod        func(*Caps)
		rule, attr string
		says       string
	}{
		{func(c *Caps) { c.CPU = 1e-10 }, "SBX-RES-001", "resources.cpu", "1e-10 is outside the range a backend can apply: the minimum is 0.01"},
		{func(c *Caps) { c.CPU = MaxCPU + 1 }, "SBX-RES-001", "resources.cpu", "the maximum is 1024"},
		{func(c *Caps) { c.MemoryMB = 1 << 44 }, "SBX-RES-001", "resources.memory_mb", "17592186044416 is outside the range a backend can apply: the maximum is 16777216"},
		{func(c *Caps) { c.MemoryMB = MinMemoryMB - 1 }, "SBX-RES-001", "resources.memory_mb", "the minimum is 6"},
		{func(c *Caps) { c.DiskMB = MaxDiskMB + 1 }, "SBX-RES-001", "resources.disk_mb", "the maximum is 1073741824"},
		{func(c *Caps) { c.Pids = MaxPids + 1 }, "SBX-RES-001", "resources.pids", "the maximum is 4194304"},
		{func(c *Caps) { c.Pids = 0 }, "SBX-RES-001", "resources.pids", "must be positive"},
		{func(c *Caps) { c.CPU = -1 }, "SBX-RES-001", "resources.cpu", "must be positive"},
	} {
		c := DefaultCaps()
		tc.mod(&c)
		err := c.CheckBounds(b)
		var me *Error
		if !errors.As(err, &me) || me.Class != ErrConfiguration || me.Rule != tc.rule || me.Attribute != tc.attr ||
			!strings.Contains(me.Message, tc.says) || me.Fix == "" {
			t.Errorf("%+v: %v, want %s on %s saying %q", c, err, tc.rule, tc.attr, tc.says)
		}
	}
}
