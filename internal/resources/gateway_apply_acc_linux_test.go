package resources_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/testing/netns"
)

// labResolver is the gateway's resolver in the apply tests: a DNS server in
// a network namespace the test makes, so that no name is asked of anyone
// else when apply resolves the listed names.
var labResolver = netip.MustParseAddr("198.18.1.53")

func gatewayLab(t *testing.T) *netns.DNS {
	lab := netns.New(t, labResolver)
	return lab.DNSServer(t, labResolver)
}

// TestAccTemplate_EgressGatewayApply applies the gateway template, which
// runs the gateway's proof on the live daemon and resolves the listed
// names. (The proof moves threads into the probe sandbox's namespace; it
// once ended one that had started the Terraform CLI, which then died of
// terraform-exec's parent-death signal: see nsthread.)
func TestAccTemplate_EgressGatewayApply(t *testing.T) {
	requireDocker(t)
	addr := "sandboxio_template.agent"
	dsn := "docker://?egress=gateway&resolver=" + netip.AddrPortFrom(labResolver, 53).String()
	specRe := regexp.MustCompile(`"backend":"docker://\?egress=gateway&resolver=198.18.1.53%3A53".*"allow":\["pypi.org","\*.pythonhosted.org","198.51.100.0/24:443","\[2001:db8::10\]:443"\]`)
	resource.Test(t, resource.TestCase{
		PreCheck: func() {
			testAccPreCheck(t)
			gatewayLab(t).Set("pypi.org", netns.Static(netip.MustParseAddr("198.51.100.7")))
		},
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: gatewayTemplate(dsn),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectKnownValue(addr, tfjsonpath.New("spec"), knownvalue.StringRegexp(specRe)),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				// The DSN as the provider writes it back: canonical, its query escaped.
				statecheck.ExpectKnownValue(addr, tfjsonpath.New("backend"), knownvalue.StringExact("docker://?egress=gateway&resolver=198.18.1.53%3A53")),
			},
		}},
	})
}

// TestAccTemplate_EgressGatewayApplyRefusesTheUnreachable: apply refuses,
// on the live host, an entry the gateway would never forward to, which the
// plan cannot know: one of the host's own addresses, and a name that
// resolves only to it.
func TestAccTemplate_EgressGatewayApplyRefusesTheUnreachable(t *testing.T) {
	requireDocker(t)
	dsn := "docker://?egress=gateway&resolver=" + netip.AddrPortFrom(labResolver, 53).String()
	resource.Test(t, resource.TestCase{
		PreCheck: func() {
			testAccPreCheck(t)
			gatewayLab(t).Set("host.test", netns.Static(netns.Host4))
		},
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config:      gatewayTemplateAllowing(dsn, `["host.test"]`),
			ExpectError: regexp.MustCompile(`(?s)ConfigurationError.*"host.test":\s+it\s+resolves\s+only\s+to\s+198.18.0.1.*Rule: SBX-NET-014`),
		}, {
			Config:      gatewayTemplateAllowing(dsn, `["`+netns.Host4.String()+`:443"]`),
			ExpectError: regexp.MustCompile(`(?s)ConfigurationError.*"198.18.0.1:443":\s+it\s+is\s+198.18.0.1.*Rule: SBX-NET-014`),
		}},
	})
}

// TestAccTemplate_BrokeredSecretsApply: a template with a brokered secret
// applies on the gateway (apply's live checks, the gateway's proof), with
// the value in the environment of terraform and the provider, as a careless
// CI would have it, and TF_LOG=trace: the value is in neither the plan, the
// state nor the log.
func TestAccTemplate_BrokeredSecretsApply(t *testing.T) {
	requireDocker(t)
	const canary = "sk-tf-brokered-canary-5e1d7c93"
	t.Setenv("API_KEY", canary)
	t.Setenv("TF_LOG", "trace")
	logPath := filepath.Join(t.TempDir(), "tf.log")
	t.Setenv("TF_LOG_PATH", logPath)
	dsn := "docker://?egress=gateway&resolver=" + netip.AddrPortFrom(labResolver, 53).String()
	config := providerBlock(dsn) + `resource "sandboxio_template" "agent" {
  name    = "agent"
  image   = "sandboxio/busybox:local"
  network = { allow = ["api.test"] }
  brokered_secrets = {
    API_KEY = { hosts = ["api.test"], header = "Authorization", format = "Bearer %s" }
  }
}
`
	resource.Test(t, resource.TestCase{
		PreCheck: func() {
			testAccPreCheck(t)
			gatewayLab(t).Set("api.test", netns.Static(netip.MustParseAddr("198.51.100.7")))
		},
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: config,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectKnownValue("sandboxio_template.agent", tfjsonpath.New("spec"),
					knownvalue.StringRegexp(regexp.MustCompile(regexp.QuoteMeta(`"brokered_secrets":{"API_KEY":{"hosts":["api.test"],"header":"Authorization","format":"Bearer %s"}}`)))),
				noCanaryInPlan{canary},
			}},
			ConfigStateChecks: []statecheck.StateCheck{noCanaryInState{canary}},
		}},
	})
	log, err := os.ReadFile(logPath)
	if err != nil || len(log) == 0 {
		t.Fatalf("no TF_LOG output: %v", err)
	}
	if strings.Contains(string(log), canary) {
		t.Fatal("the brokered secret's value is in TF_LOG=trace")
	}
}

type noCanaryInPlan struct{ canary string }

func (c noCanaryInPlan) CheckPlan(_ context.Context, req plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	resp.Error = noCanary("plan JSON", req.Plan, c.canary)
}

type noCanaryInState struct{ canary string }

func (c noCanaryInState) CheckState(_ context.Context, req statecheck.CheckStateRequest, resp *statecheck.CheckStateResponse) {
	resp.Error = noCanary("state", req.State, c.canary)
}

// noCanary says whether v, encoded as JSON, holds canary.
func noCanary(what string, v any, canary string) error {
	b, err := json.Marshal(v)
	switch {
	case err != nil:
		return fmt.Errorf("the %s did not encode: %w", what, err)
	case strings.Contains(string(b), canary):
		return fmt.Errorf("the %s holds the value", what)
	}
	return nil
}
