// Package provider is the sandboxio Terraform provider: its schema and
// configuration, and the registration of resources and data sources.
package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/diags"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/resources"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/verdict"
	"github.com/sandboxio/terraform-provider-sandboxio/policies"
)

var _ provider.Provider = (*sandboxioProvider)(nil)

// New returns a provider factory for the given version.
func New(version string) func() provider.Provider {
	return func() provider.Provider { return &sandboxioProvider{version: version} }
}

type sandboxioProvider struct{ version string }

type providerModel struct {
	DefaultBackend types.String `tfsdk:"default_backend"`
	PolicyPaths    types.List   `tfsdk:"policy_paths"`
	PolicyWaivers  types.String `tfsdk:"policy_waivers"`
}

func (p *sandboxioProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "sandboxio"
	resp.Version = p.version
}

func (p *sandboxioProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Declares code-execution sandboxes (templates, network policies, resource caps) and refuses, at " +
			"`terraform plan`, every configuration its backend cannot enforce. The decisions come from Rego policies embedded in " +
			"the provider, plus the team's own (`policy_paths`). Plans need no backend to be reachable.",
		Attributes: map[string]schema.Attribute{
			"default_backend": schema.StringAttribute{
				Optional: true,
				MarkdownDescription: policies.Expand("Backend DSN used by resources that set none: ${dsns|or}. " +
					"Defaults to `docker://`, the local Docker daemon. Never put credentials in it: each backend reads them from its " +
					"environment variables (see `data.sandboxio_backend.credential_env`)."),
			},
			"policy_paths": schema.ListAttribute{
				ElementType: types.StringType,
				Optional:    true,
				MarkdownDescription: "Directories or files of the team's own Rego policies, evaluated beside the embedded " +
					"bundle. Their packages may not use the reserved `sandboxio` namespace: built-in rules cannot be shadowed. " +
					"A rule's METADATA sets its enforcement: `advisory` findings warn, `soft-mandatory` and `hard-mandatory` ones " +
					"refuse. `sandboxio policy check --policy` loads the same directories and decides the same way.",
			},
			"policy_waivers": schema.StringAttribute{
				Optional: true,
				MarkdownDescription: "A waiver file (YAML or JSON) for soft-mandatory team rules, the same file `sandboxio policy " +
					"check --waivers` reads. Each waiver names a rule ID, a resource address pattern, a reason and an expiry " +
					"date; expired waivers, and waivers of built-in, hard-mandatory or advisory rules, do not apply. Terraform " +
					"does not tell a provider the address of the resource it plans, so here a waiver covers every resource of " +
					"the type its pattern could name; `sandboxio policy check` applies the exact address.",
			},
		},
	}
}

func (p *sandboxioProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var m providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if m.PolicyPaths.IsUnknown() || m.PolicyWaivers.IsUnknown() {
		// Resources fall back to the embedded bundle at plan and are
		// checked again at apply, when the configuration is known.
		pd := &resources.ProviderData{DefaultBackend: m.DefaultBackend.ValueString(), DefaultBackendUnknown: m.DefaultBackend.IsUnknown()}
		resp.DataSourceData = pd
		resp.ResourceData = pd
		return
	}
	// A default_backend unknown at plan (set from another resource) leaves
	// resources without a backend of their own unchecked until apply, as
	// `sandboxio policy check` reports them, rather than checked against
	// no backend at all.
	pd := &resources.ProviderData{DefaultBackend: m.DefaultBackend.ValueString(), DefaultBackendUnknown: m.DefaultBackend.IsUnknown()}
	if pd.DefaultBackend != "" {
		if _, err := backends.ParseDSN(pd.DefaultBackend); err != nil {
			resp.Diagnostics.Append(diags.FromError(err, "invalid default_backend",
				diags.PathMapper(func(string) path.Path { return path.Root("default_backend") })))
			return
		}
	}
	if !m.PolicyPaths.IsNull() {
		resp.Diagnostics.Append(m.PolicyPaths.ElementsAs(ctx, &pd.PolicyPaths, false)...)
		if resp.Diagnostics.HasError() {
			return
		}
	}
	engine, err := policy.Load(ctx, pd.PolicyPaths)
	if err != nil {
		resp.Diagnostics.Append(diags.FromError(err, "policies not loaded",
			diags.PathMapper(func(string) path.Path { return path.Root("policy_paths") })))
		return
	}
	pd.Engine = engine
	if file := m.PolicyWaivers.ValueString(); file != "" {
		w, err := verdict.LoadWaivers(file)
		if err != nil {
			resp.Diagnostics.Append(diags.FromError(err, "waivers not loaded",
				diags.PathMapper(func(string) path.Path { return path.Root("policy_waivers") })))
			return
		}
		// Waivers that cannot apply are said once here, not on every resource.
		for _, wv := range w.List {
			if status, detail := wv.Status(engine, time.Now()); status != verdict.StatusActive {
				resp.Diagnostics.AddAttributeWarning(path.Root("policy_waivers"), "Waiver "+status,
					fmt.Sprintf("waiver %s: %s", wv.Describe(), detail))
			}
		}
		pd.Waivers = w
	}
	resp.DataSourceData = pd
	resp.ResourceData = pd
}

func (p *sandboxioProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{
		resources.NewNetworkPolicyResource,
		resources.NewResourceCapsResource,
		resources.NewTemplateResource,
	}
}

func (p *sandboxioProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{
		resources.NewBackendDataSource,
		resources.NewTenantSandboxDataSource,
	}
}
