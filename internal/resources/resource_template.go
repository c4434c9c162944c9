package resources

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker/disksplit"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/diags"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
	"github.com/sandboxio/terraform-provider-sandboxio/policies"
)

var (
	_ resource.Resource               = (*templateResource)(nil)
	_ resource.ResourceWithConfigure  = (*templateResource)(nil)
	_ resource.ResourceWithModifyPlan = (*templateResource)(nil)
)

// NewTemplateResource returns the sandboxio_template resource.
func NewTemplateResource() resource.Resource { return &templateResource{} }

type templateResource struct{ pd *ProviderData }

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
				Required: true,
				MarkdownDescription: "Template name: 1 to 128 letters, digits, `.`, `_` or `-`, starting with a letter or digit " +
					"(anything else is refused, SBX-LBL-003). Recorded on every sandbox as the `sandboxio.template` label.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"backend": schema.StringAttribute{
				Optional: true, Computed: true,
				MarkdownDescription: policies.Expand("Backend DSN: ${dsns|or}, " +
					"with non-secret query options only. Defaults to the provider's `default_backend`, which is `docker://` (the " +
					"local Docker daemon) unless set. Credentials come from " +
					"environment variables, never from the DSN."),
			},
			"image": schema.StringAttribute{
				Required: true,
				MarkdownDescription: "What the sandbox starts from: a Docker image, an E2B template, a Daytona snapshot, ... " +
					"Pulling an image happens on the host, outside the sandbox, and is not governed by its egress policy.",
			},
			"runtime": schema.StringAttribute{
				Optional: true,
				MarkdownDescription: policies.Expand("Docker only: the OCI runtime, with the tier it gives: ${docker_runtimes|or}; " +
					"`runc` by default."),
			},
			"require_isolation": schema.StringAttribute{
				Optional: true,
				MarkdownDescription: "Minimum isolation tier: `CONTAINER`, `GVISOR` or `MICROVM` (ranked by escape resistance). " +
					"Checked before anything is provisioned. CONTAINER suits trusted, development and CI code; gVisor is defence in " +
					"depth, not equivalent to a VM; MICROVM is the recommended floor for untrusted multi-tenant code. A backend of " +
					"UNKNOWN tier satisfies no requirement.",
			},
			"network":   templateNetworkAttribute(),
			"resources": templateResourcesAttribute(),
			"timeout_seconds": schema.Int64Attribute{
				Optional: true, Computed: true,
				MarkdownDescription: fmt.Sprintf("Bound of every create, run and run-code call, in seconds (default %d, at most %d). "+
					"There is no way to ask for an unbounded call.", model.DefaultTimeoutSeconds, model.MaxTimeoutSeconds),
			},
			"lifetime_seconds": schema.Int64Attribute{
				Optional: true, Computed: true,
				MarkdownDescription: fmt.Sprintf("Lifetime of a sandbox in seconds (default %d, at most %d, or the backend's own maximum "+
					"if lower), enforced on the backend's side so the sandbox ends even if the client is gone.",
					model.DefaultLifetimeSeconds, model.MaxTimeoutSeconds),
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
			"brokered_secrets": templateBrokeredAttribute(),
			"labels": schema.MapAttribute{
				ElementType: types.StringType, Optional: true,
				MarkdownDescription: "Labels set on every sandbox, propagated to the backend's native labels. Keys under the " +
					"reserved `sandboxio.` prefix are refused.",
			},
			"volume":    templateVolumeAttribute(),
			"warm_pool": templateWarmPoolAttribute(),
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
			"image_id": schema.StringAttribute{
				Computed: true,
				MarkdownDescription: "Docker: the content-addressed ID of the image on the daemon, checked at apply (the image " +
					"must already be there: prepare it on the host; that pull is not governed by the sandbox's egress policy). " +
					"Null on backends without live checks in this build, or whose live check reports no image ID (Modal).",
			},
			"disk_cap_strategy": schema.StringAttribute{
				Computed:            true,
				MarkdownDescription: diskCapStrategyDescription(),
			},
			"pids_cap_strategy": schema.StringAttribute{
				Computed:            true,
				MarkdownDescription: "Docker: how the process ceiling is enforced under the template's runtime.",
			},
		},
	}
}

// templateNetworkAttribute is the template's egress policy.
func templateNetworkAttribute() schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{
		Optional: true, Computed: true,
		MarkdownDescription: "Egress policy, usually `sandboxio_network_policy.NAME.policy`. Defaults to deny all egress.",
		Attributes: map[string]schema.Attribute{
			"egress": schema.StringAttribute{Optional: true, Computed: true, MarkdownDescription: "`deny` (default) or `allow`."},
			"allow": schema.ListAttribute{ElementType: types.StringType, Optional: true, Computed: true,
				MarkdownDescription: policies.Expand("Allowed destinations under deny, where the backend supports allow lists (${allowlist}).")},
		},
	}
}

