package docker

import (
	"errors"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// The run time refuses what the plan refuses (a Backstop of the same
// rule) should a spec reach it unchecked, and parses the rest.
func TestGatewayRulesBackstop(t *testing.T) {
	r, err := gatewayRules([]string{"198.51.100.0/24:443", "[2001:db8::1]:80", "Bücher.example", "*.pypi.org"})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Blocks) != 2 || r.Blocks[0].Port != 443 || r.Blocks[1].Port != 80 || len(r.Names) != 2 || r.Names[0] != "xn--bcher-kva.example" {
		t.Fatalf("rules %+v", r)
	}
	for entry, rule := range map[string]string{
		"127.0.0.1": rules.NetNever, "169.254.169.254:80": rules.NetNever, "[fe80::1]:22": rules.NetNever,
		"metadata.google.internal": rules.NetNever, "*.localhost.example": "", "a.localhost": rules.NetNever,
		"pypi.org:443": rules.NetAllowKind, "10.1.2.3/8": rules.NetAllowKind,
	} {
		_, err := gatewayRules([]string{entry})
		var me *model.Error
		if rule == "" {
			if err != nil {
				t.Errorf("%s: %v", entry, err)
			}
			continue
		}
		if !errors.As(err, &me) || me.Rule != rule {
			t.Errorf("%s: %v, want rule %s", entry, err, rule)
		}
	}
}
