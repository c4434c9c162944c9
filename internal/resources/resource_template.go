package resources

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/diags"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

var (
	_ resource.Resource               = (*templateResource)(nil)
	_ resource.ResourceWithConfigure  = (*templateResource)(nil)
	_ resource.ResourceWithModifyPlan = (*templateResource)(nil)
)

// NewTemplateResource returns the sandboxio_template resource.
func NewTemplateResource() resource.Resource { return &templateResource{} }

type templateResource struct{ pd *ProviderData }

type templateModel struct {
	ID               types.String `tfsdk:"id"`
	Name             types.String `tfsdk:"name"`
	Backend          types.String `tfsdk:"backend"`
	Image            types.String `tfsdk:"image"`
	Runtime          types.String `tfsdk:"runtime"`
	RequireIsolation types.String `tfsdk:"require_isolation"`
	Network          types.Object `tfsdk:"network"`
	Resources        types.Object `tfsdk:"resources"`
	TimeoutSeconds   types.Int64  `tfsdk:"timeout_seconds"`
	LifetimeSeconds  types.Int64  `tfsdk:"lifetime_seconds"`
	Env              types.Map    `tfsdk:"env"`
	SecretNames      types.List   `tfsdk:"secret_names"`
	Labels           types.Map    `tfsdk:"labels"`
	IsolationTier    types.String `tfsdk:"isolation_tier"`
	Spec             types.String `tfsdk:"spec"`
	SpecSHA256       types.String `tfsdk:"spec_sha256"`
}

func (r *templateResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_template"
}

func (r *templateResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "A sandbox template: the backend, image, isolation requirement, network policy, resource caps, " +
			"timeouts, environment, secret names and labels of the sandboxes opened from it. `terraform plan` evaluates it " +
			"against the policy bundle and the backend's capabilities and refuses whatever the backend cannot enforce. " +
			"`spec` is the canonical, policy-checked JSON that `data.sandboxio_tenant_sandbox` and the run-time helper use.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed:            true,
				MarkdownDescription: "The template name.",
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name": schema.StringAttribute{
				Required:            true,
				MarkdownDescription: "Template name; recorded on every sandbox as the `sandboxio.template` label.",
				PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"backend": schema.StringAttribute{
				Optional: true, Computed: true,
				MarkdownDescription: "Backend DSN: `docker://`, `e2b://`, `modal://APP`, `vercel://TEAM/PROJECT` or `daytona://`, " +
					"with non-secret query options only. Defaults to the provider's `default_backend`. Credentials come from " +
					"environment variables, never from the DSN.",
			},
			"image": schema.StringAttribute{
				Required: true,
				MarkdownDescription: "What the sandbox starts from: a Docker image, an E2B template, a Daytona snapshot, ... " +
					"Pulling an image happens on the host, outside the sandbox, and is not governed by its egress policy.",
			},
			"runtime": schema.StringAttribute{
				Optional: true,
				MarkdownDescription: "Docker only: the OCI runtime. `runc` (default, CONTAINER tier), `runsc` (gVisor, GVISOR tier) " +
					"or `kata` (MICROVM tier).",
			},
			"require_isolation": schema.StringAttribute{
				Optional: true,
				MarkdownDescription: "Minimum isolation tier: `CONTAINER`, `GVISOR` or `MICROVM` (ranked by escape resistance). " +
					"Checked before anything is provisioned. CONTAINER suits trusted, development and CI code; gVisor is defence in " +
					"depth, not equivalent to a VM; MICROVM is the recommended floor for untrusted multi-tenant code. A backend of " +
					"UNKNOWN tier satisfies no requirement.",
			},
			"network": schema.SingleNestedAttribute{
				Optional: true, Computed: true,
				MarkdownDescription: "Egress policy, usually `sandboxio_network_policy.NAME.policy`. Defaults to deny all egress.",
				Attributes: map[string]schema.Attribute{
					"egress": schema.StringAttribute{Optional: true, Computed: true, MarkdownDescription: "`deny` (default) or `allow`."},
					"allow": schema.ListAttribute{ElementType: types.StringType, Optional: true, Computed: true,
						MarkdownDescription: "Allowed destinations under deny, where the backend supports allow lists (E2B, Modal, Vercel)."},
				},
			},
			"resources": schema.SingleNestedAttribute{
				Optional: true, Computed: true,
				MarkdownDescription: "Resource caps, usually `sandboxio_resource_caps.NAME.caps`. Unset caps take their defaults.",
				Attributes: map[string]schema.Attribute{
					"cpu":       schema.Float64Attribute{Optional: true, Computed: true, MarkdownDescription: "vCPUs."},
					"memory_mb": schema.Int64Attribute{Optional: true, Computed: true, MarkdownDescription: "Memory (and swap) in MiB."},
					"disk_mb":   schema.Int64Attribute{Optional: true, Computed: true, MarkdownDescription: "Writable disk in MiB."},
					"pids":      schema.Int64Attribute{Optional: true, Computed: true, MarkdownDescription: "Process-count ceiling."},
				},
			},
			"timeout_seconds": schema.Int64Attribute{
				Optional: true, Computed: true,
				MarkdownDescription: fmt.Sprintf("Bound of every create, run and run-code call, in seconds (default %d). "+
					"There is no way to ask for an unbounded call.", model.DefaultTimeoutSeconds),
			},
			"lifetime_seconds": schema.Int64Attribute{
				Optional: true, Computed: true,
				MarkdownDescription: fmt.Sprintf("Lifetime of a sandbox in seconds (default %d), enforced on the backend's side so the "+
					"sandbox ends even if the client is gone.", model.DefaultLifetimeSeconds),
			},
			"env": schema.MapAttribute{
				ElementType: types.StringType, Optional: true,
				MarkdownDescription: "Plain environment variables. They are stored in state and in `spec`: put credentials in " +
					"`secret_names` instead (a credential-looking value here is warned about).",
			},
			"secret_names": schema.ListAttribute{
				ElementType: types.StringType, Optional: true,
				MarkdownDescription: "Names of secrets injected at run time. Only names live here; values come from the caller " +
					"when a sandbox is opened and are never stored.",
			},
			"labels": schema.MapAttribute{
				ElementType: types.StringType, Optional: true,
				MarkdownDescription: "Labels set on every sandbox, propagated to the backend's native labels. Keys under the " +
					"reserved `sandboxio.` prefix are refused.",
			},
			"isolation_tier": schema.StringAttribute{
				Computed:            true,
				MarkdownDescription: "The tier the backend (and runtime) gives: UNKNOWN, CONTAINER, GVISOR or MICROVM.",
			},
			"spec": schema.StringAttribute{
				Computed:            true,
				MarkdownDescription: "The effective, policy-checked spec as canonical JSON (defaults filled in).",
			},
			"spec_sha256": schema.StringAttribute{
				Computed:            true,
				MarkdownDescription: "sha256 of `spec`, hex.",
			},
		},
	}
}

