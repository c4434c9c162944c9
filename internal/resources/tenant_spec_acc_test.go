package resources_test

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// handSpec renders a data.sandboxio_tenant_sandbox whose template_spec is
// written by hand with jsonencode, as a user would instead of passing
// sandboxio_template.NAME.spec. The fields default to a valid Docker spec;
// each override replaces one top-level field's HCL expression (an empty
// expression leaves the field out).
func handSpec(overrides map[string]string) string {
	fields := []struct{ name, expr string }{
		{"spec_version", "1"},
		{"name", `"python"`},
		{"backend", `"docker://"`},
		{"image", `"python:3.12-slim"`},
		{"runtime", `"runc"`},
		{"isolation_tier", `"CONTAINER"`},
		{"network", `{ egress = "deny", allow = [] }`},
		{"resources", `{ cpu = 1, memory_mb = 512, disk_mb = 1024, pids = 256 }`},
		{"timeout_seconds", "300"},
		{"lifetime_seconds", "600"},
		{"env", "{}"},
		{"secret_names", "[]"},
		{"labels", `{ team = "agents" }`},
	}
	var b strings.Builder
	for _, f := range fields {
		expr := f.expr
		if o, ok := overrides[f.name]; ok {
			expr = o
		}
		if expr == "" {
			continue
		}
		fmt.Fprintf(&b, "    %s = %s\n", f.name, expr)
	}
	// Fields the spec format does not have.
	for _, name := range slices.Sorted(maps.Keys(overrides)) {
		if !slices.ContainsFunc(fields, func(f struct{ name, expr string }) bool { return f.name == name }) {
			fmt.Fprintf(&b, "    %s = %s\n", name, overrides[name])
		}
	}
	return providerBlock("") + fmt.Sprintf(`
data "sandboxio_tenant_sandbox" "test" {
  template_spec = jsonencode({
%s  })
  tenant_id  = "acme"
  session_id = "s-1"
}
`, b.String())
}

// expectSpecRefusal matches the refusal's class, rule, attribute (within
// the spec) and fix, and that it is reported on template_spec.
func expectSpecRefusal(class, rule string) *regexp.Regexp {
	return regexp.MustCompile(`(?s)` + regexp.QuoteMeta(class) + `: [^\n]*\n\s*with data\.sandboxio_tenant_sandbox\.test,` +
		`\s*on [^\n]* line \d+, in data "sandboxio_tenant_sandbox" "test":\s*\d+:\s*template_spec = ` +
		`.*Rule: ` + regexp.QuoteMeta(rule) + `\n.*Attribute: \S.*Fix: \S`)
}

func planRefused(t *testing.T, config, class, rule string) {
	t.Helper()
	unitTest(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config:      config,
			PlanOnly:    true,
			ExpectError: expectSpecRefusal(class, rule),
		}},
	})
}

// An empty backend in a hand-written spec: the run-time helper cannot parse
// it; the plan refuses it (a rendered spec never falls back to a default).
func TestAccTenantSandbox_EmptyBackend(t *testing.T) {
	planRefused(t, handSpec(map[string]string{"backend": `""`, "runtime": ""}), "ConfigurationError", "SBX-DSN-001")
}

// A backend left out is the same as an empty one.
func TestAccTenantSandbox_MissingBackend(t *testing.T) {
	planRefused(t, handSpec(map[string]string{"backend": "", "runtime": ""}), "ConfigurationError", "SBX-DSN-001")
}

// Docker cannot enforce an allow list, whether or not the spec names the
// runtime.
func TestAccTenantSandbox_DockerAllowList(t *testing.T) {
	planRefused(t, handSpec(map[string]string{
		"runtime": "",
		"network": `{ egress = "deny", allow = ["10.0.0.0/8"] }`,
	}), "CapabilityNotSupported", "SBX-NET-003")
}

// isolation_tier is recomputed from the backend, never taken from the spec:
// a value that is not a tier is refused.
func TestAccTenantSandbox_IsolationTierNotATier(t *testing.T) {
	planRefused(t, handSpec(map[string]string{"isolation_tier": `"LOL"`}), "ConfigurationError", "SBX-SPC-005")
}

// A spec that claims a tier its backend does not give (MICROVM on
// docker/runc, which is CONTAINER) is refused, not corrected.
func TestAccTenantSandbox_IsolationTierOverclaimed(t *testing.T) {
	planRefused(t, handSpec(map[string]string{"isolation_tier": `"MICROVM"`}), "ConfigurationError", "SBX-SPC-005")
}

// Learning is refused where the backend does not observe blocked egress
// (runsc), never degraded to deny.
func TestAccTenantSandbox_EgressLearn(t *testing.T) {
	planRefused(t, handSpec(map[string]string{"network": `{ egress = "learn", allow = [] }`, "runtime": `"runsc"`, "isolation_tier": `"GVISOR"`}),
		"CapabilityNotSupported", "SBX-NET-001")
}

