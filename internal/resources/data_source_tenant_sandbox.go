package resources

import (
	"context"
	"errors"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/diags"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

var (
	_ datasource.DataSource                   = (*tenantSandboxDataSource)(nil)
	_ datasource.DataSourceWithConfigure      = (*tenantSandboxDataSource)(nil)
	_ datasource.DataSourceWithValidateConfig = (*tenantSandboxDataSource)(nil)
)

// NewTenantSandboxDataSource returns the sandboxio_tenant_sandbox data source.
func NewTenantSandboxDataSource() datasource.DataSource { return &tenantSandboxDataSource{} }

type tenantSandboxDataSource struct{ pd *ProviderData }

type tenantSandboxModel struct {
	TemplateSpec types.String `tfsdk:"template_spec"`
	TenantID     types.String `tfsdk:"tenant_id"`
	SessionID    types.String `tfsdk:"session_id"`
	ExtraLabels  types.Map    `tfsdk:"extra_labels"`
	Spec         types.String `tfsdk:"spec"`
	SpecSHA256   types.String `tfsdk:"spec_sha256"`
	Labels       types.Map    `tfsdk:"labels"`
}

func (d *tenantSandboxDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_tenant_sandbox"
}

func (d *tenantSandboxDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Renders the spec of one tenant's sandbox from a template's `spec`: the tenant and session ids, and " +
			"the reserved labels `sandboxio.tenant_id`, `sandboxio.session_id` and `sandboxio.template` that reach the backend's " +
			"native labels so every sandbox (and every orphan) can be traced to its tenant. The spec is checked at plan as the " +
			"run-time helper checks it before provisioning, so that a spec written by hand is refused by the plan rather than " +
			"at run time: it must name its backend (a spec never falls back to `default_backend`); its `isolation_tier` is " +
			"recomputed from the backend's capability data, filled in when left out and refused when it says anything else " +
			"(`SBX-SPC-005`); and the rendered spec is decided by the same policy bundle, the provider's `policy_paths` and " +
			"`policy_waivers` included. The run-time helper checks it again, and its sha256, before provisioning.",
		Attributes: map[string]schema.Attribute{
			"template_spec": schema.StringAttribute{Required: true,
				MarkdownDescription: "A template's `spec` (`sandboxio_template.NAME.spec`). A spec written by hand " +
					"(`jsonencode(...)`) is checked as the run-time helper checks it: a backend of its own, the isolation tier " +
					"that backend gives, and the policy bundle. When it is unknown at plan, the data source is read, and " +
					"checked, at apply."},
			"tenant_id": schema.StringAttribute{Required: true,
				MarkdownDescription: "Tenant id: 1 to 128 letters, digits, `.`, `_` or `-`."},
			"session_id": schema.StringAttribute{Required: true,
				MarkdownDescription: "Session id: 1 to 128 letters, digits, `.`, `_` or `-`. One sandbox per tenant and session."},
			"extra_labels": schema.MapAttribute{ElementType: types.StringType, Optional: true,
				MarkdownDescription: "Labels added to the template's; keys under `sandboxio.` are refused."},
			"spec": schema.StringAttribute{Computed: true,
				MarkdownDescription: "The per-tenant spec, canonical JSON. Pass it to `sandboxio run --spec`."},
			"spec_sha256": schema.StringAttribute{Computed: true,
				MarkdownDescription: "sha256 of `spec`, hex; the run-time helper refuses a spec that does not match it."},
			"labels": schema.MapAttribute{ElementType: types.StringType, Computed: true,
				MarkdownDescription: "Every label of the sandbox, the reserved ones included."},
		},
	}
}

func (d *tenantSandboxDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	pd, dd := providerData(req.ProviderData)
	resp.Diagnostics.Append(dd...)
	if pd != nil {
		d.pd = pd
	}
}

