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

const brokerGateway = "docker://?egress=gateway"

// brokeredTemplate is a template on backend with api.github.com and
// *.example.com allowed and the given brokered_secrets map.
func brokeredTemplate(backend, secrets string) string {
	return templateConfig(backend, fmt.Sprintf(`  network = { allow = ["api.github.com", "*.example.com"] }
  brokered_secrets = %s`, secrets))
}

// brokered is one brokered secret, GITHUB_TOKEN unless name says otherwise.
func brokered(name, hosts, header, format string) string {
	body := fmt.Sprintf(`{ hosts = %s, header = %q`, hosts, header)
	if format != "" {
		body += fmt.Sprintf(`, format = %q`, format)
	}
	return fmt.Sprintf(`{ %s = %s } }`, name, body)
}

// TestAccTemplate_BrokeredSecrets: on the gateway a brokered secret plans,
// its format defaults to "%s", and the spec carries names, hosts (sorted),
// header and format, never a value.
func TestAccTemplate_BrokeredSecrets(t *testing.T) {
	addr := "sandboxio_template.test"
	config := brokeredTemplate(brokerGateway, `{
    GITHUB_TOKEN = { hosts = ["api.github.com"], header = "Authorization", format = "Bearer %s" }
    DOCS_KEY     = { hosts = ["b.example.com", "a.example.com"], header = "X-Api-Key" }
  }`)
	spec := regexp.MustCompile(regexp.QuoteMeta(`"secret_names":[],"brokered_secrets":{` +
		`"DOCS_KEY":{"hosts":["a.example.com","b.example.com"],"header":"X-Api-Key","format":"%s"},` +
		`"GITHUB_TOKEN":{"hosts":["api.github.com"],"header":"Authorization","format":"Bearer %s"}},"labels"`))
	unitTest(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config:             config,
			PlanOnly:           true,
			ExpectNonEmptyPlan: true,
			ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPreRefresh: []plancheck.PlanCheck{
				plancheck.ExpectKnownValue(addr, tfjsonpath.New("spec"), knownvalue.StringRegexp(spec)),
				plancheck.ExpectKnownValue(addr, tfjsonpath.New("brokered_secrets").AtMapKey("DOCS_KEY").AtMapKey("format"),
					knownvalue.StringExact("%s")),
			}},
		}},
	})
}

// Every plan refusal of brokered secrets, through the real Terraform CLI.
func TestAccTemplate_BrokeredSecretsRefusals(t *testing.T) {
	good := brokered("GITHUB_TOKEN", `["api.github.com"]`, "Authorization", "Bearer %s")
	runRefusals(t, []refusal{
		{"no broker on plain docker", brokeredTemplate("docker://", good), "CapabilityNotSupported", "SBX-SEC-005"},
		{"no broker on e2b", templateConfig("e2b://", "  brokered_secrets = "+good), "CapabilityNotSupported", "SBX-SEC-005"},
		{"no broker on runsc", brokeredTemplate(brokerGateway+"&runtime=runsc", good), "CapabilityNotSupported", "SBX-SEC-005"},
		{"address host", brokeredTemplate(brokerGateway, brokered("GITHUB_TOKEN", `["198.51.100.7"]`, "Authorization", "")),
			"ConfigurationError", "SBX-SEC-006"},
		{"wildcard host", brokeredTemplate(brokerGateway, brokered("GITHUB_TOKEN", `["*.example.com"]`, "Authorization", "")),
			"ConfigurationError", "SBX-SEC-006"},
		{"no hosts", brokeredTemplate(brokerGateway, brokered("GITHUB_TOKEN", `[]`, "Authorization", "")),
			"ConfigurationError", "SBX-SEC-006"},
		{"host off the allow list", brokeredTemplate(brokerGateway, brokered("GITHUB_TOKEN", `["evil.example.org"]`, "Authorization", "")),
			"ConfigurationError", "SBX-SEC-007"},
		{"also a secret name", templateConfig(brokerGateway, `  network = { allow = ["api.github.com"] }
  secret_names = ["GITHUB_TOKEN"]
  brokered_secrets = `+good), "ConfigurationError", "SBX-SEC-008"},
		{"also in env", templateConfig(brokerGateway, `  network = { allow = ["api.github.com"] }
  env = { GITHUB_TOKEN = "x" }
  brokered_secrets = `+good), "ConfigurationError", "SBX-SEC-008"},
		{"header not a token", brokeredTemplate(brokerGateway, brokered("GITHUB_TOKEN", `["api.github.com"]`, "Authorization: x", "")),
			"ConfigurationError", "SBX-SEC-009"},
		{"header Host", brokeredTemplate(brokerGateway, brokered("GITHUB_TOKEN", `["api.github.com"]`, "Host", "")),
			"ConfigurationError", "SBX-SEC-009"},
		{"header Content-Length", brokeredTemplate(brokerGateway, brokered("GITHUB_TOKEN", `["api.github.com"]`, "content-length", "")),
			"ConfigurationError", "SBX-SEC-009"},
		{"format without %s", brokeredTemplate(brokerGateway, brokered("GITHUB_TOKEN", `["api.github.com"]`, "Authorization", "Bearer")),
			"ConfigurationError", "SBX-SEC-010"},
		{"format with a line break", brokeredTemplate(brokerGateway, brokered("GITHUB_TOKEN", `["api.github.com"]`, "Authorization", "Bearer %s\r\nX-Leak: 1")),
			"ConfigurationError", "SBX-SEC-010"},
		{"name not a variable", brokeredTemplate(brokerGateway, brokered(`"OPENAI-KEY"`, `["api.github.com"]`, "Authorization", "")),
			"ConfigurationError", "SBX-SEC-011"},
		{"with a warm pool", templateConfig(brokerGateway, `  network = { allow = ["api.github.com"] }
  warm_pool = { size = 2 }
  brokered_secrets = `+good), "CapabilityNotSupported", "SBX-SEC-012"},
	})
}

