package policy_test

import (
	"strings"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
)

// A backend's backstop error carries the rule catalogue's text: what the
// engine reports from the bundle's METADATA is what backends.LookupRule
// reads, rule for rule, and a backstop's class, fix and title are those.
func TestBackstopTextIsTheCatalogues(t *testing.T) {
	eng, err := policy.New(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range eng.Rules() {
		if !r.Builtin {
			continue
		}
		n++
		got, ok := backends.LookupRule(r.ID)
		want := backends.RuleText{Title: r.Title, Class: r.Class, Attribute: r.Attribute, Fix: r.Fix}
		if !ok || got != want {
			t.Errorf("%s: backends reads %+v, the engine %+v", r.ID, got, want)
			continue
		}
		if r.Class == "" || !strings.HasSuffix(r.Class, "Error") && !strings.HasSuffix(r.Class, "Supported") && !strings.HasSuffix(r.Class, "Exceeded") {
			continue // a warning rule: no refusal to backstop
		}
		e := backends.Backstop("docker", r.ID, "", "a value")
		if e.Rule != r.ID || string(e.Class) != r.Class || e.Fix != r.Fix || e.Attribute != r.Attribute ||
			!strings.HasSuffix(e.Message, ": "+r.Title) || !backends.IsPolicyGap(e) {
			t.Errorf("%s: backstop %+v does not carry the catalogue's text %+v", r.ID, e, r)
		}
	}
	if n < 20 {
		t.Fatalf("only %d built-in rules", n)
	}
}