func TestAccTenantSandbox_CPUZero(t *testing.T) {
	planRefused(t, handSpec(map[string]string{"resources": `{ cpu = 0, memory_mb = 512, disk_mb = 1024, pids = 256 }`}),
		"ConfigurationError", "SBX-RES-001")
}

// A hand-written spec with no resources at all has every cap at zero.
func TestAccTenantSandbox_MissingResources(t *testing.T) {
	planRefused(t, handSpec(map[string]string{"resources": ""}), "ConfigurationError", "SBX-RES-001")
}

// A field the spec format does not have, and a field of the wrong type, are
// ConfigurationErrors on template_spec.
func TestAccTenantSandbox_MalformedSpec(t *testing.T) {
	planRefused(t, handSpec(map[string]string{"spec_sha256": `"00"`}), "ConfigurationError", "SBX-SPC-001")
}

func TestAccTenantSandbox_WrongType(t *testing.T) {
	planRefused(t, handSpec(map[string]string{"timeout_seconds": `"300"`}), "ConfigurationError", "SBX-SPC-001")
}

// A valid hand-written spec still plans and reads, and what it renders is
// what the run-time helper accepts: the tier is the backend's.
func TestAccTenantSandbox_ValidHandWritten(t *testing.T) {
	addr := "data.sandboxio_tenant_sandbox.test"
	unitTest(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: handSpec(nil),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(addr, tfjsonpath.New("spec"), knownvalue.StringRegexp(
					regexp.MustCompile(`"backend":"docker://","image":"python:3.12-slim","runtime":"runc","isolation_tier":"CONTAINER",`))),
				statecheck.ExpectKnownValue(addr, tfjsonpath.New("spec_sha256"), knownvalue.StringRegexp(regexp.MustCompile(`^[0-9a-f]{64}$`))),
			},
		}},
	})
}

// A hand-written spec that leaves isolation_tier out gets the backend's:
// it claimed nothing, so there is nothing to refuse.
func TestAccTenantSandbox_IsolationTierFilledIn(t *testing.T) {
	addr := "data.sandboxio_tenant_sandbox.test"
	unitTest(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: handSpec(map[string]string{"isolation_tier": "", "runtime": `"runsc"`}),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(addr, tfjsonpath.New("spec"), knownvalue.StringRegexp(
					regexp.MustCompile(`"runtime":"runsc","isolation_tier":"GVISOR",`))),
			},
		}},
	})
}

// handSpecWithProvider is handSpec under another provider block.
func handSpecWithProvider(provider string, overrides map[string]string) string {
	return provider + strings.TrimPrefix(handSpec(overrides), providerBlock(""))
}

// The provider's team policies (policy_paths) decide a hand-written spec
// too: the example bundle refuses an image from an unapproved registry.
func TestAccTenantSandbox_TeamPolicy(t *testing.T) {
	planRefused(t, handSpecWithProvider(teamProvider(examplesDir(t), ""), nil), "ConfigurationError", "TEAM-IMG-001")
}

// A team rule written for the run-time helper's document (kind "spec"),
// which the helper would apply before provisioning, refuses at plan.
func TestAccTenantSandbox_TeamRuleOnRunTimeDocument(t *testing.T) {
	dir := t.TempDir()
	writeTeamFile(t, dir, "runtime.rego", `package team.runtime

import data.sandboxio.lib

# METADATA
# title: no python at run time
# custom:
#   id: TEAM-RUN-001
#   class: ConfigurationError
#   attribute: image
#   fix: use another image
deny contains f if {
	input.kind == "spec"
	startswith(input.template.image, "python:")
	f := lib.finding(rego.metadata.rule(), "python images are not run")
}
`)
	planRefused(t, handSpecWithProvider(teamProvider(dir, ""), nil), "ConfigurationError", "TEAM-RUN-001")
}

// A template_spec unknown at plan is read, and decided, at apply, as the
// rest of the provider does: the plan succeeds, and the apply refuses the
// spec before anything reads it.
func TestAccTenantSandbox_UnknownSpecCheckedAtApply(t *testing.T) {
	config := strings.Replace(handSpec(map[string]string{"isolation_tier": "terraform_data.later.output"}),
		"\ndata ", unknownSource+"\ndata ", 1)
	config = strings.Replace(config, `input = "python:3.12-slim"`, `input = "LOL"`, 1)
	unitTest(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: config, PlanOnly: true, ExpectNonEmptyPlan: true},
			{Config: config, ExpectError: expectSpecRefusal("ConfigurationError", "SBX-SPC-005")},
		},
	})
}
