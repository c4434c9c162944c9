package resources_test

import (
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

// TestAccAllowList_OpenEgressRefused holds issue 8's second finding at plan
// time with the real Terraform CLI: on e2b://, allow lists that admit every
// address planned cleanly while the rule compared the text's ending with
// "/0". Each is now refused as SBX-NET-009, as a network policy and in a
// template, and the entries written "/00" also as SBX-NET-011.
func TestAccAllowList_OpenEgressRefused(t *testing.T) {
	const leadingZeros = `["0.0.0.0/00", "::/00"]`
	const halves = `["0.0.0.0/1", "128.0.0.0/1"]`
	runRefusals(t, []refusal{
		{"policy /00", networkPolicyConfig("", "  backend = \"e2b://\"\n  allow   = "+leadingZeros), "ConfigurationError", "SBX-NET-009"},
		{"policy /00 not canonical", networkPolicyConfig("", "  backend = \"e2b://\"\n  allow   = "+leadingZeros), "ConfigurationError", "SBX-NET-011"},
		{"policy halves", networkPolicyConfig("", "  backend = \"e2b://\"\n  allow   = "+halves), "ConfigurationError", "SBX-NET-009"},
		{"policy halves default backend", networkPolicyConfig("e2b://", "  allow = "+halves), "ConfigurationError", "SBX-NET-009"},
		{"template /00", templateConfig("", "  backend = \"e2b://\"\n  network = { allow = "+leadingZeros+" }"), "ConfigurationError", "SBX-NET-009"},
		{"template halves", templateConfig("", "  backend = \"e2b://\"\n  network = { allow = "+halves+" }"), "ConfigurationError", "SBX-NET-009"},
		{"template IPv4-mapped", templateConfig("", "  backend = \"e2b://\"\n  network = { allow = [\"::ffff:0:0/96\"] }"), "ConfigurationError", "SBX-NET-009"},
	})
}

// TestAccAllowList_NonCanonicalNamesTheForm: the refusal of a non-canonical
// block names the form to write.
func TestAccAllowList_NonCanonicalNamesTheForm(t *testing.T) {
	unitTest(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config:      networkPolicyConfig("", "  backend = \"e2b://\"\n  allow   = [\"10.1.2.3/8\"]"),
			PlanOnly:    true,
			ExpectError: regexp.MustCompile(`(?s)ConfigurationError.*Rule: SBX-NET-011.*Write\s+allow\[0\]\s+as\s+"10\.0\.0\.0/8"`),
		}},
	})
}
