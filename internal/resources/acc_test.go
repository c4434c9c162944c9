package resources_test

import (
	"fmt"
	"os"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/provider"
	dockertest "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/docker"
)

// protoV6ProviderFactories serve the provider in-process to the real
// Terraform CLI that terraform-plugin-testing drives.
var protoV6ProviderFactories = map[string]func() (tfprotov6.ProviderServer, error){
	"sandboxio": providerserver.NewProtocol6WithError(provider.New("test")()),
}

// unitTest runs a test case that needs no Docker daemon (plans, refusals,
// data sources, applies on backends without live checks) as a unit test,
// as terraform-provider-tls does: against the real Terraform CLI, without
// TF_ACC, so that go test ./... runs it. Cases that apply a Docker template
// check the live daemon and stay acceptance tests (requireDocker).
func unitTest(t *testing.T, c resource.TestCase) {
	t.Helper()
	t.Parallel()
	resource.UnitTest(t, c)
}

// testAccPreCheck runs before each acceptance test (one that needs Docker).
func testAccPreCheck(t *testing.T) {
	t.Helper()
	if os.Getenv("TF_ACC") == "" {
		// resource.Test itself skips; say why once, visibly.
		t.Log("TF_ACC is not set: acceptance tests skipped (make test sets it)")
	}
}

// localImage is built on the daemon from a static busybox, no registry needed.
const localImage = "sandboxio/busybox:local"

// requireDocker makes sure a daemon answers and holds localImage: applying a
// Docker template checks the live daemon. Without a daemon the test skips,
// and says why, unless SANDBOXIO_REQUIRE_DOCKER=1 (CI), where it fails.
func requireDocker(t *testing.T) {
	t.Helper()
	if os.Getenv("TF_ACC") == "" {
		return // resource.Test skips the test itself
	}
	dockertest.Need(t)
}

// providerBlock renders a provider block; an empty backend omits default_backend.
func providerBlock(defaultBackend string) string {
	if defaultBackend == "" {
		return `provider "sandboxio" {}` + "\n"
	}
	return fmt.Sprintf("provider \"sandboxio\" {\n  default_backend = %q\n}\n", defaultBackend)
}

// refusal is a configuration that plan must refuse with the given class and rule.
type refusal struct {
	name   string
	config string
	class  string
	rule   string
}

// expectRefusal matches a diagnostic naming the class and the rule.
func expectRefusal(class, rule string) *regexp.Regexp {
	return regexp.MustCompile(`(?s)` + regexp.QuoteMeta(class) + `.*Rule: ` + regexp.QuoteMeta(rule))
}

// runRefusals runs each refusal as its own plan-only test.
func runRefusals(t *testing.T, cases []refusal) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			unitTest(t, resource.TestCase{
				ProtoV6ProviderFactories: protoV6ProviderFactories,
				Steps: []resource.TestStep{{
					Config:      tc.config,
					PlanOnly:    true,
					ExpectError: expectRefusal(tc.class, tc.rule),
				}},
			})
		})
	}
}