// ValidateConfig checks the tenant and session ids and the extra labels at
// plan, even while template_spec is unknown and the read is deferred to
// apply. The tenancy and label rules decide; they need only this part.
func (d *tenantSandboxDataSource) ValidateConfig(ctx context.Context, req datasource.ValidateConfigRequest, resp *datasource.ValidateConfigResponse) {
	var m tenantSandboxModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || m.TenantID.IsUnknown() || m.SessionID.IsUnknown() || !fullyKnown(ctx, m.ExtraLabels) {
		return
	}
	extra, dd := stringMap(ctx, m.ExtraLabels)
	resp.Diagnostics.Append(dd...)
	in := inputs.Tenant{TenantID: m.TenantID.ValueString(), SessionID: m.SessionID.ValueString(), ExtraLabels: extra}.Part()
	resp.Diagnostics.Append(evaluate(ctx, nil, in, tenantPaths)...)
}

func (d *tenantSandboxDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m tenantSandboxModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	template, err := model.ParseSpec([]byte(m.TemplateSpec.ValueString()))
	if err != nil {
		resp.Diagnostics.Append(diags.FromError(err, "template_spec is not a sandboxio spec", onAttribute("template_spec")))
		return
	}
	extra, dd := stringMap(ctx, m.ExtraLabels)
	resp.Diagnostics.Append(dd...)
	if resp.Diagnostics.HasError() {
		return
	}
	// Sandbox checks the spec as the run-time helper does before any rule
	// runs: a backend of its own, and the isolation tier its backend gives
	// (recomputed from the capability data, never read from the spec).
	spec, in, err := inputs.Tenant{TenantID: m.TenantID.ValueString(), SessionID: m.SessionID.ValueString(), ExtraLabels: extra}.
		Sandbox(template)
	if err != nil {
		resp.Diagnostics.Append(diags.FromError(err, specRefusal(err), onAttribute("template_spec")))
		return
	}
	// ValidateConfig already reported the warnings of the tenant part.
	resp.Diagnostics.Append(errorsOnly(evaluate(ctx, d.pd, in, tenantPaths))...)
	// The rendered spec is what the run-time helper is given: decide it as
	// that helper will, with the same document (kind "spec") and the same
	// bundle (team policy_paths and waivers included), so that a team rule
	// on either kind refuses here rather than at run time. A refusal found
	// in both documents is reported once.
	run, _, err := inputs.Spec(spec)
	if err != nil {
		resp.Diagnostics.Append(diags.FromError(err, specRefusal(err), onAttribute("template_spec")))
		return
	}
	resp.Diagnostics.Append(errorsOnly(evaluate(ctx, d.pd, run, tenantPaths))...)
	if resp.Diagnostics.HasError() {
		return
	}
	canon, sum, err := spec.Canonical()
	if err != nil {
		resp.Diagnostics.AddError("Spec rendering failed", err.Error())
		return
	}
	m.Spec = types.StringValue(string(canon))
	m.SpecSHA256 = types.StringValue(sum)
	m.Labels = mapValue(spec.Labels)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// specRefusal is the summary of a refusal by the spec checks that come
// before the rules.
func specRefusal(err error) string {
	var me *model.Error
	if errors.As(err, &me) && me.Attribute == "isolation_tier" {
		return "template_spec states an isolation tier its backend does not give"
	}
	return "template_spec has an invalid backend"
}

// tenantPaths puts tenant findings on their attribute and template findings
// on template_spec, where the fix belongs; the text keeps naming the
// template's attribute.
var tenantPaths diags.PathMapper = tenantPath

func tenantPath(attribute string) path.Path {
	switch attribute {
	case "tenant_id", "session_id":
		return path.Root(attribute)
	case "labels":
		return path.Root("extra_labels")
	}
	return path.Root("template_spec")
}

// fullyKnown reports whether a value holds no unknown anywhere inside.
func fullyKnown(ctx context.Context, v attr.Value) bool {
	tv, err := v.ToTerraformValue(ctx)
	return err == nil && tv.IsFullyKnown()
}
