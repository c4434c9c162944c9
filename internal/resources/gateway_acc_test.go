package resources_test

import (
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

const gatewayAllow = `["pypi.org", "*.pythonhosted.org", "198.51.100.0/24:443", "[2001:db8::10]:443"]`

func gatewayTemplate(backend string) string {
	return providerBlock(backend) + `resource "sandboxio_template" "agent" {
  name    = "agent"
  image   = "sandboxio/busybox:local"
  network = { allow = ` + gatewayAllow + ` }
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

// TestAccTemplate_EgressGatewayApply applies the gateway template, which
// runs the gateway's proof on the live daemon. (The proof moves threads into
// the probe sandbox's namespace; it once ended one that had started the
// Terraform CLI, which then died of terraform-exec's parent-death signal:
// see nsthread.)
func TestAccTemplate_EgressGatewayApply(t *testing.T) {
	requireDocker(t)
	addr := "sandboxio_template.agent"
	specRe := regexp.MustCompile(`"backend":"docker://\?egress=gateway".*"allow":\["pypi.org","\*.pythonhosted.org","198.51.100.0/24:443","\[2001:db8::10\]:443"\]`)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: gatewayTemplate("docker://?egress=gateway"),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectKnownValue(addr, tfjsonpath.New("spec"), knownvalue.StringRegexp(specRe)),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(addr, tfjsonpath.New("backend"), knownvalue.StringExact("docker://?egress=gateway")),
			},
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
