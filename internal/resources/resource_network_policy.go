package resources

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/diags"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

var (
	_ resource.Resource                = (*networkPolicyResource)(nil)
	_ resource.ResourceWithConfigure   = (*networkPolicyResource)(nil)
	_ resource.ResourceWithModifyPlan  = (*networkPolicyResource)(nil)
	_ resource.ResourceWithImportState = (*networkPolicyResource)(nil)
)

// NewNetworkPolicyResource returns the sandboxio_network_policy resource.
func NewNetworkPolicyResource() resource.Resource { return &networkPolicyResource{} }

type networkPolicyResource struct{ pd *ProviderData }

type networkPolicyModel struct {
	ID      types.String `tfsdk:"id"`
	Egress  types.String `tfsdk:"egress"`
	Allow   types.List   `tfsdk:"allow"`
	Backend types.String `tfsdk:"backend"`
	Policy  types.Object `tfsdk:"policy"`
}

var networkPolicyPaths = diags.StripPrefix("network.")

func (r *networkPolicyResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_network_policy"
}

func (r *networkPolicyResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "A sandbox egress policy. Egress is denied unless the policy says otherwise. " +
			"The policy is checked at `terraform plan` against the backend it is meant for (`backend`, or the " +
			"provider's `default_backend`, `docker://` unless set): a policy that backend cannot enforce is refused, never accepted and ignored. " +
			"Assign `policy` to a template's `network`.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed:            true,
				MarkdownDescription: "Content-derived identifier of the policy.",
			},
			"egress": schema.StringAttribute{
				Optional: true,
				Computed: true,
				MarkdownDescription: "`deny` (the default: no outbound connections, except `allow` entries where the backend " +
					"supports allow lists) or `allow` (open egress, an explicit opt-in that is warned about). `learn` is not " +
					"available in this version and is refused.",
			},
			"allow": schema.ListAttribute{
				ElementType: types.StringType,
				Optional:    true,
				Computed:    true,
				MarkdownDescription: "Destinations allowed under `egress = \"deny\"`: CIDR blocks, IP addresses or domain names, " +
					"as the backend accepts them. Allow lists are an E2B, Modal and Vercel capability: Docker cannot filter egress per " +
					"host and Daytona's allow list is unverified, so a non-empty list is refused there (`CapabilityNotSupported`).",
			},
			"backend": schema.StringAttribute{
				Optional: true,
				MarkdownDescription: "Backend DSN to check the policy against (for example `docker://` or `e2b://`). " +
					"Defaults to the provider's `default_backend`, which is `docker://` unless set: set `backend` here when " +
					"the templates that use the policy run elsewhere.",
			},
			"policy": schema.ObjectAttribute{
				AttributeTypes:      networkAttrTypes,
				Computed:            true,
				MarkdownDescription: "The effective policy, `{ egress, allow }`, known at plan time. Assign it to `sandboxio_template.network`.",
			},
		},
	}
}

func (r *networkPolicyResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	pd, d := providerData(req.ProviderData)
	resp.Diagnostics.Append(d...)
	if pd != nil {
		r.pd = pd
	}
}

// decide normalizes the model, evaluates it and fills the computed values.
// It returns false when a value is still unknown and the check must wait.
func (r *networkPolicyResource) decide(ctx context.Context, m *networkPolicyModel) (bool, diag.Diagnostics) {
	if waits := r.pd.waitsForDefault(m.Backend.ValueString()); waits || m.Egress.IsUnknown() || !fullyKnown(m.Allow) || m.Backend.IsUnknown() {
		unknown := unknownOf(map[string]attr.Value{"egress": m.Egress, "allow": m.Allow, "backend": m.Backend}, waits)
		return false, diag.Diagnostics{checkedAtApply("sandboxio_network_policy", unknown)}
	}
	allow, items := stringList(ctx, m.Allow)
	// An empty egress is kept as written, so that SBX-NET-002 refuses it:
	// normalized to deny, it would pass and the plan would differ from the
	// configuration.
	in, n, err := inputs.NetworkPolicy{Egress: m.Egress.ValueString(), Allow: allow, Backend: m.Backend.ValueString(),
		EgressEmpty: !m.Egress.IsNull() && m.Egress.ValueString() == ""}.
		Build(r.pd.defaultBackend())
	if err != nil {
		items.Append(backendError(err, diags.Dotted))
		return true, items
	}
	items.Append(evaluate(ctx, r.pd, in, networkPolicyPaths)...)
	m.Egress = types.StringValue(n.Egress)
	m.Allow = listValue(n.Allow)
	m.Policy = networkObject(n)
	canon, _ := json.Marshal(n)
	m.ID = types.StringValue("np-" + model.Digest(canon)[:16])
	return true, items
}

func (r *networkPolicyResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return // destroy
	}
	var m networkPolicyModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	known, items := r.decide(ctx, &m)
	resp.Diagnostics.Append(items...)
	if !known || resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &m)...)
}

func (r *networkPolicyResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	r.apply(ctx, req.Config, deferredAtPlan(req.Plan.Raw, "policy"), &resp.State, &resp.Diagnostics)
}

func (r *networkPolicyResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	r.apply(ctx, req.Config, deferredAtPlan(req.Plan.Raw, "policy"), &resp.State, &resp.Diagnostics)
}

// apply reads the configuration, as the plan-time check did, so that both
// see what the user wrote. deferred says the plan did not evaluate it (a
// value was unknown): its warnings are then reported here.
func (r *networkPolicyResource) apply(ctx context.Context, config tfsdk.Config, deferred bool, state *tfsdk.State, d *diag.Diagnostics) {
	var m networkPolicyModel
	d.Append(config.Get(ctx, &m)...)
	if d.HasError() {
		return
	}
	// Values unknown at plan time are known now: check again before storing.
	_, items := r.decide(ctx, &m)
	d.Append(applyDiagnostics(items, deferred)...)
	if d.HasError() {
		return
	}
	d.Append(state.Set(ctx, &m)...)
}

// Read keeps the state as it is: the policy exists only in state.
func (r *networkPolicyResource) Read(context.Context, resource.ReadRequest, *resource.ReadResponse) {}

func (r *networkPolicyResource) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {
	// Nothing exists outside Terraform's state.
}

// ImportState takes the policy as JSON, for example
// `{"egress":"deny","allow":["10.0.0.0/8"]}`, since the policy lives only in state.
func (r *networkPolicyResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	var n model.NetworkPolicy
	dec := json.NewDecoder(strings.NewReader(req.ID))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&n); err != nil {
		resp.Diagnostics.AddError("ConfigurationError: import ID is not a network policy",
			diags.Detail(fmt.Sprintf("the import ID must be the policy as JSON: %v", err), "", "id",
				`use for example terraform import sandboxio_network_policy.NAME '{"egress":"deny","allow":[]}'`))
		return
	}
	m := networkPolicyModel{
		Egress:  types.StringValue(n.Egress),
		Allow:   listValue(n.Normalized().Allow),
		Backend: types.StringNull(),
	}
	_, items := r.decide(ctx, &m)
	resp.Diagnostics.Append(errorsOnly(items)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