// `sandboxio policy check` on a plan's JSON decides on brokered secrets as
// `terraform plan` does: accepted on the gateway, refused (for the same
// rule) where no broker runs or a host is off the allow list.
func TestAccPolicyCheckDecidesAsPlan_BrokeredSecrets(t *testing.T) {
	secret := map[string]any{"GITHUB_TOKEN": map[string]any{"hosts": []any{"api.github.com"}, "header": "Authorization", "format": "Bearer %s"}}
	good := brokered("GITHUB_TOKEN", `["api.github.com"]`, "Authorization", "Bearer %s")
	for _, tc := range []struct {
		name, config, twin string
		want               decision
	}{
		{name: "on the gateway", config: brokeredTemplate(brokerGateway, good), want: decision{"accepted", nil}},
		{name: "on plain docker", config: templateConfig("docker://", "  brokered_secrets = "+good),
			twin: templateConfig("docker://", ""), want: decision{"refused", []string{"SBX-SEC-005", "SBX-SEC-007"}}},
		{name: "host off the allow list", config: templateConfig(brokerGateway, "  brokered_secrets = "+good),
			twin: templateConfig(brokerGateway, ""), want: decision{"refused", []string{"SBX-SEC-007"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			samePlanAndCheck(t, tc.config, tc.twin, func(after map[string]any) { after["brokered_secrets"] = secret }, tc.want)
		})
	}
}

// A hand-written tenant spec with brokered secrets is refused where no
// broker runs, as the template would have been (the spec is checked as the
// run-time helper checks it).
func TestAccTenantSandbox_BrokeredSecretsWithoutBroker(t *testing.T) {
	planRefused(t, handSpec(map[string]string{
		"brokered_secrets": `{ GITHUB_TOKEN = { hosts = ["api.github.com"], header = "Authorization", format = "%s" } }`,
	}), "CapabilityNotSupported", "SBX-SEC-005")
}

// The tenant sandbox's spec keeps the brokered secrets of its template
// spec, normalised (hosts sorted, the default format filled in).
func TestAccTenantSandbox_BrokeredSecretsCarried(t *testing.T) {
	config := handSpec(map[string]string{
		"backend":          `"docker://?egress=gateway"`,
		"network":          `{ egress = "deny", allow = ["api.github.com", "uploads.github.com"] }`,
		"brokered_secrets": `{ GITHUB_TOKEN = { hosts = ["uploads.github.com", "api.github.com"], header = "Authorization", format = "" } }`,
	})
	want := regexp.MustCompile(regexp.QuoteMeta(`"secret_names":[],"brokered_secrets":{"GITHUB_TOKEN":{"hosts":["api.github.com","uploads.github.com"],"header":"Authorization","format":"%s"}},"labels"`))
	unitTest(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: config,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("data.sandboxio_tenant_sandbox.test", tfjsonpath.New("spec"), knownvalue.StringRegexp(want)),
			},
		}},
	})
}
