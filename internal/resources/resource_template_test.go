package resources_test

import (
	"fmt"
	"os"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	modalserver "github.com/sandboxio/terraform-provider-sandboxio/internal/fakes/modal"
)

// templateConfig renders one template with the given extra attributes.
func templateConfig(defaultBackend, body string) string {
	return providerBlock(defaultBackend) + fmt.Sprintf(`resource "sandboxio_template" "test" {
  name  = "python"
  image = "python:3.12-slim"
%s
}
`, body)
}

func TestAccTemplate_DockerGVisorFromPolicyResources(t *testing.T) {
	requireDocker(t)
	addr := "sandboxio_template.python"
	config := providerBlock("docker://") + `
resource "sandboxio_network_policy" "deny" {}

resource "sandboxio_resource_caps" "small" {
  memory_mb = 1024
}

resource "sandboxio_template" "python" {
  name              = "python"
  image             = "sandboxio/busybox:local"
  runtime           = "runsc"
  require_isolation = "GVISOR"
  network           = sandboxio_network_policy.deny.policy
  resources         = sandboxio_resource_caps.small.caps
  timeout_seconds   = 120
  lifetime_seconds  = 600
  env               = { LANG = "C.UTF-8" }
  secret_names      = ["OPENAI_API_KEY"]
  labels            = { team = "agents" }
}
`
	specRe := regexp.MustCompile(`^\{"spec_version":1,"name":"python","backend":"docker://","image":"sandboxio/busybox:local","runtime":"runsc","require_isolation":"GVISOR","isolation_tier":"GVISOR","network":\{"egress":"deny","allow":\[\]\},"resources":\{"cpu":1,"memory_mb":1024,"disk_mb":1024,"pids":256\},"timeout_seconds":120,"lifetime_seconds":600,"env":\{"LANG":"C.UTF-8"\},"secret_names":\["OPENAI_API_KEY"\],"labels":\{"team":"agents"\}\}$`)
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: config,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				// Everything computed is known at plan time.
				plancheck.ExpectKnownValue(addr, tfjsonpath.New("isolation_tier"), knownvalue.StringExact("GVISOR")),
				plancheck.ExpectKnownValue(addr, tfjsonpath.New("spec"), knownvalue.StringRegexp(specRe)),
				plancheck.ExpectKnownValue(addr, tfjsonpath.New("spec_sha256"), knownvalue.StringRegexp(regexp.MustCompile(`^[0-9a-f]{64}$`))),
				plancheck.ExpectKnownValue(addr, tfjsonpath.New("resources").AtMapKey("memory_mb"), knownvalue.Int64Exact(1024)),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(addr, tfjsonpath.New("isolation_tier"), knownvalue.StringExact("GVISOR")),
				statecheck.ExpectKnownValue(addr, tfjsonpath.New("backend"), knownvalue.StringExact("docker://")),
				statecheck.ExpectKnownValue(addr, tfjsonpath.New("spec"), knownvalue.StringRegexp(specRe)),
				// Checked on the live daemon at apply.
				statecheck.ExpectKnownValue(addr, tfjsonpath.New("image_id"), knownvalue.StringRegexp(regexp.MustCompile(`^sha256:[0-9a-f]{64}$`))),
				statecheck.ExpectKnownValue(addr, tfjsonpath.New("disk_cap_strategy"), knownvalue.StringRegexp(regexp.MustCompile(`\S`))),
				statecheck.ExpectKnownValue(addr, tfjsonpath.New("pids_cap_strategy"), knownvalue.StringRegexp(regexp.MustCompile(`RLIMIT_NPROC`))),
			},
		}, {
			// The same configuration plans no change.
			Config: config,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectEmptyPlan(),
			}},
		}},
	})
}

