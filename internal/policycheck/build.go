package policycheck

import (
	"errors"
	"fmt"
	"sort"

	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// document is what the check evaluates for one resource.
type document struct {
	in policy.Input
	// part is true when only part of the resource could be checked (a
	// tenant sandbox whose template spec is unknown: its tenant part).
	part bool
	// deferred lists what is unknown until apply; with no document at all
	// (in.Kind == "") the whole resource is checked at apply.
	deferred []string
	// refusal is a refusal that comes before any document: a DSN or a spec
	// that does not parse, a number out of range (the provider refuses
	// these at plan too).
	refusal *model.Error
	// placeholders names the template's decision-free attributes unknown
	// until apply (inputs.DecisionFree): the document holds placeholders
	// for them, as the provider's does, and the built-in rules decide.
	placeholders []string
}

// build returns the resource's document. A value of the wrong type is an
// input error: Terraform never writes one, so the file was edited or
// damaged.
func (r *planResource) build(cache *values) (document, error) {
	switch r.Type {
	case typeNetworkPolicy:
		return buildManaged(r, cache, inputs.NetworkPolicyReadType, inputs.ReadNetworkPolicy,
			func(c inputs.NetworkPolicy, def string) (policy.Input, error) {
				in, _, err := c.Build(def)
				return in, err
			})
	case typeResourceCaps:
		return buildManaged(r, cache, inputs.ResourceCapsReadType, inputs.ReadResourceCaps,
			func(c inputs.ResourceCaps, def string) (policy.Input, error) {
				in, _, err := c.Build(def)
				return in, err
			})
	case typeTemplate:
		return buildManaged(r, cache, inputs.TemplateReadType, inputs.ReadTemplate,
			func(c inputs.Template, def string) (policy.Input, error) { _, in, err := c.Build(def); return in, err })
	}
	var doc document
	doc.deferred = r.unknownOf("tenant_id", "session_id", "extra_labels", "template_spec")
	if len(r.unknownOf("tenant_id", "session_id", "extra_labels")) > 0 {
		return doc, nil
	}
	v, err := planValue(cache, r.Address, tenantType, r.after, nil)
	if err != nil {
		return doc, err
	}
	attrs, err := inputs.Object(v)
	if err != nil {
		return doc, fmt.Errorf("%s: %w", r.Address, err)
	}
	tenant := inputs.Tenant{}
	tenant.TenantID, _ = inputs.String(attrs["tenant_id"])
	tenant.SessionID, _ = inputs.String(attrs["session_id"])
	spec, _ := inputs.String(attrs["template_spec"])
	if tenant.ExtraLabels, err = inputs.StringMap(attrs["extra_labels"]); err != nil {
		return doc, fmt.Errorf("%s: %w", r.Address, err)
	}
	if r.unknownAt("template_spec") {
		// As the data source does at plan: the tenant part now, the
		// rest once the template's spec is known.
		doc.in, doc.part = tenant.Part(), true
		return doc, nil
	}
	doc.deferred = nil
	template, err := model.ParseSpec([]byte(spec))
	if err != nil {
		doc.refusal = refusalOf(err, "template_spec")
		return doc, nil
	}
	_, doc.in, err = tenant.Sandbox(template)
	doc.refusal = refusalOf(err, "template_spec")
	doc.in.Address = r.Address
	return doc, nil
}

// tenantType is the part of data.sandboxio_tenant_sandbox's type its
// document is built from.
var tenantType = tftypes.Object{AttributeTypes: map[string]tftypes.Type{
	"tenant_id": tftypes.String, "session_id": tftypes.String, "template_spec": tftypes.String,
	"extra_labels": tftypes.Map{ElementType: tftypes.String},
}}

// buildManaged reads a managed resource from the plan with the provider's
// reader and builds its document with the provider's builder.
func buildManaged[T any](r *planResource, cache *values, typ tftypes.Type, read func(tftypes.Value) (inputs.Read[T], error),
	build func(c T, defaultBackend string) (policy.Input, error)) (document, error) {
	var doc document
	v, err := planValue(cache, r.Address, typ, r.after, r.afterUnknown)
	if err != nil {
		return doc, err
	}
	c, err := read(v)
	if err != nil {
		var me *model.Error
		if !errors.As(err, &me) {
			return doc, fmt.Errorf("%s: %w", r.Address, err)
		}
		// A number out of its range: refused, as the provider refuses it.
		doc.refusal = refusalOf(err, "")
		return doc, nil
	}
	doc.deferred = c.Unknown
	if r.defaultUnknown && c.Backend == "" {
		// Most likely the cause when anything is unknown; the cause
		// otherwise: the provider waits for its default.
		doc.deferred = append([]string{"the provider's default_backend"}, doc.deferred...)
	}
	if len(doc.deferred) > 0 {
		return doc, nil
	}
	doc.in, err = build(c.Config, r.defaultBackend)
	doc.refusal = refusalOf(err, "backend")
	doc.placeholders = c.Placeholders
	doc.in.Address = r.Address
	return doc, nil
}

func (r *planResource) unknownOf(attrs ...string) []string {
	if r.wholeUnknown() {
		return []string{"every attribute"}
	}
	var out []string
	for _, a := range attrs {
		if r.unknownAt(a) {
			out = append(out, a)
		}
	}
	sort.Strings(out)
	return out
}

// refusalOf keeps a typed refusal; any other error becomes one so that
// nothing a builder returns is lost.
func refusalOf(err error, attribute string) *model.Error {
	if err == nil {
		return nil
	}
	var me *model.Error
	if !errors.As(err, &me) {
		me = &model.Error{Class: model.ErrConfiguration, Message: err.Error()}
	}
	out := *me
	if out.Attribute == "" {
		out.Attribute = attribute
	}
	return &out
}
