package resources_test

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

func tenantSandboxConfig(tenant, session, extra string) string {
	return providerBlock("e2b://") + fmt.Sprintf(`
resource "sandboxio_template" "python" {
  name   = "python"
  image  = "code-interpreter-v1"
  labels = { team = "agents" }
}

data "sandboxio_tenant_sandbox" "test" {
  template_spec = sandboxio_template.python.spec
  tenant_id     = %q
  session_id    = %q
%s
}
`, tenant, session, extra)
}

func TestAccTenantSandboxDataSource_LabelsAndSpec(t *testing.T) {
	addr := "data.sandboxio_tenant_sandbox.test"
	unitTest(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: tenantSandboxConfig("acme", "s-42", `  extra_labels = { run = "nightly" }`),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(addr, tfjsonpath.New("labels"), knownvalue.MapExact(map[string]knownvalue.Check{
					"team":                 knownvalue.StringExact("agents"),
					"run":                  knownvalue.StringExact("nightly"),
					"sandboxio.tenant_id":  knownvalue.StringExact("acme"),
					"sandboxio.session_id": knownvalue.StringExact("s-42"),
					"sandboxio.template":   knownvalue.StringExact("python"),
				})),
				statecheck.ExpectKnownValue(addr, tfjsonpath.New("spec"), knownvalue.StringRegexp(
					regexp.MustCompile(`"tenant_id":"acme","session_id":"s-42"\}$`))),
				statecheck.ExpectKnownValue(addr, tfjsonpath.New("spec_sha256"), knownvalue.StringRegexp(regexp.MustCompile(`^[0-9a-f]{64}$`))),
			},
		}},
	})
}

func TestAccTenantSandboxDataSource_Refused(t *testing.T) {
	runRefusals(t, []refusal{
		{"empty tenant", tenantSandboxConfig("", "s-1", ""), "ConfigurationError", "SBX-TEN-001"},
		{"malformed tenant", tenantSandboxConfig("acme corp", "s-1", ""), "ConfigurationError", "SBX-TEN-001"},
		{"empty session", tenantSandboxConfig("acme", "", ""), "ConfigurationError", "SBX-TEN-002"},
		{"reserved extra label", tenantSandboxConfig("acme", "s-1", `  extra_labels = { "sandboxio.tenant_id" = "other" }`), "ConfigurationError", "SBX-LBL-001"},
		{"not a spec", providerBlock("") + `
data "sandboxio_tenant_sandbox" "test" {
  template_spec = "{\"spec_version\": 1, \"surprise\": true}"
  tenant_id     = "acme"
  session_id    = "s-1"
}
`, "ConfigurationError", "SBX-SPC-001"},
	})
}

// A spec edited by hand is checked like a template: a Docker allow list
// smuggled into it is refused.
func TestAccTenantSandboxDataSource_TamperedSpecRefused(t *testing.T) {
	spec := `{"spec_version":1,"name":"python","backend":"docker://","image":"img","runtime":"runc","isolation_tier":"CONTAINER",` +
		`"network":{"egress":"deny","allow":["10.0.0.0/8"]},"resources":{"cpu":1,"memory_mb":512,"disk_mb":1024,"pids":256},` +
		`"timeout_seconds":300,"lifetime_seconds":300,"env":{},"secret_names":[],"labels":{}}`
	runRefusals(t, []refusal{{"docker allow list", providerBlock("") + fmt.Sprintf(`
data "sandboxio_tenant_sandbox" "test" {
  template_spec = %q
  tenant_id     = "acme"
  session_id    = "s-1"
}
`, spec), "CapabilityNotSupported", "SBX-NET-003"}})
}

// A reserved label edited into a hand-written template spec is refused at
// plan, not silently overwritten by the one the data source sets.
func TestAccTenantSandboxDataSource_ReservedLabelInSpecRefused(t *testing.T) {
	spec := `{"spec_version":1,"name":"python","backend":"docker://","image":"img","runtime":"runc","isolation_tier":"CONTAINER",` +
		`"network":{"egress":"deny","allow":[]},"resources":{"cpu":1,"memory_mb":512,"disk_mb":1024,"pids":256},` +
		`"timeout_seconds":300,"lifetime_seconds":300,"env":{},"secret_names":[],"labels":{"sandboxio.tenant_id":"globex"}}`
	runRefusals(t, []refusal{{"reserved label in the template spec", providerBlock("") + fmt.Sprintf(`
data "sandboxio_tenant_sandbox" "test" {
  template_spec = %q
  tenant_id     = "acme"
  session_id    = "s-1"
}
`, spec), "ConfigurationError", "SBX-LBL-001"}})
}
