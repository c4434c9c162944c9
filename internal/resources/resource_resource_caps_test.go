package resources_test

import (
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

func resourceCapsConfig(defaultBackend, body string) string {
	return providerBlock(defaultBackend) + fmt.Sprintf("resource \"sandboxio_resource_caps\" \"test\" {\n%s\n}\n", body)
}

func capsCheck(cpu float64, memory, disk, pids int64) knownvalue.Check { //nolint:unparam // one argument per cap, like the resource
	return knownvalue.ObjectExact(map[string]knownvalue.Check{
		"cpu":       knownvalue.Float64Exact(cpu),
		"memory_mb": knownvalue.Int64Exact(memory),
		"disk_mb":   knownvalue.Int64Exact(disk),
		"pids":      knownvalue.Int64Exact(pids),
	})
}

func TestAccResourceCaps_DefaultsFilledIn(t *testing.T) {
	addr := "sandboxio_resource_caps.test"
	unitTest(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: resourceCapsConfig("docker://", `  memory_mb = 1024`),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectKnownValue(addr, tfjsonpath.New("caps"), capsCheck(1, 1024, 1024, 256)),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(addr, tfjsonpath.New("caps"), capsCheck(1, 1024, 1024, 256)),
				statecheck.ExpectKnownValue(addr, tfjsonpath.New("pids"), knownvalue.Int64Exact(256)),
			},
		}, {
			// Raising a cap is an in-place update with the new caps known at plan.
			Config: resourceCapsConfig("docker://", "  memory_mb = 2048\n  cpu = 2.5\n  pids = 512"),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
				plancheck.ExpectKnownValue(addr, tfjsonpath.New("caps"), capsCheck(2.5, 2048, 1024, 512)),
			}},
		}, {
			ResourceName:            addr,
			ImportState:             true,
			ImportStateId:           `{"memory_mb":2048,"cpu":2.5,"pids":512}`,
			ImportStateVerify:       true,
			ImportStateVerifyIgnore: []string{"backend"},
		}},
	})
}

func TestAccResourceCaps_DefaultCapsOnE2B(t *testing.T) {
	unitTest(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: resourceCapsConfig("e2b://", ""),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("sandboxio_resource_caps.test", tfjsonpath.New("caps"), capsCheck(1, 512, 1024, 256)),
			},
		}},
	})
}

func TestAccResourceCaps_Refused(t *testing.T) {
	runRefusals(t, []refusal{
		{"zero memory", resourceCapsConfig("docker://", `  memory_mb = 0`), "ConfigurationError", "SBX-RES-001"},
		{"negative pids", resourceCapsConfig("", `  pids = -1`), "ConfigurationError", "SBX-RES-001"},
		{"zero cpu", resourceCapsConfig("", `  cpu = 0`), "ConfigurationError", "SBX-RES-001"},
		{"cpu below the minimum", resourceCapsConfig("", `  cpu = 0.001`), "ConfigurationError", "SBX-RES-001"},
		{"disk above the maximum", resourceCapsConfig("docker://", `  disk_mb = 1073741825`), "ConfigurationError", "SBX-RES-001"},
		{"caps on e2b template", resourceCapsConfig("e2b://", `  memory_mb = 4096`), "ConfigurationError", "SBX-RES-002"},
		{"pids on modal", resourceCapsConfig("modal://agents", `  pids = 64`), "CapabilityNotSupported", "SBX-RES-004"},
		{"memory not 2048 MB per vCPU on vercel", resourceCapsConfig("vercel://acme/agents", `  memory_mb = 4096`), "CapabilityNotSupported", "SBX-RES-007"},
		{"disk on vercel", resourceCapsConfig("vercel://acme/agents", "  memory_mb = 2048\n  disk_mb = 4096"), "CapabilityNotSupported", "SBX-RES-004"},
		{"pids above docker ceiling", resourceCapsConfig("docker://", `  pids = 1000000`), "CapabilityNotSupported", "SBX-RES-005"},
	})
}
