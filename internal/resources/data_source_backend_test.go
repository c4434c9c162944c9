package resources_test

import (
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

func backendConfig(body string) string {
	return providerBlock("docker://") + fmt.Sprintf("data \"sandboxio_backend\" \"test\" {\n%s\n}\n", body)
}

func TestAccBackendDataSource_Capabilities(t *testing.T) {
	addr := "data.sandboxio_backend.test"
	cases := []struct {
		name, body          string
		key, tier, capsMode string
		allowlist, broker   bool
		credentialEnv       []string
	}{
		{"docker default", "", "docker/runc", "CONTAINER", "per_sandbox", false, false, nil},
		{"docker gateway", `  dsn = "docker://?egress=gateway"`, "docker/runc+gateway", "CONTAINER", "per_sandbox", true, true, nil},
		{"docker runsc", `  runtime = "runsc"`, "docker/runsc", "GVISOR", "per_sandbox", false, false, nil},
		{"e2b", `  dsn = "e2b://"`, "e2b", "MICROVM", "template", true, false, []string{"E2B_API_KEY"}},
		{"modal", `  dsn = "modal://agents"`, "modal", "GVISOR", "per_sandbox", true, false, []string{"MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET"}},
		{"daytona", `  dsn = "daytona://"`, "daytona", "UNKNOWN", "per_sandbox", false, false, []string{"DAYTONA_API_KEY"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checks := []statecheck.StateCheck{
				statecheck.ExpectKnownValue(addr, tfjsonpath.New("capability_key"), knownvalue.StringExact(tc.key)),
				statecheck.ExpectKnownValue(addr, tfjsonpath.New("isolation_tier"), knownvalue.StringExact(tc.tier)),
				statecheck.ExpectKnownValue(addr, tfjsonpath.New("caps_mode"), knownvalue.StringExact(tc.capsMode)),
				statecheck.ExpectKnownValue(addr, tfjsonpath.New("allowlist"), knownvalue.Bool(tc.allowlist)),
				statecheck.ExpectKnownValue(addr, tfjsonpath.New("egress_deny"), knownvalue.Bool(true)),
				statecheck.ExpectKnownValue(addr, tfjsonpath.New("secret_broker"), knownvalue.Bool(tc.broker)),
				statecheck.ExpectKnownValue(addr, tfjsonpath.New("secret_broker_note"), knownvalue.NotNull()),
			}
			for _, env := range tc.credentialEnv {
				checks = append(checks, statecheck.ExpectKnownValue(addr, tfjsonpath.New("credential_env"),
					knownvalue.ListPartial(map[int]knownvalue.Check{indexOf(tc.credentialEnv, env): knownvalue.StringExact(env)})))
			}
			unitTest(t, resource.TestCase{
				ProtoV6ProviderFactories: protoV6ProviderFactories,
				Steps:                    []resource.TestStep{{Config: backendConfig(tc.body), ConfigStateChecks: checks}},
			})
		})
	}
}

func TestAccBackendDataSource_Refused(t *testing.T) {
	runRefusals(t, []refusal{
		{"credential", backendConfig(`  dsn = "vercel://acme/agents?token=abc"`), "ConfigurationError", "SBX-DSN-003"},
		{"unknown runtime", backendConfig(`  runtime = "youki"`), "ConfigurationError", "SBX-ISO-005"},
	})
}

func indexOf(xs []string, x string) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}