func TestAccTemplate_DefaultsFilledIn(t *testing.T) {
	requireDocker(t)
	addr := "sandboxio_template.test"
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: localTemplateConfig(""),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectKnownValue(addr, tfjsonpath.New("isolation_tier"), knownvalue.StringExact("CONTAINER")),
				// Only the live check at apply can know these.
				plancheck.ExpectUnknownValue(addr, tfjsonpath.New("image_id")),
				plancheck.ExpectKnownValue(addr, tfjsonpath.New("network"), knownvalue.ObjectExact(map[string]knownvalue.Check{
					"egress": knownvalue.StringExact("deny"), "allow": knownvalue.ListExact([]knownvalue.Check{}),
				})),
				plancheck.ExpectKnownValue(addr, tfjsonpath.New("resources"), capsCheck(1, 512, 1024, 256)),
				plancheck.ExpectKnownValue(addr, tfjsonpath.New("timeout_seconds"), knownvalue.Int64Exact(300)),
				plancheck.ExpectKnownValue(addr, tfjsonpath.New("lifetime_seconds"), knownvalue.Int64Exact(300)),
			}},
		}},
	})
}

// localTemplateConfig is a Docker template on the local image.
func localTemplateConfig(body string) string {
	return providerBlock("docker://") + fmt.Sprintf(`resource "sandboxio_template" "test" {
  name  = "python"
  image = %q
%s
}
`, localImage, body)
}

// A missing image is refused at apply with how to prepare it, and nothing is stored.
func TestAccTemplate_DockerMissingImageRefusedAtApply(t *testing.T) {
	requireDocker(t)
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config:      templateConfig("docker://", ""), // python:3.12-slim is never on this daemon
			ExpectError: regexp.MustCompile(`(?s)ConfigurationError.*not on the Docker daemon.*egress\s+policy\s+does\s+not\s+govern\s+it`),
		}},
	})
}

// Plan needs no daemon: a Docker template plans with DOCKER_HOST pointing nowhere.
func TestAccTemplate_DockerPlanNeedsNoDaemon(t *testing.T) {
	// Not parallel: the in-process provider reads DOCKER_HOST from this process.
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	resource.UnitTest(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config:             templateConfig("docker://", ""),
			PlanOnly:           true,
			ExpectNonEmptyPlan: true,
		}, {
			Config:      templateConfig("docker://", ""),
			ExpectError: regexp.MustCompile(`(?s)ConfigurationError.*docker\s+backend\s+could\s+not\s+check\s+the\s+template.*plan\s+needs\s+no\s+daemon,\s+apply\s+does`),
		}},
	})
}

const volumeBlock = `  volume = { name = "datasets", mount_path = "/data" }`

const warmPoolBlock = `  warm_pool = { size = 4, max_idle_seconds = 300 }`

// A Docker (runc) template with a warm pool applies; the pool is in the
// spec (max_idle_seconds defaulting to 600 when unset), and so in every
// tenant's spec, where the run-time helper and `sandboxio mcp` read it.
func TestAccTemplate_WarmPoolOnDocker(t *testing.T) {
	requireDocker(t)
	for name, c := range map[string]struct{ block, want string }{
		"both":         {warmPoolBlock, `"warm_pool":\{"size":4,"max_idle_seconds":300\}`},
		"default idle": {`  warm_pool = { size = 2 }`, `"warm_pool":\{"size":2,"max_idle_seconds":600\}`},
	} {
		t.Run(name, func(t *testing.T) {
			resource.ParallelTest(t, resource.TestCase{
				PreCheck:                 func() { testAccPreCheck(t) },
				ProtoV6ProviderFactories: protoV6ProviderFactories,
				Steps: []resource.TestStep{{
					Config: localTemplateConfig(c.block) + `
data "sandboxio_tenant_sandbox" "acme" {
  template_spec = sandboxio_template.test.spec
  tenant_id     = "acme"
  session_id    = "s1"
}
`,
					ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
						plancheck.ExpectKnownValue("sandboxio_template.test", tfjsonpath.New("spec"), knownvalue.StringRegexp(regexp.MustCompile(c.want))),
					}},
					ConfigStateChecks: []statecheck.StateCheck{
						statecheck.ExpectKnownValue("sandboxio_template.test", tfjsonpath.New("warm_pool").AtMapKey("size"), knownvalue.NotNull()),
						statecheck.ExpectKnownValue("data.sandboxio_tenant_sandbox.acme", tfjsonpath.New("spec"),
							knownvalue.StringRegexp(regexp.MustCompile(c.want+`,"tenant_id":"acme"`))),
					},
				}},
			})
		})
	}
}

