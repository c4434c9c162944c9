package verdict

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
)

// teamBundle has one rule at each level, all refusing the same template.
const teamBundle = `package team.levels

import data.sandboxio.lib

# METADATA
# title: soft
# custom:
#   id: TEAM-SOFT
#   class: ConfigurationError
#   attribute: image
#   enforcement: soft-mandatory
deny contains f if {
	input.template.image == "bad"
	f := lib.finding(rego.metadata.rule(), "soft says no")
}

# METADATA
# title: hard
# custom:
#   id: TEAM-HARD
#   class: ConfigurationError
#   enforcement: hard-mandatory
deny contains f if {
	input.template.image == "bad"
	f := lib.finding(rego.metadata.rule(), "hard says no")
}

# METADATA
# title: advisory deny
# custom:
#   id: TEAM-ADV
#   class: ConfigurationError
#   enforcement: advisory
deny contains f if {
	input.template.image == "bad"
	f := lib.finding(rego.metadata.rule(), "advisory says no")
}

# A conftest-style rule: a plain message, no METADATA: a refusal.
deny contains "plain says no" if input.template.image == "bad"
`

var now = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

func engine(t *testing.T) *policy.Engine {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "levels.rego"), []byte(teamBundle), 0o600); err != nil {
		t.Fatal(err)
	}
	e, err := policy.Load(t.Context(), []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func template(t *testing.T, image string, allow ...string) policy.Input {
	t.Helper()
	_, in, err := inputs.Template{Name: "t", Image: image, Allow: allow}.Build("docker://")
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func waivers(t *testing.T, yaml string) *Waivers {
	t.Helper()
	w, err := ParseWaivers("w.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("waivers: %v", err)
	}
	return w
}

func outcomes(v Verdict) map[string]Outcome {
	m := map[string]Outcome{}
	for _, r := range v.Results {
		m[r.ID] = r.Outcome
	}
	return m
}

func check(t *testing.T, e *policy.Engine, in policy.Input, o Options) Verdict {
	t.Helper()
	if o.Now.IsZero() {
		o.Now = now
	}
	v, err := Check(t.Context(), e, in, o)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestCheck_EnforcementLevels(t *testing.T) {
	e := engine(t)
	v := check(t, e, template(t, "bad"), Options{Address: "sandboxio_template.x"})
	got := outcomes(v)
	want := map[string]Outcome{"TEAM-SOFT": Fail, "TEAM-HARD": Fail, "TEAM-ADV": Warn, "team.levels": Fail}
	for id, o := range want {
		if got[id] != o {
			t.Errorf("%s: %s, want %s (all: %v)", id, got[id], o, got)
		}
	}
	if !v.Failed() || v.Err() == nil {
		t.Fatal("a verdict with mandatory findings did not fail")
	}
	if v.Results[0].Outcome != Fail || v.Results[len(v.Results)-1].Outcome != Warn {
		t.Fatalf("results not ordered failures first: %+v", v.Results)
	}
	if v := check(t, e, template(t, "good"), Options{}); v.Failed() || len(v.Results) != 0 {
		t.Fatalf("clean template: %+v", v.Results)
	}
}

func TestCheck_WaiverAppliesToSoftMandatoryOnly(t *testing.T) {
	e := engine(t)
	w := waivers(t, `waivers:
  - rule: TEAM-SOFT
    address: sandboxio_template.legacy_*
    reason: moving in Q3
    expires: 2026-12-31
  - rule: TEAM-HARD
    address: "*"
    reason: try to waive a hard rule
    expires: 2026-12-31
  - rule: TEAM-ADV
    address: "*"
    reason: nothing to waive
    expires: 2026-12-31
`)
	v := check(t, e, template(t, "bad"), Options{Address: "sandboxio_template.legacy_a", Waivers: w})
	got := outcomes(v)
	if got["TEAM-SOFT"] != Waived || got["TEAM-HARD"] != Fail || got["TEAM-ADV"] != Warn {
		t.Fatalf("outcomes: %v", got)
	}
	for _, r := range v.Results {
		switch r.ID {
		case "TEAM-SOFT":
			if !strings.Contains(r.Note, "moving in Q3") || !strings.Contains(r.Note, "w.yaml:2") || r.Waiver == nil {
				t.Errorf("waived finding does not carry the waiver and its reason: %+v", r)
			}
		case "TEAM-HARD":
			if !strings.Contains(r.Note, "hard-mandatory") || !strings.Contains(r.Note, "not applied") {
				t.Errorf("refused waiver not reported on the finding: %q", r.Note)
			}
		}
	}
	// Another address: the soft finding fails.
	v = check(t, e, template(t, "bad"), Options{Address: "sandboxio_template.new", Waivers: w})
	if outcomes(v)["TEAM-SOFT"] != Fail {
		t.Fatal("a waiver applied outside its address pattern")
	}
}

func TestCheck_ExpiredWaiverStopsApplying(t *testing.T) {
	e := engine(t)
	w := waivers(t, `{"waivers": [{"rule": "TEAM-SOFT", "address": "*", "reason": "old", "expires": "2026-05-31"}]}`)
	v := check(t, e, template(t, "bad"), Options{Address: "sandboxio_template.x", Waivers: w})
	var soft Result
	for _, r := range v.Results {
		if r.ID == "TEAM-SOFT" {
			soft = r
		}
	}
	if soft.Outcome != Fail || !strings.Contains(soft.Note, "expired") {
		t.Fatalf("expired waiver: %+v", soft)
	}
	// The last day is still covered.
	v = check(t, e, template(t, "bad"), Options{Address: "sandboxio_template.x", Waivers: w, Now: time.Date(2026, 5, 31, 23, 59, 0, 0, time.UTC)})
	if outcomes(v)["TEAM-SOFT"] != Waived {
		t.Fatal("a waiver did not cover its expiry day")
	}
}

// Built-in rules are hard-mandatory: a waiver for one is refused and the
// Docker allow list stays refused.
func TestCheck_BuiltinRuleCannotBeWaived(t *testing.T) {
	e := engine(t)
	w := waivers(t, `waivers:
  - {rule: SBX-NET-003, address: "*", reason: we really want an allow list on docker, expires: 2030-01-01}
`)
	v := check(t, e, template(t, "good", "10.0.0.0/8"), Options{Address: "sandboxio_template.x", Waivers: w})
	if outcomes(v)["SBX-NET-003"] != Fail {
		t.Fatalf("SBX-NET-003 waived: %+v", v.Results)
	}
	status, detail := w.List[0].Status(e, now)
	if status != StatusRefused || !strings.Contains(detail, "built-in") {
		t.Fatalf("waiver of a built-in rule: %s %s", status, detail)
	}
}

func TestStatus_UnknownRuleRefused(t *testing.T) {
	w := waivers(t, "waivers:\n  - {rule: TEAM-TYPO, address: x, reason: r, expires: 2030-01-01}\n")
	if status, detail := w.List[0].Status(engine(t), now); status != StatusRefused || !strings.Contains(detail, "no rule TEAM-TYPO") {
		t.Fatalf("unknown rule: %s %s", status, detail)
	}
}

// The provider cannot see addresses: a waiver applies when its pattern
// could name a resource of the document's type, and the note says so.
func TestCheck_AddressUnknownMatchesByType(t *testing.T) {
	e := engine(t)
	for pattern, applies := range map[string]bool{
		"sandboxio_template.legacy_*":               true,
		"module.*.sandboxio_template.x":             true,
		"*":                                         true,
		"module.legacy.*":                           true,
		"sandboxio_network_policy.*":                false,
		"data.sandboxio_tenant_sandbox.acme":        false,
		"sandboxio_template_other.x":                false,
		"module.m.sandboxio_resource_caps.template": false,
	} {
		w := waivers(t, "waivers:\n  - {rule: TEAM-SOFT, address: '"+pattern+"', reason: r, expires: 2030-01-01}\n")
		v := check(t, e, template(t, "bad"), Options{Waivers: w})
		got := outcomes(v)["TEAM-SOFT"] == Waived
		if got != applies {
			t.Errorf("pattern %q: applied=%v, want %v", pattern, got, applies)
		}
		if got {
			for _, r := range v.Results {
				if r.ID == "TEAM-SOFT" && !strings.Contains(r.Note, "address is not known") {
					t.Errorf("type-level waiver does not say so: %q", r.Note)
				}
			}
		}
	}
}

func TestParseWaivers_Errors(t *testing.T) {
	for name, tc := range map[string]struct{ src, want string }{
		"empty":           {"", "empty"},
		"not yaml":        {"waivers: [", "not YAML or JSON"},
		"list at top":     {"- rule: x", "top level must be a mapping"},
		"no list":         {"version: 1\n", "needs a waivers: list"},
		"unknown top key": {"waiver: []\n", `unknown key "waiver"`},
		"bad version":     {"version: 2\nwaivers: []\n", "version"},
		"missing expiry": {`waivers:
  - rule: TEAM-1
    address: x
    reason: r
`, "line 2: the waiver needs expires"},
		"missing reason": {`waivers:
  - {rule: TEAM-1, address: x, reason: "  ", expires: 2030-01-01}
`, "needs reason"},
		"misspelt field": {`waivers:
  - {rule: TEAM-1, address: x, reason: r, expiry: 2030-01-01}
`, `unknown waiver field "expiry"`},
		"bad date":        {"waivers:\n  - {rule: TEAM-1, address: x, reason: r, expires: next year}\n", "not a date"},
		"nested value":    {"waivers:\n  - {rule: [a], address: x, reason: r, expires: 2030-01-01}\n", "rule must be a string"},
		"scalar entry":    {"waivers:\n  - TEAM-1\n", "a waiver is a mapping"},
		"json wrong type": {`{"waivers": {"rule": "x"}}`, "needs a waivers: list"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseWaivers("w.yaml", []byte(tc.src))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestParseWaivers_DatesAndTimes(t *testing.T) {
	w := waivers(t, "waivers:\n  - {rule: T, address: x, reason: r, expires: 2026-06-01}\n  - {rule: T, address: x, reason: r, expires: '2026-06-01T08:00:00Z'}\n")
	if got := w.List[0].Until(); !got.Equal(time.Date(2026, 6, 2, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("date expiry: %v", got)
	}
	if got := w.List[1].Until(); !got.Equal(time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)) {
		t.Errorf("time expiry: %v", got)
	}
	if w.List[1].Source != "w.yaml:3" {
		t.Errorf("source: %s", w.List[1].Source)
	}
}

func TestGlobMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"sandboxio_template.legacy_*", "sandboxio_template.legacy_a", true},
		{"sandboxio_template.legacy_*", `sandboxio_template.legacy_a["x"]`, true},
		{"sandboxio_template.legacy_*", "module.m.sandboxio_template.legacy_a", false},
		{`sandboxio_template.t["a"]`, `sandboxio_template.t["a"]`, true}, // brackets are literal
		{`sandboxio_template.t[?]`, `sandboxio_template.t[0]`, true},
		{`sandboxio_template.t[?]`, `sandboxio_template.t[10]`, false},
		{"*", "anything.at.all", true},
		{"module.*.sandboxio_template.x", "module.a.module.b.sandboxio_template.x", true},
		{"a*b*c", "abc", true},
		{"a*b*c", "acb", false},
		{"", "", true},
		{"", "x", false},
	} {
		if got := globMatch(tc.pattern, tc.s); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
}

func TestGlobsIntersect(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"sandboxio_template.x", "sandboxio_template.*", true},
		{"sandboxio_template.x", "module.*.sandboxio_template.*", false},
		{"module.a.sandboxio_template.x", "module.*.sandboxio_template.*", true},
		{"*.x", "sandboxio_template.*", true},
		{"abc", "abd", false},
		{"a?c", "*b*", true},
		{"*", "", true},
		{"a", "", false},
		{"**", "**", true},
	} {
		if got := globsIntersect(tc.a, tc.b); got != tc.want {
			t.Errorf("globsIntersect(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
		if got := globsIntersect(tc.b, tc.a); got != tc.want {
			t.Errorf("globsIntersect(%q, %q) = %v, want %v (swapped)", tc.b, tc.a, got, tc.want)
		}
	}
}

// FuzzGlobsIntersect checks the intersection against brute force: a string
// matching both globs means they intersect.
func FuzzGlobsIntersect(f *testing.F) {
	f.Add("a*b", "*b", "ab")
	f.Add("sandboxio_template.*", "*.x", "sandboxio_template.x")
	f.Fuzz(func(t *testing.T, a, b, s string) {
		if len(a) > 12 || len(b) > 12 || len(s) > 16 {
			return
		}
		if globMatch(a, s) && globMatch(b, s) && !globsIntersect(a, b) {
			t.Fatalf("%q matches %q and %q, but they do not intersect", s, a, b)
		}
	})
}

// BenchmarkCheckAcceptedTemplate is the provider's per-template cost at
// plan: compare with policy's BenchmarkEvaluateTemplate; deciding adds
// nothing when no rule fires.
func BenchmarkCheckAcceptedTemplate(b *testing.B) {
	e, err := policy.Load(b.Context(), nil)
	if err != nil {
		b.Fatal(err)
	}
	_, in, err := inputs.Template{Name: "t", Image: "img", Runtime: "runsc", RequireIsolation: "GVISOR"}.Build("docker://")
	if err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		v, err := Check(ctx, e, in, Options{})
		if err != nil || v.Failed() {
			b.Fatalf("check: %v %+v", err, v.Results)
		}
	}
}
