package resources

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/diags"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
	"github.com/sandboxio/terraform-provider-sandboxio/policies"
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
				MarkdownDescription: policies.Expand("`deny` (the default: no outbound connections, except `allow` entries where the backend " +
					"supports allow lists), `allow` (open egress, an explicit opt-in that is warned about) or `learn` (deny, and every " +
					"blocked attempt recorded in the audit log for `sandboxio egress report`; only where the backend observes blocked " +
					"egress, ${learn|or}, and refused elsewhere)."),
			},
			"allow": schema.ListAttribute{
				ElementType: types.StringType,
				Optional:    true,
				Computed:    true,
				MarkdownDescription: policies.Expand("Destinations allowed under `egress = \"deny\"`: CIDR blocks, IP addresses or domain names, " +
					"as the backend accepts them. Allow lists are a capability of ${allowlist}; on ${no_allowlist} (no per-host " +
					"egress filter, or an unverified one) a non-empty list is refused (`CapabilityNotSupported`)."),
			},
			"backend": schema.StringAttribute{
				Optional: true,
				MarkdownDescription: "Backend DSN to check the policy against (for example `e2b://`). " +
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

// decide evaluates a configuration read by inputs.ReadNetworkPolicy (the
// reader `sandboxio policy check` uses too) and returns the planned value.
// It returns false when a value is still unknown and the check must wait.
func (r *networkPolicyResource) decide(ctx context.Context, c inputs.Read[inputs.NetworkPolicy]) (networkPolicyModel, bool, diag.Diagnostics) {
	var m networkPolicyModel
	if r.pd.waitsForDefault(c.Backend) && !slices.Contains(c.Unknown, "backend") {
		c.Unknown = append(c.Unknown, "the provider's default_backend")
	}
	if !c.Known() {
		return m, false, diag.Diagnostics{checkedAtApply("sandboxio_network_policy", c.Unknown)}
	}
	var items diag.Diagnostics
	in, n, err := c.Config.Build(r.pd.defaultBackend())
	if err != nil {
		items.Append(backendError(err, diags.Dotted))
		return m, true, items
	}
	items.Append(evaluate(ctx, r.pd, in, networkPolicyPaths)...)
	// An empty egress is kept as written (inputs.NetworkPolicy.EgressEmpty),
	// so that SBX-NET-002 refuses it: normalized to deny, it would pass and
	// the plan would differ from the configuration.
	m.Egress = types.StringValue(n.Egress)
	m.Allow = listValue(n.Allow)
	m.Backend = types.StringNull()
	if c.BackendSet {
		m.Backend = types.StringValue(c.Config.Backend)
	}
	m.Policy = networkObject(n)
	canon, _ := json.Marshal(n)
	m.ID = types.StringValue("np-" + model.Digest(canon)[:16])
	return m, true, items
}

// readAndDecide reads and decides on a configuration.
func (r *networkPolicyResource) readAndDecide(ctx context.Context, config tftypes.Value) (networkPolicyModel, bool, diag.Diagnostics) {
	c, err := inputs.ReadNetworkPolicy(config)
	if err != nil {
		return networkPolicyModel{}, true, diag.Diagnostics{diags.FromError(err, "Reading the network policy configuration failed", networkPolicyPaths)}
	}
	return r.decide(ctx, c)
}

func (r *networkPolicyResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return // destroy
	}
	m, known, items := r.readAndDecide(ctx, req.Config.Raw)
	resp.Diagnostics.Append(items...)
	if !known || resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &m)...)
}

func (r *networkPolicyResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	r.apply(ctx, req.Config.Raw, deferredAtPlan(req.Plan.Raw, "policy"), &resp.State, &resp.Diagnostics)
}

func (r *networkPolicyResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	r.apply(ctx, req.Config.Raw, deferredAtPlan(req.Plan.Raw, "policy"), &resp.State, &resp.Diagnostics)
}

// apply reads the configuration, as the plan-time check did, so that both
// see what the user wrote. deferred says the plan did not evaluate it (a
// value was unknown): its warnings are then reported here.
func (r *networkPolicyResource) apply(ctx context.Context, config tftypes.Value, deferred bool, state *tfsdk.State, d *diag.Diagnostics) {
	// Values unknown at plan time are known now: check again before storing.
	m, _, items := r.readAndDecide(ctx, config)
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
	m, _, items := r.decide(ctx, inputs.Read[inputs.NetworkPolicy]{
		Config: inputs.NetworkPolicy{Egress: n.Egress, Allow: n.Normalized().Allow}})
	resp.Diagnostics.Append(errorsOnly(items)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
