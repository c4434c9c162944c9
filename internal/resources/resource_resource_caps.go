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
)

var (
	_ resource.Resource                = (*resourceCapsResource)(nil)
	_ resource.ResourceWithConfigure   = (*resourceCapsResource)(nil)
	_ resource.ResourceWithModifyPlan  = (*resourceCapsResource)(nil)
	_ resource.ResourceWithImportState = (*resourceCapsResource)(nil)
)

// NewResourceCapsResource returns the sandboxio_resource_caps resource.
func NewResourceCapsResource() resource.Resource { return &resourceCapsResource{} }

type resourceCapsResource struct{ pd *ProviderData }

type resourceCapsModel struct {
	ID       types.String  `tfsdk:"id"`
	CPU      types.Float64 `tfsdk:"cpu"`
	MemoryMB types.Int64   `tfsdk:"memory_mb"`
	DiskMB   types.Int64   `tfsdk:"disk_mb"`
	Pids     types.Int64   `tfsdk:"pids"`
	Backend  types.String  `tfsdk:"backend"`
	Caps     types.Object  `tfsdk:"caps"`
}

var resourceCapsPaths = diags.StripPrefix("resources.")

func (r *resourceCapsResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_resource_caps"
}

func (r *resourceCapsResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: fmt.Sprintf("Resource caps for sandboxes. Every cap always holds a value: an unset cap takes its modest "+
			"default (cpu %g, memory_mb %d, disk_mb %d, pids %d). A cap can be raised but never unset: zero and negative values "+
			"are refused, and so is a value outside the range backends can apply (cpu %g to %d, memory_mb %d to %d, "+
			"disk_mb %d to %d, pids %d to %d). Assign `caps` to a template's `resources`.",
			model.DefaultCPU, model.DefaultMemoryMB, model.DefaultDiskMB, model.DefaultPids,
			model.MinCPU, model.MaxCPU, model.MinMemoryMB, model.MaxMemoryMB, model.MinDiskMB, model.MaxDiskMB, model.MinPids, model.MaxPids),
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed:            true,
				MarkdownDescription: "Content-derived identifier of the caps.",
			},
			"cpu": schema.Float64Attribute{
				Optional: true, Computed: true,
				MarkdownDescription: fmt.Sprintf("vCPUs (fractions allowed). Default %g.", model.DefaultCPU),
			},
			"memory_mb": schema.Int64Attribute{
				Optional: true, Computed: true,
				MarkdownDescription: fmt.Sprintf("Memory in MiB; swap is bounded to the same value, so the cap is not advisory. Default %d.", model.DefaultMemoryMB),
			},
			"disk_mb": schema.Int64Attribute{
				Optional: true, Computed: true,
				MarkdownDescription: fmt.Sprintf("Writable disk in MiB. Default %d.", model.DefaultDiskMB),
			},
			"pids": schema.Int64Attribute{
				Optional: true, Computed: true,
				MarkdownDescription: fmt.Sprintf("Process-count ceiling, so a fork bomb stays inside the sandbox. Default %d.", model.DefaultPids),
			},
			"backend": schema.StringAttribute{
				Optional: true,
				MarkdownDescription: "Backend DSN to check the caps against; defaults to the provider's `default_backend` (`docker://` unless set). " +
					"Backends whose caps belong to the template (E2B) refuse non-default caps.",
			},
			"caps": schema.ObjectAttribute{
				AttributeTypes:      capsAttrTypes,
				Computed:            true,
				MarkdownDescription: "The effective caps, `{ cpu, memory_mb, disk_mb, pids }`, defaults filled in, known at plan time. Assign it to `sandboxio_template.resources`.",
			},
		},
	}
}

func (r *resourceCapsResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	pd, d := providerData(req.ProviderData)
	resp.Diagnostics.Append(d...)
	if pd != nil {
		r.pd = pd
	}
}