// A Modal template names a volume; it is in the spec, and so in every
// tenant's spec rendered from it (the backend scopes it per tenant).
// Apply looks the app up on the Modal conformance server (the live check),
// so this is an acceptance test; the provider runs in this process and
// reads the server's address and token from its environment.
func TestAccTemplate_VolumeOnModal(t *testing.T) {
	if os.Getenv("TF_ACC") == "" {
		t.Skip("TF_ACC is not set: acceptance tests skipped (make test sets it)")
	}
	s := modalserver.StartForTest(t)
	s.SetEnv(t)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: templateConfig("", `  backend = "modal://`+modalserver.TestApp+`"
`+volumeBlock) + `
data "sandboxio_tenant_sandbox" "acme" {
  template_spec = sandboxio_template.test.spec
  tenant_id     = "acme"
  session_id    = "s1"
}
`,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectKnownValue("sandboxio_template.test", tfjsonpath.New("spec"),
					knownvalue.StringRegexp(regexp.MustCompile(`"volume":\{"name":"datasets","mount_path":"/data"\}`))),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("sandboxio_template.test", tfjsonpath.New("volume").AtMapKey("mount_path"), knownvalue.StringExact("/data")),
				statecheck.ExpectKnownValue("data.sandboxio_tenant_sandbox.acme", tfjsonpath.New("spec"),
					knownvalue.StringRegexp(regexp.MustCompile(`"volume":\{"name":"datasets","mount_path":"/data"\},"tenant_id":"acme"`))),
			},
		}},
	})
}

func TestAccTemplate_MicroVMOnE2B(t *testing.T) {
	unitTest(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: templateConfig("", `  backend = "e2b://"
  require_isolation = "MICROVM"
  network = { allow = ["pypi.org"] }`),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("sandboxio_template.test", tfjsonpath.New("isolation_tier"), knownvalue.StringExact("MICROVM")),
				statecheck.ExpectKnownValue("sandboxio_template.test", tfjsonpath.New("network").AtMapKey("egress"), knownvalue.StringExact("deny")),
			},
		}},
	})
}

// A value unknown at plan time is checked again at apply, before anything is stored.
func TestAccTemplate_UnknownAtPlanRefusedAtApply(t *testing.T) {
	unitTest(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: providerBlock("") + `
resource "terraform_data" "backend" {
  input = "docker://"
}

resource "sandboxio_template" "test" {
  name    = "python"
  image   = "python:3.12-slim"
  backend = terraform_data.backend.output
  network = { allow = ["10.0.0.0/8"] }
}
`,
			ExpectError: expectRefusal("CapabilityNotSupported", "SBX-NET-003"),
		}},
	})
}