func (r *templateResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	pd, d := providerData(req.ProviderData)
	resp.Diagnostics.Append(d...)
	if pd != nil {
		r.pd = pd
	}
}

// templatePaths maps finding attributes onto the template's schema.
var templatePaths diags.PathMapper = diags.Dotted

// render normalizes the configuration into an input document and a spec.
// It returns known=false when a value is still unknown.
func (r *templateResource) render(ctx context.Context, m *templateModel) (spec model.Spec, in policy.Input, known bool, d diag.Diagnostics) {
	for _, v := range []attr.Value{m.Name, m.Backend, m.Image, m.Runtime, m.RequireIsolation, m.Network, m.Resources,
		m.TimeoutSeconds, m.LifetimeSeconds, m.Env, m.SecretNames, m.Labels} {
		if !fullyKnown(v) {
			return spec, in, false, nil
		}
	}
	ref, dsn, err := resolveBackend(m.Backend.ValueString(), m.Runtime.ValueString(), r.pd)
	if err != nil {
		d.Append(backendError(err, templatePaths))
		return spec, in, true, d
	}
	if ref == nil {
		d.Append(diags.FromError(&model.Error{
			Class: model.ConfigurationError, Rule: "SBX-DSN-001", Attribute: "backend",
			Message: "the template has no backend and the provider sets no default_backend",
			Fix:     `set backend (for example "docker://") on the template, or default_backend on the provider`,
		}, "no backend", templatePaths))
		return spec, in, true, d
	}
	network := networkFromObject(ctx, m.Network, &d)
	caps := capsFromObject(m.Resources)
	env, dd := stringMap(ctx, m.Env)
	d.Append(dd...)
	secrets, dd := stringList(ctx, m.SecretNames)
	d.Append(dd...)
	labels, dd := stringMap(ctx, m.Labels)
	d.Append(dd...)
	if d.HasError() {
		return spec, in, true, d
	}
	timeout := int64OrDefault(m.TimeoutSeconds, model.DefaultTimeoutSeconds)
	lifetime := int64OrDefault(m.LifetimeSeconds, model.DefaultLifetimeSeconds)
	tier := model.TierUnknown
	if c, ok := backends.Lookup(ref.Key); ok {
		tier = c.Tier
	}
	runtime := ""
	if ref.Scheme == "docker" {
		runtime = ref.Runtime
	}
	in = policy.Input{
		Kind:    policy.KindTemplate,
		Backend: ref,
		Template: &policy.TemplateInput{
			Name: m.Name.ValueString(), Image: m.Image.ValueString(), Runtime: m.Runtime.ValueString(),
			RequireIsolation: m.RequireIsolation.ValueString(),
			TimeoutSeconds:   timeout, LifetimeSeconds: lifetime,
			Env: env, SecretNames: secrets, Labels: labels,
		},
		Network:   &network,
		Resources: &caps,
	}
	spec = model.Spec{
		SpecVersion: model.SpecVersion, Name: m.Name.ValueString(), Backend: dsn, Image: m.Image.ValueString(),
		Runtime: runtime, RequireIsolation: model.Tier(m.RequireIsolation.ValueString()), IsolationTier: tier,
		Network: network, Resources: caps, TimeoutSeconds: timeout, LifetimeSeconds: lifetime,
		Env: env, SecretNames: secrets, Labels: labels,
	}
	return spec, in, true, d
}

