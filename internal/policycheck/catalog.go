package policycheck

import (
	"sort"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
)

// RuleDoc describes one rule for reports and the rule catalogue: its text
// (from Rego METADATA, or rules.Docs for the Go-side rules) and where it
// comes from and how it is enforced.
type RuleDoc struct {
	rules.Doc
	Package     string // the Rego package; "go" for the refusals made in Go
	Deny        bool
	Builtin     bool
	Enforcement policy.Enforcement
	Severity    string
	// Decision is a pre-execution rule's decision (block or
	// require_approval); empty for the configuration rules.
	Decision string
}

// planRules leaves out the pre-execution rules: they decide run and
// run_code calls, never a plan's resources, so a plan report neither lists
// them nor counts them as passed.
func planRules(all []RuleDoc) []RuleDoc {
	out := all[:0:0]
	for _, r := range all {
		if r.Decision == "" {
			out = append(out, r)
		}
	}
	return out
}

// fromGo is the catalogue entry of a Go-side rule: built-in, and
// hard-mandatory but for the check's own reports, which are advisory.
func fromGo(d rules.Doc) RuleDoc {
	r := RuleDoc{Doc: d, Package: "go", Builtin: true, Deny: true, Enforcement: policy.HardMandatory, Severity: "high"}
	if d.ID == rules.CheckedAtApply || d.ID == rules.NotChecked {
		r.Deny, r.Enforcement, r.Severity = false, policy.Advisory, "low"
	}
	return r
}

// Catalogue lists every rule of the engine's bundle (built-in and team),
// sorted by ID, followed by the Go-side rules.
func Catalogue(eng *policy.Engine) []RuleDoc {
	return catalogue(eng)
}

func catalogue(eng *policy.Engine) []RuleDoc {
	regoRules := eng.Rules()
	out := make([]RuleDoc, 0, len(regoRules)+len(rules.Docs))
	for _, r := range regoRules {
		out = append(out, RuleDoc{Doc: rules.Doc{ID: r.ID, Title: r.Title, Description: r.Description, Fix: r.Fix, Class: r.Class,
			Attribute: r.Attribute}, Package: r.Package, Deny: r.Deny, Builtin: r.Builtin,
			Enforcement: r.Enforcement(), Severity: r.Severity(), Decision: r.Decision})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Builtin != out[j].Builtin {
			return out[i].Builtin
		}
		return out[i].ID < out[j].ID
	})
	for _, d := range rules.Docs {
		out = append(out, fromGo(d))
	}
	return out
}
