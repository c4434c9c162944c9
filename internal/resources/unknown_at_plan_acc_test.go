package resources_test

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// Values unknown at plan come from terraform_data, whose output Terraform
// knows only once it is applied.
const unknownSource = `
resource "terraform_data" "later" {
  input = "python:3.12-slim"
}
`

// unknownImageTemplate is a template whose image is unknown at plan, with
// the given name and extra attributes.
func unknownImageTemplate(defaultBackend, name, body string) string {
	return providerBlock(defaultBackend) + unknownSource + fmt.Sprintf(`
resource "sandboxio_template" "test" {
  name  = %q
  image = terraform_data.later.output
%s
}
`, name, body)
}

// No rule decides on the image (nor on env and label values), so a value
// unknown there does not keep the plan from refusing what it can see.
func TestAccTemplate_UnknownImageRefusedAtPlan(t *testing.T) {
	runRefusals(t, []refusal{
		{"allow list on docker", unknownImageTemplate("docker://", "python", `  network = { allow = ["1.2.3.4/32"] }`),
			"CapabilityNotSupported", "SBX-NET-003"},
		{"zero timeout", unknownImageTemplate("docker://", "python", `  timeout_seconds = 0`), "ConfigurationError", "SBX-TMO-001"},
		{"unknown env value, name also a secret", unknownImageTemplate("docker://", "python",
			"  env          = { API_TOKEN = terraform_data.later.id }\n  secret_names = [\"API_TOKEN\"]"),
			"ConfigurationError", "SBX-SEC-003"},
		{"unknown label value, reserved key", unknownImageTemplate("docker://", "python",
			`  labels = { "sandboxio.tenant_id" = terraform_data.later.id }`), "ConfigurationError", "SBX-LBL-001"},
		{"empty name", unknownImageTemplate("docker://", "", ""), "ConfigurationError", "SBX-LBL-003"},
		{"caps on e2b", unknownImageTemplate("e2b://", "python", `  resources = { cpu = 4 }`), "ConfigurationError", "SBX-RES-002"},
	})

	// Both refusals of the review's example, at plan.
	unitTest(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config:   unknownImageTemplate("docker://", "python", "  network = { allow = [\"1.2.3.4/32\"] }\n  timeout_seconds = 0"),
			PlanOnly: true,
			ExpectError: regexp.MustCompile(`(?s)(Rule: SBX-NET-003.*Rule: SBX-TMO-001|Rule: SBX-TMO-001.*Rule: ` +
				`SBX-NET-003)`),
		}},
	})
}

// An accepted template with an unknown image plans what it can: everything
// the image does not enter is known, the spec (which holds the image) is
// not; apply renders it with the real image.
func TestAccTemplate_UnknownImagePlansTheRest(t *testing.T) {
	addr := "sandboxio_template.test"
	config := unknownImageTemplate("", "python", `  backend           = "e2b://"
  require_isolation = "MICROVM"
  env               = { LANG = "C.UTF-8", HOST = terraform_data.later.id }
  labels            = { team = terraform_data.later.id }`)
	unitTest(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: config,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectKnownValue(addr, tfjsonpath.New("id"), knownvalue.StringExact("python")),
				plancheck.ExpectKnownValue(addr, tfjsonpath.New("isolation_tier"), knownvalue.StringExact("MICROVM")),
				plancheck.ExpectKnownValue(addr, tfjsonpath.New("timeout_seconds"), knownvalue.Int64Exact(300)),
				plancheck.ExpectKnownValue(addr, tfjsonpath.New("network").AtMapKey("egress"), knownvalue.StringExact("deny")),
				plancheck.ExpectUnknownValue(addr, tfjsonpath.New("spec")),
				plancheck.ExpectUnknownValue(addr, tfjsonpath.New("spec_sha256")),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(addr, tfjsonpath.New("spec"),
					knownvalue.StringRegexp(regexp.MustCompile(`"image":"python:3\.12-slim".*"env":\{"HOST":"[0-9a-f-]{36}","LANG":"C\.UTF-8"\}`))),
			},
		}},
	})
}

// A value a rule decides on (here the backend) leaves the check to apply:
// the plan passes (with a warning the test framework cannot see), apply
// refuses before anything is stored.
func TestAccTemplate_UnknownBackendPlansThenApplyRefuses(t *testing.T) {
	config := providerBlock("") + `
resource "terraform_data" "backend" {
  input = "docker://"
}

resource "sandboxio_template" "test" {
  name    = "python"
  image   = "python:3.12-slim"
  backend = terraform_data.backend.output
  network = { allow = ["10.0.0.0/8"] }
}
`
	unitTest(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config:             config,
			PlanOnly:           true,
			ExpectNonEmptyPlan: true,
		}, {
			Config:      config,
			ExpectError: expectRefusal("CapabilityNotSupported", "SBX-NET-003"),
		}},
	})
}

// A team rule that reads the image is left to apply while the image is
// unknown (the placeholder would not be an approved image); the team rules
// that do not read it, and the built-in rules, still decide at plan.
func TestAccTeamPolicies_UnknownImage(t *testing.T) {
	ex := examplesDir(t)
	template := func(memory int, extra string) string {
		return teamProvider(ex, "") + unknownSource + fmt.Sprintf(`
resource "sandboxio_template" "t" {
  name      = "t"
  image     = terraform_data.later.output
  labels    = { team = "agents" }
  resources = { memory_mb = %d }
%s
}
`, memory, extra)
	}
	unitTest(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config:             template(512, ""),
			PlanOnly:           true,
			ExpectNonEmptyPlan: true,
		}},
	})
	runRefusals(t, []refusal{
		{"memory rule reads no image", template(4096, ""), "ConfigurationError", "TEAM-MEM-001"},
		{"built-in rule", template(512, `  network = { allow = ["151.101.0.0/16"] }`), "CapabilityNotSupported", "SBX-NET-003"},
	})
}
