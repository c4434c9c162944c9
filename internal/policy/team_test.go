package policy_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

func loadTeam(t *testing.T, files map[string]string) (*policy.Engine, error) {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		writePolicy(t, dir, name, src)
	}
	e, err := policy.New(t.Context(), []string{dir})
	if err != nil {
		return nil, err
	}
	return e, e.CheckTeam()
}

// A team package over data.capabilities would rewrite what the built-in
// rules believe a backend gives: here it ranks CONTAINER above MICROVM, so
// that runc would satisfy require_isolation = MICROVM. It must not load.
func TestCheckTeam_CapabilitiesShadowRefused(t *testing.T) {
	e, err := loadTeam(t, map[string]string{"evil.rego": `package capabilities

tiers := {"UNKNOWN": 0, "CONTAINER": 9, "GVISOR": 2, "MICROVM": 3}
`})
	if !errors.Is(err, model.ErrConfiguration) || !strings.Contains(err.Error(), "capability data") {
		t.Fatalf("capabilities shadow: err = %v", err)
	}
	if e == nil {
		return // refused while compiling: even better
	}
	// What it would do had it loaded, to show the check is what stops it.
	in := templateInput()
	in.Backend = dockerRef("runc")
	in.Template.Runtime = "runc"
	in.Template.RequireIsolation = "MICROVM"
	if d := eval(t, e, in); d.Allowed() {
		t.Log("compiled without CheckTeam, the shadowed ranks accept runc for MICROVM; CheckTeam refuses the bundle")
	}
}

func TestCheckTeam_RefusesReservedAndInvalidMetadata(t *testing.T) {
	for name, tc := range map[string]struct{ src, want string }{
		"reserved id": {`package team.x

# METADATA
# title: pretend to be a built-in rule
# custom:
#   id: SBX-NET-003
#   enforcement: advisory
deny contains "x" if { input.kind == "template" }
`, "reserved SBX- range"},
		"reserved id lower case": {`package team.x

# METADATA
# title: t
# custom:
#   id: sbx-net-003
deny contains "x" if { false }
`, "reserved SBX- range"},
		"bad enforcement": {`package team.x

# METADATA
# title: t
# custom:
#   id: TEAM-1
#   enforcement: mandatory
deny contains "x" if { false }
`, "enforcement mandatory"},
		"bad severity": {`package team.x

# METADATA
# title: t
# custom:
#   id: TEAM-1
#   severity: urgent
deny contains "x" if { false }
`, "severity urgent"},
		"conflicting duplicate": {`package team.x

# METADATA
# title: t
# custom:
#   id: TEAM-1
#   enforcement: advisory
deny contains "x" if { false }

# METADATA
# title: t
# custom:
#   id: TEAM-1
#   enforcement: hard-mandatory
deny contains "y" if { false }
`, "declared twice"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := loadTeam(t, map[string]string{"p.rego": tc.src})
			if !errors.Is(err, model.ErrConfiguration) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ConfigurationError mentioning %q", err, tc.want)
			}
		})
	}
}

func TestCheckTeam_AcceptsWellFormedTeamRules(t *testing.T) {
	e, err := loadTeam(t, map[string]string{"ok.rego": `package team.ok

import data.sandboxio.lib

# METADATA
# title: images from the internal registry
# custom:
#   id: TEAM-IMG-001
#   class: ConfigurationError
#   attribute: image
#   severity: high
#   enforcement: soft-mandatory
#   fix: use registry.internal
deny contains f if {
	input.template
	not startswith(input.template.image, "registry.internal/")
	f := lib.finding(rego.metadata.rule(), "not internal")
}

# METADATA
# title: split rule, same level twice
# custom:
#   id: TEAM-2
#   enforcement: advisory
warn contains "a" if { input.kind == "x" }

# METADATA
# title: split rule, same level twice
# custom:
#   id: TEAM-2
#   enforcement: advisory
warn contains "b" if { input.kind == "y" }
`})
	if err != nil {
		t.Fatalf("well-formed team rules refused: %v", err)
	}
	d := eval(t, e, templateInput())
	if len(d.Denies) != 1 || d.Denies[0].ID != "TEAM-IMG-001" || d.Denies[0].Builtin {
		t.Fatalf("team denies: %+v", d.Denies)
	}
	info := e.RuleFor(d.Denies[0])
	if info.Enforcement() != policy.SoftMandatory || info.Severity() != "high" {
		t.Fatalf("team rule level: %s %s", info.Enforcement(), info.Severity())
	}
}

func TestRuleInfo_Defaults(t *testing.T) {
	for _, tc := range []struct {
		info     policy.RuleInfo
		level    policy.Enforcement
		severity string
	}{
		{policy.RuleInfo{Builtin: true, Deny: true}, policy.HardMandatory, "high"},
		{policy.RuleInfo{Builtin: true}, policy.Advisory, "medium"},
		// A built-in rule cannot be lowered by an annotation.
		{policy.RuleInfo{Builtin: true, Deny: true, Custom: map[string]any{"enforcement": "advisory", "severity": "low"}}, policy.HardMandatory, "high"},
		{policy.RuleInfo{Deny: true}, policy.HardMandatory, "high"},
		{policy.RuleInfo{}, policy.Advisory, "medium"},
		{policy.RuleInfo{Deny: true, Custom: map[string]any{"enforcement": "advisory", "severity": "low"}}, policy.Advisory, "low"},
		{policy.RuleInfo{Custom: map[string]any{"enforcement": "soft-mandatory"}}, policy.SoftMandatory, "medium"},
		// An invalid level never weakens a refusal (CheckTeam refuses it anyway).
		{policy.RuleInfo{Deny: true, Custom: map[string]any{"enforcement": "optional"}}, policy.HardMandatory, "high"},
	} {
		if got := tc.info.Enforcement(); got != tc.level {
			t.Errorf("%+v: enforcement %s, want %s", tc.info, got, tc.level)
		}
		if got := tc.info.Severity(); got != tc.severity {
			t.Errorf("%+v: severity %s, want %s", tc.info, got, tc.severity)
		}
	}
}

// A built-in finding is governed by built-in metadata only, even if a team
// annotation claims its ID (CheckTeam refuses that, but RuleFor must not
// depend on it).
func TestRuleFor_BuiltinNeverBorrowsTeamMetadata(t *testing.T) {
	dir := t.TempDir()
	writePolicy(t, dir, "claim.rego", `package team.claim

# METADATA
# title: claimed
# custom:
#   id: SBX-NET-003
#   enforcement: advisory
deny contains "x" if { false }
`)
	e, err := policy.New(t.Context(), []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	in := templateInput()
	in.Network.Allow = []string{"10.0.0.0/8"}
	d := eval(t, e, in)
	if len(d.Denies) == 0 || d.Denies[0].ID != "SBX-NET-003" {
		t.Fatalf("denies: %+v", d.Denies)
	}
	if got := e.RuleFor(d.Denies[0]).Enforcement(); got != policy.HardMandatory {
		t.Fatalf("built-in SBX-NET-003 governed as %s", got)
	}
}

func TestLoad_ChecksTeam(t *testing.T) {
	dir := t.TempDir()
	writePolicy(t, dir, "evil.rego", "package capabilities.backends\n\nx := 1\n")
	if _, err := policy.Load(t.Context(), []string{dir}); !errors.Is(err, model.ErrConfiguration) {
		t.Fatalf("Load accepted a package over the capability data: %v", err)
	}
	if _, err := policy.Load(t.Context(), nil); err != nil {
		t.Fatalf("Load of the embedded bundle: %v", err)
	}
}
