package diags

import (
	"github.com/hashicorp/terraform-plugin-framework/diag"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/verdict"
)

// FromVerdict appends one diagnostic per finding: refusals as errors,
// advisory and waived findings as warnings. Every finding reads as
// "<class>: <title>" with the shared Detail text; team findings also name
// their enforcement level, and waived ones the waiver and its reason.
func FromVerdict(v verdict.Verdict, mapPath Mapper) diag.Diagnostics {
	var out diag.Diagnostics
	for _, r := range v.Results {
		summary := r.Class
		if r.Title != "" {
			summary += ": " + r.Title
		}
		if r.Outcome == verdict.Waived {
			summary = "Waived " + summary
		}
		p, name := place(mapPath, r.Attribute)
		detail := Detail(r.Message, r.ID, name, r.Fix)
		if !r.Builtin {
			detail += "\nEnforcement: " + string(r.Enforcement)
		}
		if r.Note != "" {
			detail += "\nWaiver: " + r.Note
		}
		out.Append(newDiag(p, summary, detail, r.Outcome == verdict.Fail))
	}
	return out
}
