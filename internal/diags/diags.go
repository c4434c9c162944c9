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

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Mapper places a finding on the resource being planned: the attribute
// path its diagnostic is attached to, and the name the detail text gives
// the attribute ("Attribute: ..."). Findings name attributes relative to the
// input document (network.allow), as on sandboxio_template.
type Mapper interface {
	Path(attribute string) path.Path
	Name(attribute string) string
}

// PathMapper turns a finding's dotted attribute (e.g. network.allow) into
// the attribute path of the resource being planned. It returns an empty
// path when the attribute is not one of the resource's own. The text keeps
// the finding's attribute as it is.
type PathMapper func(attribute string) path.Path

// Path implements Mapper.
func (m PathMapper) Path(attribute string) path.Path {
	if m == nil {
		return path.Empty()
	}
	return m(attribute)
}

// Name implements Mapper: the finding's own attribute.
func (m PathMapper) Name(attribute string) string { return attribute }

// StripPrefix maps attributes under prefix (e.g. "network.") onto the
// resource's top-level attributes, in the path and in the text alike
// (network.allow is allow on sandboxio_network_policy); others have no
// path and keep their name.
func StripPrefix(prefix string) Mapper { return prefixMapper(prefix) }

type prefixMapper string

func (p prefixMapper) Path(attribute string) path.Path {
	if !strings.HasPrefix(attribute, string(p)) {
		return path.Empty()
	}
	return Dotted(strings.TrimPrefix(attribute, string(p)))
}

func (p prefixMapper) Name(attribute string) string {
	return strings.TrimPrefix(attribute, string(p))
}

// Dotted maps a dotted attribute onto nested attribute names.
var Dotted PathMapper = dotted

func dotted(attribute string) path.Path {
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

// place returns the path and the name of a finding's attribute; with no
// mapper, no path and the attribute as it is.
func place(mapPath Mapper, attribute string) (path.Path, string) {
	if mapPath == nil {
		return path.Empty(), attribute
	}
	return mapPath.Path(attribute), mapPath.Name(attribute)
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
func FromError(err error, summary string, mapPath Mapper) diag.Diagnostic {
	var me *model.Error
	if errors.As(err, &me) {
		p, name := place(mapPath, me.Attribute)
		msg := me.Message
		if me.Err != nil {
			msg += ": " + me.Err.Error()
		}
		if me.Limit != "" {
			msg += " (limit: " + me.Limit + ")"
		}
		return newDiag(p, string(me.Class)+": "+summary, Detail(msg, me.Rule, name, me.Fix), true)
	}
	return diag.NewErrorDiagnostic(summary, err.Error())
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
