// Package diags renders policy findings and typed errors as Terraform
// diagnostics, so that every refusal reads the same way: the summary starts
// with the error class, the detail names the rule and the fix.
package diags

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// PathMapper turns a finding's dotted attribute (relative to the input
// document, e.g. network.allow) into the attribute path of the resource
// being planned. It returns an empty path when the attribute is not one of
// the resource's own.
type PathMapper func(attribute string) path.Path

// StripPrefix maps attributes under prefix (e.g. "network.") onto the
// resource's top-level attributes; others have no path.
func StripPrefix(prefix string) PathMapper {
	return func(attribute string) path.Path {
		if !strings.HasPrefix(attribute, prefix) {
			return path.Empty()
		}
		return Dotted(strings.TrimPrefix(attribute, prefix))
	}
}

// Dotted maps a dotted attribute onto nested attribute names.
func Dotted(attribute string) path.Path {
	if attribute == "" {
		return path.Empty()
	}
	parts := strings.Split(attribute, ".")
	p := path.Root(parts[0])
	for _, part := range parts[1:] {
		p = p.AtName(part)
	}
	return p
}

// FromDecision appends one diagnostic per finding: refusals as errors,
// warnings as warnings.
func FromDecision(d policy.Decision, mapPath PathMapper) diag.Diagnostics {
	var out diag.Diagnostics
	for _, f := range d.Denies {
		out.Append(fromFinding(f, mapPath, true))
	}
	for _, f := range d.Warnings {
		out.Append(fromFinding(f, mapPath, false))
	}
	return out
}

func fromFinding(f policy.Finding, mapPath PathMapper, isError bool) diag.Diagnostic {
	summary := f.Class
	if f.Title != "" {
		summary += ": " + f.Title
	}
	detail := Detail(f.Message, f.ID, f.Attribute, f.Fix)
	p := path.Empty()
	if mapPath != nil {
		p = mapPath(f.Attribute)
	}
	return newDiag(p, summary, detail, isError)
}

// Detail is the shared detail text: what is wrong, the rule, the attribute
// and the fix.
func Detail(message, rule, attribute, fix string) string {
	var b strings.Builder
	b.WriteString(message)
	if rule != "" {
		fmt.Fprintf(&b, "\n\nRule: %s", rule)
	}
	if attribute != "" {
		fmt.Fprintf(&b, "\nAttribute: %s", attribute)
	}
	if fix != "" {
		fmt.Fprintf(&b, "\nFix: %s", fix)
	}
	return b.String()
}

// FromError renders an error. A *model.Error keeps its class, rule and fix;
// any other error is reported under summary as is.
func FromError(err error, summary string, mapPath PathMapper) diag.Diagnostic {
	var me *model.Error
	if errors.As(err, &me) {
		p := path.Empty()
		if mapPath != nil {
			p = mapPath(me.Attribute)
		}
		msg := me.Message
		if me.Err != nil {
			msg += ": " + me.Err.Error()
		}
		if me.Limit != "" {
			msg += " (limit: " + me.Limit + ")"
		}
		return newDiag(p, string(me.Class)+": "+summary, Detail(msg, me.Rule, me.Attribute, me.Fix), true)
	}
	return diag.NewErrorDiagnostic(summary, err.Error())
}

// FromWarning renders a model.Warning.
func FromWarning(w model.Warning, mapPath PathMapper) diag.Diagnostic {
	p := path.Empty()
	if mapPath != nil {
		p = mapPath(w.Attribute)
	}
	return newDiag(p, string(w.Class), Detail(w.String(), w.Rule, w.Attribute, ""), false)
}

func newDiag(p path.Path, summary, detail string, isError bool) diag.Diagnostic {
	if p.Equal(path.Empty()) {
		if isError {
			return diag.NewErrorDiagnostic(summary, detail)
		}
		return diag.NewWarningDiagnostic(summary, detail)
	}
	if isError {
		return diag.NewAttributeErrorDiagnostic(p, summary, detail)
	}
	return diag.NewAttributeWarningDiagnostic(p, summary, detail)
}
