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

func networkPolicyConfig(defaultBackend, body string) string {
	return providerBlock(defaultBackend) + fmt.Sprintf("resource \"sandboxio_network_policy\" \"test\" {\n%s\n}\n", body)
}

func TestAccNetworkPolicy_DefaultDeny(t *testing.T) {
	addr := "sandboxio_network_policy.test"
	wantPolicy := knownvalue.ObjectExact(map[string]knownvalue.Check{
		"egress": knownvalue.StringExact("deny"),
		"allow":  knownvalue.ListExact([]knownvalue.Check{}),
	})
	unitTest(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: networkPolicyConfig("docker://", ""),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectKnownValue(addr, tfjsonpath.New("policy"), wantPolicy),
				plancheck.ExpectKnownValue(addr, tfjsonpath.New("id"), knownvalue.StringRegexp(regexp.MustCompile(`^np-[0-9a-f]{16}$`))),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(addr, tfjsonpath.New("egress"), knownvalue.StringExact("deny")),
				statecheck.ExpectKnownValue(addr, tfjsonpath.New("policy"), wantPolicy),
			},
		}, {
			ResourceName:      addr,
			ImportState:       true,
			ImportStateId:     `{"egress":"deny","allow":[]}`,
			ImportStateVerify: true,
			// backend is configuration only: an imported policy has none.
			ImportStateVerifyIgnore: []string{"backend"},
		}},
	})
}

func TestAccNetworkPolicy_AllowListOnE2B(t *testing.T) {
	addr := "sandboxio_network_policy.test"
	unitTest(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: networkPolicyConfig("", `  backend = "e2b://"
  allow   = ["151.101.0.0/16", "pypi.org", "10.1.2.3"]`),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectKnownValue(addr, tfjsonpath.New("policy").AtMapKey("allow"), knownvalue.ListExact([]knownvalue.Check{
					knownvalue.StringExact("151.101.0.0/16"), knownvalue.StringExact("pypi.org"), knownvalue.StringExact("10.1.2.3"),
				})),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(addr, tfjsonpath.New("policy").AtMapKey("egress"), knownvalue.StringExact("deny")),
			},
		}},
	})
}

func TestAccNetworkPolicy_OpenEgressAccepted(t *testing.T) {
	unitTest(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: networkPolicyConfig("docker://", `  egress = "allow"`),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("sandboxio_network_policy.test", tfjsonpath.New("policy").AtMapKey("egress"), knownvalue.StringExact("allow")),
			},
		}},
	})
}

func TestAccNetworkPolicy_Refused(t *testing.T) {
	runRefusals(t, []refusal{
		{"learn on e2b", networkPolicyConfig("e2b://", `  egress = "learn"`), "CapabilityNotSupported", "SBX-NET-001"},
		{"learn on runsc", templateConfig("docker://", "  runtime = \"runsc\"\n  network = { egress = \"learn\" }"), "CapabilityNotSupported", "SBX-NET-001"},
		{"unknown egress", networkPolicyConfig("", `  egress = "open"`), "ConfigurationError", "SBX-NET-002"},
		{"allow list on docker default", networkPolicyConfig("docker://", `  allow = ["151.101.0.0/16"]`), "CapabilityNotSupported", "SBX-NET-003"},
		{"allow list on daytona", networkPolicyConfig("", "  backend = \"daytona://\"\n  allow = [\"10.0.0.0/8\"]"), "CapabilityNotSupported", "SBX-NET-003"},
		{"allow with open egress", networkPolicyConfig("e2b://", "  egress = \"allow\"\n  allow = [\"10.0.0.0/8\"]"), "ConfigurationError", "SBX-NET-004"},
		{"domain on modal", networkPolicyConfig("modal://agents", `  allow = ["pypi.org"]`), "CapabilityNotSupported", "SBX-NET-005"},
		{"malformed entry", networkPolicyConfig("e2b://", `  allow = ["not a host!"]`), "ConfigurationError", "SBX-NET-006"},
		{"credential in backend", networkPolicyConfig("", `  backend = "e2b://?api_key=abc"`), "ConfigurationError", "SBX-DSN-003"},
	})
}

// Learning is accepted where the backend observes blocked egress (Docker
// with runc), with a warning that it lets nothing out.
func TestAccNetworkPolicy_LearnOnDocker(t *testing.T) {
	unitTest(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			// Plan only: an apply would look for the image on the daemon.
			Config:             templateConfig("docker://", "  network = { egress = \"learn\" }"),
			PlanOnly:           true,
			ExpectNonEmptyPlan: true,
		}},
	})
}
