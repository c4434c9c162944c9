package resources_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

// Team policies through policy_paths and waivers through policy_waivers:
// the example bundle in examples/policies, as a team would load it.

func examplesDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "examples", "policies"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func teamProvider(policyDir, waivers string) string {
	s := fmt.Sprintf("provider \"sandboxio\" {\n  default_backend = \"docker://\"\n  policy_paths    = [%q]\n", policyDir)
	if waivers != "" {
		s += fmt.Sprintf("  policy_waivers  = %q\n", waivers)
	}
	return s + "}\n"
}

func teamTemplate(name, image string, memory int) string {
	return fmt.Sprintf(`
resource "sandboxio_template" %q {
  name      = %q
  image     = %q
  labels    = { team = "agents" }
  resources = { memory_mb = %d }
}
`, name, name, image, memory)
}

func writeTeamFile(t *testing.T, dir, name, src string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAccTeamPolicies_Refused(t *testing.T) {
	ex := examplesDir(t)
	expired := writeTeamFile(t, t.TempDir(), "expired.yaml", `waivers:
  - {rule: TEAM-IMG-001, address: "*", reason: was due in 2025, expires: 2025-01-31}
`)
	runRefusals(t, []refusal{
		// hard-mandatory: a waiver could not help.
		{"memory above the team ceiling", teamProvider(ex, filepath.Join(ex, "waivers.yaml")) +
			teamTemplate("agent", "registry.internal.example/agent:1.4", 4096), "ConfigurationError", "TEAM-MEM-001"},
		// soft-mandatory without a waiver refuses.
		{"unapproved registry", teamProvider(ex, "") + teamTemplate("notebook", "python:3.12-slim", 512), "ConfigurationError", "TEAM-IMG-001"},
		// An expired waiver stops applying.
		{"expired waiver", teamProvider(ex, expired) + teamTemplate("legacy_notebook", "python:3.12-slim", 512), "ConfigurationError", "TEAM-IMG-001"},
	})
}

func TestAccTeamPolicies_WaivedPlans(t *testing.T) {
	ex := examplesDir(t)
	unitTest(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config:             teamProvider(ex, filepath.Join(ex, "waivers.yaml")) + teamTemplate("legacy_notebook", "python:3.12-slim", 512),
			PlanOnly:           true,
			ExpectNonEmptyPlan: true,
		}},
	})
}

// No team bundle can make a Docker allow list pass: not by defining its own
// deny, warn or allow, not by a waiver, not by declaring a package in the
// built-in namespace, not by rewriting the capability data.
func TestAccTeamPolicies_CannotAllowDockerAllowList(t *testing.T) {
	allowList := `
resource "sandboxio_template" "t" {
  name    = "t"
  image   = "registry.internal.example/agent:1.4"
  labels  = { team = "agents" }
  network = { allow = ["151.101.0.0/16"] }
}
`
	override := t.TempDir()
	writeTeamFile(t, override, "override.rego", `package team.override

allow := true

# deny and warn may only be partial sets (a complete or default rule is
# refused at load, see the hostile cases); empty ones change nothing.
deny contains "never" if { false }

warn contains "never" if { false }
`)
	waiver := writeTeamFile(t, t.TempDir(), "waivers.yaml", `waivers:
  - {rule: SBX-NET-003, address: "*", reason: we want an allow list on docker, expires: 2030-01-01}
`)
	shadow := t.TempDir()
	writeTeamFile(t, shadow, "network.rego", "package sandboxio.network\n\ndeny := set()\n")
	capsShadow := t.TempDir()
	writeTeamFile(t, capsShadow, "caps.rego", `package capabilities.backends

# Claim that docker/runc enforces allow lists.
x := 1
`)
	runRefusals(t, []refusal{
		{"own deny and allow", teamProvider(override, "") + allowList, "CapabilityNotSupported", "SBX-NET-003"},
		{"waiver of the built-in rule", teamProvider(override, waiver) + allowList, "CapabilityNotSupported", "SBX-NET-003"},
	})
	for name, dir := range map[string]string{"sandboxio namespace": shadow, "capability data": capsShadow} {
		t.Run(name, func(t *testing.T) {
			unitTest(t, resource.TestCase{
				ProtoV6ProviderFactories: protoV6ProviderFactories,
				Steps: []resource.TestStep{{
					Config:      teamProvider(dir, "") + allowList,
					PlanOnly:    true,
					ExpectError: regexp.MustCompile(`(?s)ConfigurationError: policies not loaded.*Rule: SBX-POL-001`),
				}},
			})
		})
	}
}

// A waiver file that cannot be read is refused as SBX-POL-002 on
// policy_waivers, with the catalogue's fix: the same error policy check and
// the run-time helper report (verdict.LoadWaivers makes it once).
func TestAccTeamPolicies_WaiverFileUnreadable(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	unitTest(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config:   teamProvider(examplesDir(t), missing) + teamTemplate("python", "registry.internal.example/python:3.12", 512),
			PlanOnly: true,
			ExpectError: regexp.MustCompile(`(?s)ConfigurationError: waivers not loaded.*missing\.yaml.*Rule: SBX-POL-002` +
				`.*Attribute: policy_waivers.*Fix: Pass a waiver file that exists`),
		}},
	})
}
