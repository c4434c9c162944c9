package resources_test

import (
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

const gatewayAllow = `["pypi.org", "*.pythonhosted.org", "198.51.100.0/24:443", "[2001:db8::10]:443"]`

func gatewayTemplate(backend string) string { return gatewayTemplateAllowing(backend, gatewayAllow) }

func gatewayTemplateAllowing(backend, allow string) string {
	return providerBlock(backend) + `resource "sandboxio_template" "agent" {
  name    = "agent"
  image   = "sandboxio/busybox:local"
  network = { allow = ` + allow + ` }
}
`
}

// TestAccTemplate_EgressGateway: with the real Terraform CLI, the plain
// Docker template with an allow list is refused at plan with a fix naming
// the gateway option; the gateway template plans and carries the mode in
// its spec.
func TestAccTemplate_EgressGateway(t *testing.T) {
	unitTest(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config:      gatewayTemplate("docker://"),
			PlanOnly:    true,
			ExpectError: regexp.MustCompile(`(?s)CapabilityNotSupported.*Rule: SBX-NET-003.*docker://\?egress=gateway`),
		}, {
			Config:             gatewayTemplate("docker://?egress=gateway"),
			PlanOnly:           true,
			ExpectNonEmptyPlan: true,
		}},
	})
}

// The gateway refuses what it cannot enforce, at plan: open egress, a warm
// pool, gVisor, an entry no sandbox may reach.
func TestAccTemplate_EgressGatewayRefusals(t *testing.T) {
	gw := "docker://?egress=gateway"
	runRefusals(t, []refusal{
		{"open egress", templateConfig(gw, `  network = { egress = "allow" }`), "CapabilityNotSupported", "SBX-NET-010"},
		{"runsc", templateConfig(gw, "  runtime = \"runsc\"\n  network = { allow = [\"pypi.org\"] }"), "CapabilityNotSupported", "SBX-NET-003"},
		{"metadata", templateConfig(gw, `  network = { allow = ["169.254.169.254:80"] }`), "ConfigurationError", "SBX-NET-014"},
		{"port on e2b", templateConfig("e2b://", `  network = { allow = ["198.51.100.7:443"] }`), "CapabilityNotSupported", "SBX-NET-013"},
	})
}