func TestAccTemplate_Refused(t *testing.T) {
	runRefusals(t, []refusal{
		{"unknown scheme", templateConfig("", `  backend = "lxc://"`), "ConfigurationError", "SBX-DSN-001"},
		{"credential in DSN", templateConfig("", `  backend = "e2b://user:hunter2@"`), "ConfigurationError", "SBX-DSN-003"},
		{"learn on runsc", templateConfig("docker://", "  runtime = \"runsc\"\n  network = { egress = \"learn\" }"), "CapabilityNotSupported", "SBX-NET-001"},
		{"learn on e2b", templateConfig("e2b://", `  network = { egress = "learn" }`), "CapabilityNotSupported", "SBX-NET-001"},
		{"allow list on docker", templateConfig("docker://", `  network = { allow = ["151.101.0.0/16"] }`), "CapabilityNotSupported", "SBX-NET-003"},
		{"open egress on runsc", templateConfig("docker://", "  runtime = \"runsc\"\n  network = { egress = \"allow\" }"), "CapabilityNotSupported", "SBX-NET-010"},
		{"zero memory", templateConfig("docker://", `  resources = { memory_mb = 0 }`), "ConfigurationError", "SBX-RES-001"},
		{"caps on e2b", templateConfig("e2b://", `  resources = { cpu = 4 }`), "ConfigurationError", "SBX-RES-002"},
		{"cpu docker would round to no limit", templateConfig("docker://", `  resources = { cpu = 1e-10 }`), "ConfigurationError", "SBX-RES-001"},
		{"memory that overflows to no limit", templateConfig("docker://", `  resources = { memory_mb = 17592186044416 }`), "ConfigurationError", "SBX-RES-001"},
		{"zero timeout", templateConfig("docker://", `  timeout_seconds = 0`), "ConfigurationError", "SBX-TMO-001"},
		{"negative lifetime", templateConfig("docker://", `  lifetime_seconds = -5`), "ConfigurationError", "SBX-TMO-002"},
		{"lifetime above vercel max", templateConfig("vercel://acme/agents", "  lifetime_seconds = 100000\n  timeout_seconds = 60"), "CapabilityNotSupported", "SBX-TMO-003"},
		{"timeout above lifetime", templateConfig("docker://", "  timeout_seconds = 900\n  lifetime_seconds = 600"), "ConfigurationError", "SBX-TMO-004"},
		{"timeout above the ceiling", templateConfig("docker://", "  timeout_seconds = 10000000000\n  lifetime_seconds = 600"), "ConfigurationError", "SBX-TMO-001"},
		{"lifetime above the ceiling", templateConfig("docker://", `  lifetime_seconds = 18446744074`), "ConfigurationError", "SBX-TMO-002"},
		{"require UNKNOWN", templateConfig("docker://", `  require_isolation = "UNKNOWN"`), "ConfigurationError", "SBX-ISO-001"},
		{"require bogus tier", templateConfig("docker://", `  require_isolation = "VM"`), "ConfigurationError", "SBX-ISO-002"},
		{"runc below GVISOR", templateConfig("docker://", `  require_isolation = "GVISOR"`), "ConfigurationError", "SBX-ISO-003"},
		{"runsc below MICROVM", templateConfig("docker://", "  runtime = \"runsc\"\n  require_isolation = \"MICROVM\""), "ConfigurationError", "SBX-ISO-003"},
		{"memory between whole GiB on daytona", templateConfig("daytona://", `  resources = { memory_mb = 1536 }`), "CapabilityNotSupported", "SBX-RES-008"},
		{"unknown tier satisfies nothing", templateConfig("daytona://", `  require_isolation = "CONTAINER"`), "ConfigurationError", "SBX-ISO-003"},
		{"unknown docker runtime", templateConfig("docker://", `  runtime = "youki"`), "ConfigurationError", "SBX-ISO-005"},
		{"runtime off docker", templateConfig("e2b://", `  runtime = "runsc"`), "ConfigurationError", "SBX-ISO-006"},
		{"reserved label", templateConfig("docker://", `  labels = { "sandboxio.tenant_id" = "acme" }`), "ConfigurationError", "SBX-LBL-001"},
		{"malformed label", templateConfig("docker://", `  labels = { "bad key!" = "x" }`), "ConfigurationError", "SBX-LBL-002"},
		{"secret value in secret_names", templateConfig("docker://", `  secret_names = ["sk-live-1234567890abcdef"]`), "ConfigurationError", "SBX-SEC-001"},
		{"secret also in env", templateConfig("docker://", "  secret_names = [\"API_TOKEN\"]\n  env = { API_TOKEN = \"x\" }"), "ConfigurationError", "SBX-SEC-003"},
		{"volume on docker", templateConfig("docker://", volumeBlock), "CapabilityNotSupported", "SBX-VOL-001"},
		{"volume on e2b", templateConfig("e2b://", volumeBlock), "CapabilityNotSupported", "SBX-VOL-001"},
		{"volume on vercel", templateConfig("vercel://acme/agents", volumeBlock), "CapabilityNotSupported", "SBX-VOL-001"},
		{"volume on daytona", templateConfig("daytona://", volumeBlock), "CapabilityNotSupported", "SBX-VOL-001"},
		{"malformed volume name", templateConfig("modal://agents", `  volume = { name = "a/b", mount_path = "/data" }`), "ConfigurationError", "SBX-VOL-002"},
		{"volume over /proc", templateConfig("modal://agents", `  volume = { name = "d", mount_path = "/proc/x" }`), "ConfigurationError", "SBX-VOL-003"},
		{"warm pool on runsc", templateConfig("docker://", "  runtime = \"runsc\"\n"+warmPoolBlock), "CapabilityNotSupported", "SBX-WRM-001"},
		{"warm pool on e2b", templateConfig("e2b://", warmPoolBlock), "CapabilityNotSupported", "SBX-WRM-001"},
		{"warm pool on modal", templateConfig("modal://agents", warmPoolBlock), "CapabilityNotSupported", "SBX-WRM-001"},
		{"warm pool of none", templateConfig("docker://", `  warm_pool = { size = 0 }`), "ConfigurationError", "SBX-WRM-002"},
		{"warm pool too big", templateConfig("docker://", `  warm_pool = { size = 65 }`), "ConfigurationError", "SBX-WRM-002"},
		{"warm pool idle too short", templateConfig("docker://", `  warm_pool = { size = 2, max_idle_seconds = 5 }`), "ConfigurationError", "SBX-WRM-003"},
		{"empty name", providerBlock("docker://") + `resource "sandboxio_template" "test" {
  name  = ""
  image = "python:3.12-slim"
}
`, "ConfigurationError", "SBX-LBL-003"},
		{"name that is no label value", providerBlock("docker://") + `resource "sandboxio_template" "test" {
  name  = "my template"
  image = "python:3.12-slim"
}
`, "ConfigurationError", "SBX-LBL-003"},
	})
}