// decide evaluates a configuration read by inputs.ReadResourceCaps (the
// reader `sandboxio policy check` uses too, with its exact cpu and integer
// checks) and returns the planned value. It returns false when a value is
// still unknown and the check must wait.
func (r *resourceCapsResource) decide(ctx context.Context, c inputs.Read[inputs.ResourceCaps]) (resourceCapsModel, bool, diag.Diagnostics) {
	var m resourceCapsModel
	if r.pd.waitsForDefault(c.Backend) && !slices.Contains(c.Unknown, "backend") {
		c.Unknown = append(c.Unknown, "the provider's default_backend")
	}
	if !c.Known() {
		return m, false, diag.Diagnostics{checkedAtApply("sandboxio_resource_caps", c.Unknown)}
	}
	var items diag.Diagnostics
	in, caps, err := c.Config.Build(r.pd.defaultBackend())
	if err != nil {
		items.Append(backendError(err, diags.Dotted))
		return m, true, items
	}
	items.Append(evaluate(ctx, r.pd, in, resourceCapsPaths)...)
	m.CPU = types.Float64Value(caps.CPU)
	m.MemoryMB = types.Int64Value(caps.MemoryMB)
	m.DiskMB = types.Int64Value(caps.DiskMB)
	m.Pids = types.Int64Value(caps.Pids)
	m.Backend = types.StringNull()
	if c.BackendSet {
		m.Backend = types.StringValue(c.Config.Backend)
	}
	m.Caps = capsObject(caps)
	canon, _ := json.Marshal(caps)
	m.ID = types.StringValue("caps-" + model.Digest(canon)[:16])
	return m, true, items
}

// readAndDecide reads and decides on a configuration. A cpu a float64
// cannot hold as written is refused before anything reads it as one
// (inputs.CPU): rounded, it could pass the range rule it fails, and the
// plan would differ from the configuration.
func (r *resourceCapsResource) readAndDecide(ctx context.Context, config tftypes.Value) (resourceCapsModel, bool, diag.Diagnostics) {
	c, err := inputs.ReadResourceCaps(config)
	if err != nil {
		return resourceCapsModel{}, true, diag.Diagnostics{diags.FromError(err, capRangeTitle, resourceCapsPaths)}
	}
	return r.decide(ctx, c)
}

// capRangeTitle is SBX-RES-001's title, the summary of its refusals made
// in Go.
const capRangeTitle = "cap that is unset, zero, negative or outside the range backends apply"

func (r *resourceCapsResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	m, known, items := r.readAndDecide(ctx, req.Config.Raw)
	resp.Diagnostics.Append(items...)
	if !known || resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &m)...)
}

func (r *resourceCapsResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	r.apply(ctx, req.Config.Raw, deferredAtPlan(req.Plan.Raw, "caps"), &resp.State, &resp.Diagnostics)
}

func (r *resourceCapsResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	r.apply(ctx, req.Config.Raw, deferredAtPlan(req.Plan.Raw, "caps"), &resp.State, &resp.Diagnostics)
}

// apply reads the configuration, not the plan: the plan holds the defaults
// already filled in, and the check must see what the user wrote. deferred
// says the plan did not evaluate it: its warnings are then reported here.
func (r *resourceCapsResource) apply(ctx context.Context, config tftypes.Value, deferred bool, state *tfsdk.State, d *diag.Diagnostics) {
	m, _, items := r.readAndDecide(ctx, config)
	d.Append(applyDiagnostics(items, deferred)...)
	if d.HasError() {
		return
	}
	d.Append(state.Set(ctx, &m)...)
}

// Read keeps the state as it is: the caps exists only in state.
func (r *resourceCapsResource) Read(context.Context, resource.ReadRequest, *resource.ReadResponse) {}

func (r *resourceCapsResource) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {
}

// ImportState takes the caps as JSON, for example `{"memory_mb":1024}`.
func (r *resourceCapsResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	var raw struct {
		CPU      *float64 `json:"cpu"`
		MemoryMB *int64   `json:"memory_mb"`
		DiskMB   *int64   `json:"disk_mb"`
		Pids     *int64   `json:"pids"`
	}
	dec := json.NewDecoder(strings.NewReader(req.ID))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		resp.Diagnostics.AddError("ConfigurationError: import ID is not a set of resource caps",
			diags.Detail(fmt.Sprintf("the import ID must be the caps as JSON: %v", err), "", "id",
				`use for example terraform import sandboxio_resource_caps.NAME '{"memory_mb":1024}'`))
		return
	}
	m, _, items := r.decide(ctx, inputs.Read[inputs.ResourceCaps]{Config: inputs.ResourceCaps{
		Caps: model.CapsRequest{CPU: raw.CPU, MemoryMB: raw.MemoryMB, DiskMB: raw.DiskMB, Pids: raw.Pids}}})
	resp.Diagnostics.Append(errorsOnly(items)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
