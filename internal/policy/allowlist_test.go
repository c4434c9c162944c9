package policy_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// allowListBackends are the backends that enforce an allow list, where an
// open list would otherwise be carried out as written.
var allowListBackends = []string{"e2b://", "modal://agents", "vercel://acme/agents"}

// TestEvaluate_OpenAllowListsRefused holds the lists of issue 8, which
// planned cleanly on e2b:// while the rule compared the text's ending with
// "/0": each is open egress, refused as SBX-NET-009 on every backend that
// enforces allow lists, as a network policy, in a template and in the
// rendered spec the run-time helper checks.
func TestEvaluate_OpenAllowListsRefused(t *testing.T) {
	e := engine(t)
	for _, tc := range []struct {
		name  string
		allow []string
		rules []string // every refusal expected, in order
	}{
		{"leading zero prefixes", []string{"0.0.0.0/00", "::/00"}, []string{"SBX-NET-009", "SBX-NET-011", "SBX-NET-011"}},
		{"two halves of IPv4", []string{"0.0.0.0/1", "128.0.0.0/1"}, []string{"SBX-NET-009"}},
		{"two halves of IPv6", []string{"::/1", "8000::/1"}, []string{"SBX-NET-009"}},
		{"all IPv4-mapped IPv6", []string{"::ffff:0:0/96"}, []string{"SBX-NET-009", "SBX-NET-011"}},
	} {
		for _, dsn := range allowListBackends {
			t.Run(tc.name+"/"+dsn, func(t *testing.T) {
				np, _, err := inputs.NetworkPolicy{Allow: tc.allow, Backend: dsn}.Build("")
				if err != nil {
					t.Fatal(err)
				}
				expectRefusals(t, eval(t, e, np), tc.rules)

				tpl := inputs.Template{Name: "python", Backend: dsn, Image: "python:3.12-slim", Allow: tc.allow}
				spec, in, err := tpl.Build("")
				if err != nil {
					t.Fatal(err)
				}
				expectSome(t, eval(t, e, in), tc.rules)
				in, _, err = inputs.Spec(spec)
				if err != nil {
					t.Fatal(err)
				}
				expectSome(t, eval(t, e, in), tc.rules)
			})
		}
	}
}

// TestEvaluate_NarrowAllowListsAccepted is the other side: canonical lists
// that leave part of each family out pass on every allow-list backend.
func TestEvaluate_NarrowAllowListsAccepted(t *testing.T) {
	e := engine(t)
	for _, allow := range [][]string{
		{"0.0.0.0/1", "128.0.0.0/2", "192.0.0.0/3"},
		{"8000::/1", "2001:db8::/32", "151.101.0.0/16", "1.2.3.4"},
	} {
		for _, dsn := range allowListBackends {
			in, _, err := inputs.NetworkPolicy{Allow: allow, Backend: dsn}.Build("")
			if err != nil {
				t.Fatal(err)
			}
			if d := eval(t, e, in); !d.Allowed() {
				t.Errorf("%s %v refused: %+v", dsn, allow, d.Denies)
			}
		}
	}
}

// TestEvaluate_NonCanonicalEntryNamesTheForm checks that the refusal of a
// non-canonical entry carries the form to write in its fix.
func TestEvaluate_NonCanonicalEntryNamesTheForm(t *testing.T) {
	in, _, err := inputs.NetworkPolicy{Allow: []string{"10.1.2.3/8"}, Backend: "e2b://"}.Build("")
	if err != nil {
		t.Fatal(err)
	}
	d := eval(t, engine(t), in)
	expectRefusals(t, d, []string{"SBX-NET-011"})
	if f := d.Denies[0]; !strings.Contains(f.Fix, `"10.0.0.0/8"`) || !strings.Contains(f.Message, "host bits") {
		t.Errorf("finding %+v: want the canonical form in the fix and the reason in the message", f)
	}
}

// expectRefusals checks that d refuses with exactly these rules, each a
// ConfigurationError on network.allow.
func expectRefusals(t *testing.T, d policy.Decision, rules []string) {
	t.Helper()
	var got []string
	for _, f := range d.Denies {
		got = append(got, f.ID)
		if f.Class != string(model.ErrConfiguration) || f.Attribute != "network.allow" || f.Message == "" || f.Fix == "" {
			t.Errorf("finding %+v: want a ConfigurationError on network.allow with a message and a fix", f)
		}
	}
	if strings.Join(got, " ") != strings.Join(rules, " ") {
		t.Fatalf("refusals %v, want %v", got, rules)
	}
	if err := d.Err(); !errors.Is(err, model.ErrConfiguration) || !strings.Contains(err.Error(), rules[0]) {
		t.Errorf("Err() = %v, want a ConfigurationError naming %s", err, rules[0])
	}
}

// expectSome checks that d holds these refusals among others (a template
// may be refused for other reasons on a backend, its caps for one).
func expectSome(t *testing.T, d policy.Decision, rules []string) {
	t.Helper()
	left := map[string]int{}
	for _, r := range rules {
		left[r]++
	}
	for _, f := range d.Denies {
		if left[f.ID] > 0 && f.Attribute == "network.allow" {
			left[f.ID]--
		}
	}
	for r, n := range left {
		if n > 0 {
			t.Errorf("%s: %d refusal(s) missing; got %+v", r, n, d.Denies)
		}
	}
}