// templateBrokeredAttribute is the template's brokered secrets. Like
// secret_names it holds names only; every check is the policy's
// (SBX-SEC-005 to SBX-SEC-011), none is repeated in the schema.
func templateBrokeredAttribute() schema.MapNestedAttribute {
	return schema.MapNestedAttribute{
		Optional: true,
		MarkdownDescription: policies.Expand("Secrets the sandbox never holds, keyed by variable name. Inside the sandbox the " +
			"variable holds a placeholder; the egress gateway writes the real value, read from the caller's environment at " +
			"open like a `secret_names` value, into `header` of requests to `hosts` only. Each host must be a domain name " +
			"that `network.allow` covers; a name may not also be in `secret_names` or `env`. Only where a broker runs " +
			"(${secret_broker|or}); refused at plan everywhere else. See the brokered secrets guide."),
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"hosts": schema.ListAttribute{ElementType: types.StringType, Required: true,
				MarkdownDescription: "Domain names the value may be sent to (no addresses, ports or wildcards: requests " +
					"are matched by TLS server name)."},
			"header": schema.StringAttribute{Required: true,
				MarkdownDescription: "Request header that carries the value, such as `Authorization`. Headers that frame " +
					"the message or are consumed by the next hop (`Host`, `Content-Length`, `Connection`, ...) are refused."},
			"format": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(model.DefaultBrokeredFormat),
				MarkdownDescription: "The header's value, with one `%s` where the secret goes (for example `Bearer %s`); " +
					"default `%s`, the value alone."},
		}},
	}
}

// templateVolumeAttribute is the template's persistent storage.
func templateVolumeAttribute() schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{
		Optional: true,
		MarkdownDescription: "A named persistent volume mounted into every sandbox of the template, scoped per tenant: each " +
			"tenant's sandboxes mount that tenant's own volume (on Modal, a Volume named from `name` and a digest of the tenant " +
			"id, created when missing), so one tenant never sees another's files. Only backends that can scope storage per " +
			"tenant accept it (Modal); any other refuses it at plan (SBX-VOL-001).",
		Attributes: map[string]schema.Attribute{
			"name": schema.StringAttribute{Required: true, MarkdownDescription: "Volume name: 1 to 38 letters, digits, `.`, " +
				"`_` or `-`, starting with a letter or digit (the backend appends the tenant's digest)."},
			"mount_path": schema.StringAttribute{Required: true, MarkdownDescription: "Where it is mounted: a clean absolute " +
				"path other than `/`, not under `/proc`, `/sys` or `/dev`."},
		},
	}
}

// templateWarmPoolAttribute is the template's warm pool.
func templateWarmPoolAttribute() schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{
		Optional: true,
		MarkdownDescription: "Opt-in warm pool: `size` sandboxes of the template kept ready by the Go API (`sandbox.PoolConfig`) " +
			"and `sandboxio mcp`, created with the template's labels and no tenant, hardened and checked like any sandbox. " +
			"An open claims one and binds it to its tenant and session (on Docker by renaming the container to the session's " +
			"name); it is removed when closed, never reused, and its lifetime counts from the claim. A warm sandbox not " +
			"claimed within `max_idle_seconds` is removed by the backend. Refused at plan on a backend that cannot keep a pool " +
			"(SBX-WRM-001: only Docker with runc today). See the warm pools guide.",
		Attributes: map[string]schema.Attribute{
			"size": schema.Int64Attribute{Required: true, MarkdownDescription: "Warm sandboxes kept ready: 1 to 64 (SBX-WRM-002)."},
			"max_idle_seconds": schema.Int64Attribute{Optional: true, MarkdownDescription: "How long a warm sandbox waits for a " +
				"claim before the backend removes it: 10 to 2592000 seconds (SBX-WRM-003); default 600."},
		},
	}
}

// templateResourcesAttribute is the template's resource caps. The split of
// disk_mb over Docker's writable paths is quoted from disksplit's table.
func templateResourcesAttribute() schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{
		Optional: true, Computed: true,
		MarkdownDescription: "Resource caps, usually `sandboxio_resource_caps.NAME.caps`. Unset caps take their defaults.",
		Attributes: map[string]schema.Attribute{
			"cpu":       schema.Float64Attribute{Optional: true, Computed: true, MarkdownDescription: "vCPUs."},
			"memory_mb": schema.Int64Attribute{Optional: true, Computed: true, MarkdownDescription: "Memory (and swap) in MiB."},
			"disk_mb": schema.Int64Attribute{Optional: true, Computed: true, MarkdownDescription: "Writable disk in MiB. On Docker " +
				"it bounds every writable mount together. Without a per-container size (the tmpfs strategy) it is split over the " +
				"writable paths: " + disksplit.Summary() + ", so one path holds about " +
				disksplit.FormatPercent(disksplit.RestPercent()) + " of it; on runc /dev and /dev/mqueue are read-only; under " +
				"gVisor (runsc) files written into /dev count against memory_mb instead, as gVisor cannot size /dev. tmpfs pages " +
				"also count against memory."},
			"pids": schema.Int64Attribute{Optional: true, Computed: true, MarkdownDescription: "Process-count ceiling."},
		},
	}
}

