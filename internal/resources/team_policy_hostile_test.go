package resources_test

import (
	"fmt"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/testing/hostile"
)

// hostileConfig breaks many built-in rules at once (egress learn, an allow
// list on runc, cpu 0, memory -1, timeout 0) under a team bundle.
func hostileConfig(policyDir string) string {
	return fmt.Sprintf(`
provider "sandboxio" {
  default_backend = "docker://"
  policy_paths    = [%q]
}

resource "sandboxio_template" "t" {
  name            = "hostile"
  image           = "busybox:latest"
  runtime         = "runsc"
  timeout_seconds = 0
  network         = { egress = "learn", allow = ["151.101.0.0/16"] }
  resources       = { cpu = 0, memory_mb = -1 }
}
`, policyDir)
}

// TestAccTeamPolicies_HostileCannotSilenceBuiltins: no team package makes
// terraform plan accept the configuration: it is refused at load, the
// evaluation fails closed, or the built-in refusals stand.
func TestAccTeamPolicies_HostileCannotSilenceBuiltins(t *testing.T) {
	var cases []refusal
	for _, c := range hostile.Cases() {
		if c.Slow {
			continue // the budget is the engine's test; a plan would spend it once per phase
		}
		r := refusal{name: c.Name, config: hostileConfig(c.Write(t)), class: "ConfigurationError", rule: c.Rule}
		if c.Want == hostile.BuiltinsIntact {
			r.class, r.rule = "CapabilityNotSupported", "SBX-NET-001"
		}
		cases = append(cases, r)
	}
	runRefusals(t, cases)
}