// The smallest configuration a new user writes, a template with no backend
// under a provider that sets no default_backend (or under no provider block
// at all), plans cleanly against the local Docker daemon: the provider's
// default backend is docker://.
func TestAccTemplate_SmallestConfigurationPlans(t *testing.T) {
	template := `resource "sandboxio_template" "test" {
  name  = "python"
  image = "python:3.12-slim"
}
`
	for name, config := range map[string]string{
		"empty provider block": providerBlock("") + template,
		"no provider block":    template,
	} {
		t.Run(name, func(t *testing.T) {
			resource.ParallelTest(t, resource.TestCase{
				PreCheck:                 func() { testAccPreCheck(t) },
				ProtoV6ProviderFactories: protoV6ProviderFactories,
				Steps: []resource.TestStep{{
					Config:             config,
					PlanOnly:           true,
					ExpectNonEmptyPlan: true,
					ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPreRefresh: []plancheck.PlanCheck{
						plancheck.ExpectKnownValue("sandboxio_template.test", tfjsonpath.New("backend"), knownvalue.StringExact("docker://")),
						plancheck.ExpectKnownValue("sandboxio_template.test", tfjsonpath.New("isolation_tier"), knownvalue.StringExact("CONTAINER")),
					}},
				}},
			})
		})
	}
}

// A default_backend unknown at plan (from another resource) leaves the
// resources that rely on it for apply, where the known default decides:
// never a "no backend" refusal at plan, never a policy checked against no
// backend.
func TestAccTemplate_UnknownDefaultBackendWaitsForApply(t *testing.T) {
	provider := `
resource "terraform_data" "backend" {
  input = "docker://"
}

provider "sandboxio" {
  default_backend = terraform_data.backend.output
}
`
	t.Run("template takes the default at apply", func(t *testing.T) {
		requireDocker(t)
		resource.ParallelTest(t, resource.TestCase{
			PreCheck:                 func() { testAccPreCheck(t) },
			ProtoV6ProviderFactories: protoV6ProviderFactories,
			Steps: []resource.TestStep{{
				Config: provider + `
resource "sandboxio_template" "test" {
  name  = "python"
  image = "sandboxio/busybox:local"
}
`,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("sandboxio_template.test", tfjsonpath.New("backend"), knownvalue.StringExact("docker://")),
				},
			}},
		})
	})
	t.Run("allow list refused at apply", func(t *testing.T) {
		unitTest(t, resource.TestCase{
			ProtoV6ProviderFactories: protoV6ProviderFactories,
			Steps: []resource.TestStep{{
				Config: provider + `
resource "sandboxio_network_policy" "test" {
  allow = ["10.0.0.0/8"]
}
`,
				ExpectError: expectRefusal("CapabilityNotSupported", "SBX-NET-003"),
			}},
		})
	})
}