// diskCapStrategyDescription describes disk_cap_strategy, with the split of
// disk_mb quoted from disksplit's table.
func diskCapStrategyDescription() string {
	return "Docker: how this daemon enforces `disk_mb`, with each mount's size: a per-container size of the " +
		"writable layer where the storage driver supports it, otherwise a read-only root filesystem with tmpfs mounts " +
		disksplit.Summary(disksplit.ShmPath) + "; either way " + disksplit.ShmPath + " gets " +
		disksplit.PercentText(disksplit.ShmPath) + ", and all of them add up to `disk_mb`. It also says what becomes of /dev: " +
		"read-only on runc, charged to memory_mb under gVisor. Never dropped."
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

// templateConfig is the template as configured, read by the reader
// `sandboxio policy check` uses too (inputs.ReadTemplate).
type templateConfig = inputs.Read[inputs.Template]

// render normalizes the configuration into an input document and a spec,
// through the builder that `sandboxio policy check` uses too.
func (r *templateResource) render(c templateConfig) (model.Spec, policy.Input, diag.Diagnostics) {
	var d diag.Diagnostics
	spec, in, err := c.Config.Build(r.pd.defaultBackend())
	if err != nil {
		d.Append(backendErrorSummary(err, "invalid backend", templatePaths))
		return model.Spec{}, policy.Input{}, d
	}
	return spec, in, d
}

// decide reads the configuration, evaluates it and returns the planned
// value: base (the plan Terraform proposed) with every computed attribute
// filled in. It returns known=false when the check must wait for apply.
func (r *templateResource) decide(ctx context.Context, config, base, prior tftypes.Value) (tftypes.Value, model.Spec, bool, diag.Diagnostics) {
	var d diag.Diagnostics
	c, err := inputs.ReadTemplate(config)
	if err != nil {
		d.Append(diags.FromError(err, "Reading the template configuration failed", templatePaths))
		return base, model.Spec{}, true, d
	}
	if r.pd.waitsForDefault(c.Backend) && !slices.Contains(c.Unknown, "backend") {
		c.Unknown = append(c.Unknown, "the provider's default_backend")
	}
	if !c.Known() {
		d.Append(checkedAtApply("sandboxio_template", c.Unknown))
		return base, model.Spec{}, false, d
	}
	spec, in, d := r.render(c)
	if d.HasError() {
		return base, model.Spec{}, true, d
	}
	d.Append(evaluateWithPlaceholders(ctx, r.pd, in, templatePaths, c.Placeholders)...)
	if d.HasError() {
		return base, model.Spec{}, true, d
	}
	var canon []byte
	var sum string
	if len(c.Placeholders) == 0 {
		if canon, sum, err = spec.Canonical(); err != nil {
			d.AddError("Spec rendering failed", err.Error())
			return base, model.Spec{}, true, d
		}
	}
	attrs, err := inputs.Object(base)
	if err != nil {
		d.AddError("Reading the planned template failed", err.Error())
		return base, model.Spec{}, true, d
	}
	objType, _ := base.Type().(tftypes.Object)
	attrs["id"] = stringValue(c.Config.Name)
	if !c.BackendSet {
		// Only fill in the default: a configured DSN stays as written, or
		// Terraform would see the plan disagree with the configuration.
		attrs["backend"] = stringValue(spec.Backend)
	}
	attrs["network"] = tftypes.NewValue(objType.AttributeTypes["network"], map[string]tftypes.Value{
		"egress": stringValue(spec.Network.Egress),
		"allow":  stringListValue(spec.Network.Allow),
	})
	attrs["resources"] = tftypes.NewValue(objType.AttributeTypes["resources"], map[string]tftypes.Value{
		"cpu":       numberValue(spec.Resources.CPU),
		"memory_mb": intValue(spec.Resources.MemoryMB),
		"disk_mb":   intValue(spec.Resources.DiskMB),
		"pids":      intValue(spec.Resources.Pids),
	})
	attrs["timeout_seconds"] = intValue(spec.TimeoutSeconds)
	attrs["lifetime_seconds"] = intValue(spec.LifetimeSeconds)
	attrs["isolation_tier"] = stringValue(string(spec.IsolationTier))
	if len(c.Placeholders) > 0 {
		// The spec holds the values unknown until apply, and so does what
		// the live check finds from it.
		attrs["spec"] = unknownString
		attrs["spec_sha256"] = unknownString
		setLiveFacts(attrs, spec, "", tftypes.Value{})
		return tftypes.NewValue(objType, attrs), spec, true, d
	}
	attrs["spec"] = stringValue(string(canon))
	attrs["spec_sha256"] = stringValue(sum)
	setLiveFacts(attrs, spec, sum, prior)
	return tftypes.NewValue(objType, attrs), spec, true, d
}

var unknownString = tftypes.NewValue(tftypes.String, tftypes.UnknownValue)

func (r *templateResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return // destroy
	}
	planned, _, known, d := r.decide(ctx, req.Config.Raw, req.Plan.Raw, req.State.Raw)
	resp.Diagnostics.Append(d...)
	if !known || resp.Diagnostics.HasError() {
		return
	}
	resp.Plan.Raw = planned
}

