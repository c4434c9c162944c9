package policycheck

import (
	"slices"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/verdict"
)

// TestCheck_OpenAllowListsRefused: `sandboxio policy check` refuses the open
// allow lists of issue 8 (SBX-NET-009) on every backend that enforces allow
// lists, in a network policy and in a template, and the "/00" entries as
// not canonical (SBX-NET-011).
func TestCheck_OpenAllowListsRefused(t *testing.T) {
	e := builtinEngine(t)
	lists := map[string][]any{
		"zeros":  {"0.0.0.0/00", "::/00"},
		"halves": {"0.0.0.0/1", "128.0.0.0/1"},
	}
	for _, dsn := range []string{"e2b://", "modal://agents", "vercel://acme/agents"} {
		var changes []change
		for name, allow := range lists {
			network := map[string]any{"egress": "deny", "allow": allow}
			changes = append(changes,
				change{addr: "sandboxio_network_policy." + name, mode: "managed", typ: "sandboxio_network_policy", name: name,
					actions: []string{"create"}, after: map[string]any{"egress": "deny", "allow": allow, "backend": dsn}},
				templateChange(name, map[string]any{"backend": dsn, "network": network}))
		}
		got := byAddress(check(t, e, planJSON(t, "", changes...), nil))
		for name := range lists {
			for _, addr := range []string{"sandboxio_network_policy." + name, "sandboxio_template." + name} {
				fails := ids(got[addr], verdict.Fail)
				if !slices.Contains(fails, "SBX-NET-009") {
					t.Errorf("%s %s: failures %v, want SBX-NET-009", dsn, addr, fails)
				}
				if canon := slices.Contains(fails, "SBX-NET-011"); canon != (name == "zeros") {
					t.Errorf("%s %s: failures %v: SBX-NET-011 only for the /00 entries", dsn, addr, fails)
				}
			}
		}
	}
}
