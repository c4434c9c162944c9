package resources_test

import (
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

// A value the provider would have planned differently from the
// configuration (an empty egress normalized to deny, a cpu rounded to a
// float64) used to end in Terraform's "Provider produced invalid plan"
// instead of a rule's refusal, and a cpu just under the minimum rounded into
// the range and passed the range rule. Each is now refused at plan by the
// rule that governs it, with its class and ID.
func TestAccPlanValidity_RuleRefusesFirst(t *testing.T) {
	template := func(attrs string) string {
		return providerBlock("docker://") + `resource "sandboxio_template" "t" {
  name  = "t"
  image = "python:3.12-slim"
  ` + attrs + `
}
`
	}
	caps := func(cpu string) string {
		return providerBlock("docker://") + `resource "sandboxio_resource_caps" "c" { cpu = ` + cpu + " }\n"
	}
	runRefusals(t, []refusal{
		{"network_policy empty egress", providerBlock("docker://") + `resource "sandboxio_network_policy" "p" { egress = "" }` + "\n",
			"ConfigurationError", "SBX-NET-002"},
		{"template empty egress", template(`network = { egress = "" }`), "ConfigurationError", "SBX-NET-002"},
		{"caps cpu tiny", caps("0.0000001"), "ConfigurationError", "SBX-RES-001"},
		{"caps cpu rounds up to the minimum", caps("0.00999999999999999999999"), "ConfigurationError", "SBX-RES-001"},
		{"caps cpu more digits than a float64", caps("1.00000000000000000001"), "ConfigurationError", "SBX-RES-001"},
		{"template cpu rounds up to the minimum", template(`resources = { cpu = 0.00999999999999999999999 }`), "ConfigurationError", "SBX-RES-001"},
		{"template cpu more digits than a float64", template(`resources = { cpu = 1.00000000000000000001 }`), "ConfigurationError", "SBX-RES-001"},
	})
}

// Values a float64 holds exactly as written still plan as written.
func TestAccPlanValidity_ExactCPUAccepted(t *testing.T) {
	unitTest(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: providerBlock("docker://") + `resource "sandboxio_resource_caps" "c" { cpu = 0.01 }
resource "sandboxio_resource_caps" "d" { cpu = 0.1 }
resource "sandboxio_network_policy" "p" {}
`,
			Check: resource.ComposeTestCheckFunc(
				resource.TestCheckResourceAttr("sandboxio_resource_caps.c", "cpu", "0.01"),
				resource.TestCheckResourceAttr("sandboxio_resource_caps.d", "caps.cpu", "0.1"),
				resource.TestCheckResourceAttr("sandboxio_network_policy.p", "egress", "deny"),
			),
		}},
	})
}