func (r *templateResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	r.apply(ctx, req.Config.Raw, req.Plan.Raw, &resp.State, &resp.Diagnostics)
}

func (r *templateResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	r.apply(ctx, req.Config.Raw, req.Plan.Raw, &resp.State, &resp.Diagnostics)
}

// apply checks the configuration again, now fully known, before anything
// is stored or provisioned.
func (r *templateResource) apply(ctx context.Context, config, plan tftypes.Value, state *tfsdk.State, d *diag.Diagnostics) {
	deferred := deferredAtPlan(plan, "spec") // before decide, which fills in plan's attributes
	planned, spec, _, dd := r.decide(ctx, config, plan, tftypes.Value{})
	d.Append(applyDiagnostics(dd, deferred)...)
	if d.HasError() {
		return
	}
	// The checks that need the live backend run now, before anything is
	// stored: runtime registered, image present, disk-cap strategy.
	facts, err := preflight(ctx, spec)
	if err != nil {
		d.Append(diags.FromError(err, "the backend cannot run this template", templatePaths))
		return
	}
	attrs, err := inputs.Object(planned)
	if err != nil {
		d.AddError("Reading the planned template failed", err.Error())
		return
	}
	if facts != nil {
		attrs["image_id"] = stringValue(facts.ImageID)
		if facts.ImageID == "" {
			// The backend reports no image ID (Modal): null, not "", which
			// Read sets for an image it found missing.
			attrs["image_id"] = tftypes.NewValue(tftypes.String, nil)
		}
		attrs["disk_cap_strategy"] = stringValue(facts.DiskCapStrategy)
		attrs["pids_cap_strategy"] = stringValue(facts.PidsCapStrategy)
	}
	state.Raw = tftypes.NewValue(planned.Type(), attrs)
}

var liveAttrs = []string{"image_id", "disk_cap_strategy", "pids_cap_strategy"}

// setLiveFacts plans the attributes only a live check can know: unknown
// until apply on a backend with live checks (kept from state while the spec
// is unchanged and the image was found), null elsewhere.
func setLiveFacts(attrs map[string]tftypes.Value, spec model.Spec, sum string, prior tftypes.Value) {
	if !hasLiveChecks(spec) {
		for _, a := range liveAttrs {
			attrs[a] = tftypes.NewValue(tftypes.String, nil)
		}
		return
	}
	if old, err := inputs.Object(prior); err == nil && old != nil {
		oldSum, _ := inputs.String(old["spec_sha256"])
		oldImage, _ := inputs.String(old["image_id"])
		// A null image_id after a check that ran (its strategies are
		// known) is a backend that reports no image ID (Modal); "" is an
		// image Read found missing, checked again.
		noImageID := old["image_id"].IsNull() && !old["pids_cap_strategy"].IsNull() && old["pids_cap_strategy"].IsKnown()
		if oldSum == sum && (oldImage != "" || noImageID) {
			for _, a := range liveAttrs {
				attrs[a] = old[a]
			}
			return
		}
	}
	for _, a := range liveAttrs {
		attrs[a] = tftypes.NewValue(tftypes.String, tftypes.UnknownValue)
	}
}

// Read checks, when the backend is reachable, that the image is still
// there: a missing image clears image_id so that the next plan shows the
// drift and apply says how to prepare the image. An unreachable backend
// leaves the state as it is, so plans keep working with no daemon.
func (r *templateResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	attrs, err := inputs.Object(req.State.Raw)
	if err != nil || attrs == nil {
		return
	}
	raw, _ := inputs.String(attrs["spec"])
	spec, err := model.ParseSpec([]byte(raw))
	if err != nil || !hasLiveChecks(spec) {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := preflight(ctx, spec); err != nil {
		var me *model.Error
		if errors.As(err, &me) && me.Attribute == "image" {
			attrs["image_id"] = stringValue("")
			resp.State.Raw = tftypes.NewValue(req.State.Raw.Type(), attrs)
		}
	}
}

func (r *templateResource) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {
}