// decide renders, evaluates and fills in the computed values.
func (r *templateResource) decide(ctx context.Context, m *templateModel) (bool, diag.Diagnostics) {
	spec, in, known, d := r.render(ctx, m)
	if !known || d.HasError() {
		return known, d
	}
	d.Append(evaluate(ctx, r.pd, in, templatePaths)...)
	if d.HasError() {
		return true, d
	}
	canon, sum, err := spec.Canonical()
	if err != nil {
		d.AddError("Spec rendering failed", err.Error())
		return true, d
	}
	m.ID = m.Name
	if m.Backend.IsNull() {
		// Only fill in the default: a configured DSN stays as written, or
		// Terraform would see the plan disagree with the configuration.
		m.Backend = types.StringValue(spec.Backend)
	}
	m.Network = networkObject(spec.Network)
	m.Resources = capsObject(spec.Resources)
	m.TimeoutSeconds = types.Int64Value(spec.TimeoutSeconds)
	m.LifetimeSeconds = types.Int64Value(spec.LifetimeSeconds)
	m.IsolationTier = types.StringValue(string(spec.IsolationTier))
	m.Spec = types.StringValue(string(canon))
	m.SpecSHA256 = types.StringValue(sum)
	return true, d
}

func (r *templateResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	var m templateModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	known, d := r.decide(ctx, &m)
	resp.Diagnostics.Append(d...)
	if !known || resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &m)...)
}

func (r *templateResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	r.apply(ctx, req.Config, &resp.State, &resp.Diagnostics)
}

func (r *templateResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	r.apply(ctx, req.Config, &resp.State, &resp.Diagnostics)
}

// apply checks the configuration again, now fully known, before anything
// is stored or provisioned.
func (r *templateResource) apply(ctx context.Context, config tfsdk.Config, state *tfsdk.State, d *diag.Diagnostics) {
	var m templateModel
	d.Append(config.Get(ctx, &m)...)
	if d.HasError() {
		return
	}
	_, dd := r.decide(ctx, &m)
	d.Append(errorsOnly(dd)...)
	if d.HasError() {
		return
	}
	d.Append(state.Set(ctx, &m)...)
}

func (r *templateResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m templateModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *templateResource) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {
}

func networkFromObject(ctx context.Context, o types.Object, d *diag.Diagnostics) model.NetworkPolicy {
	n := model.DefaultNetworkPolicy()
	if o.IsNull() {
		return n
	}
	attrs := o.Attributes()
	if e, ok := attrs["egress"].(types.String); ok && !e.IsNull() {
		n.Egress = e.ValueString()
	}
	if l, ok := attrs["allow"].(types.List); ok {
		allow, dd := stringList(ctx, l)
		d.Append(dd...)
		n.Allow = allow
	}
	return n.Normalized()
}

func capsFromObject(o types.Object) model.Caps {
	var req model.CapsRequest
	if o.IsNull() {
		return req.Resolve()
	}
	attrs := o.Attributes()
	if v, ok := attrs["cpu"].(types.Float64); ok && !v.IsNull() {
		x := v.ValueFloat64()
		req.CPU = &x
	}
	req.MemoryMB = int64Ptr(attrs["memory_mb"])
	req.DiskMB = int64Ptr(attrs["disk_mb"])
	req.Pids = int64Ptr(attrs["pids"])
	return req.Resolve()
}

func int64Ptr(v attr.Value) *int64 {
	i, ok := v.(types.Int64)
	if !ok || i.IsNull() {
		return nil
	}
	x := i.ValueInt64()
	return &x
}

func int64OrDefault(v types.Int64, def int64) int64 {
	if v.IsNull() {
		return def
	}
	return v.ValueInt64()
}

// fullyKnown reports whether a value holds no unknown anywhere inside.
func fullyKnown(v attr.Value) bool {
	if v == nil || v.IsNull() {
		return true
	}
	if v.IsUnknown() {
		return false
	}
	switch x := v.(type) {
	case types.Object:
		for _, a := range x.Attributes() {
			if !fullyKnown(a) {
				return false
			}
		}
	case types.List:
		for _, a := range x.Elements() {
			if !fullyKnown(a) {
				return false
			}
		}
	case types.Map:
		for _, a := range x.Elements() {
			if !fullyKnown(a) {
				return false
			}
		}
	}
	return true
}
