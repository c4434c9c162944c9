package resources_test

import (
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// A configuration checked only at apply (its backend unknown at plan) that
// draws warnings (open egress) applies through Terraform: apply reports the
// warnings beside the state (terraform-plugin-testing cannot assert
// warnings; TestApply_DeferredCheckReportsWarnings checks that they are
// there).
func TestAccDeferredApply_WarningsDoNotStopApply(t *testing.T) {
	unitTest(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: providerBlock("") + `
resource "terraform_data" "backend" {
  input = "e2b://"
}

resource "sandboxio_network_policy" "open" {
  egress  = "allow"
  backend = terraform_data.backend.output
}

resource "sandboxio_template" "test" {
  name    = "python"
  image   = "base"
  backend = terraform_data.backend.output
  network = { egress = "allow" }
}
`,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("sandboxio_network_policy.open", tfjsonpath.New("policy").AtMapKey("egress"), knownvalue.StringExact("allow")),
				statecheck.ExpectKnownValue("sandboxio_template.test", tfjsonpath.New("network").AtMapKey("egress"), knownvalue.StringExact("allow")),
			},
		}},
	})
}
