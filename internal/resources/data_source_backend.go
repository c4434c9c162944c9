package resources

import (
	"context"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/diags"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/policies"
)

var (
	_ datasource.DataSource              = (*backendDataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*backendDataSource)(nil)
)

// NewBackendDataSource returns the sandboxio_backend data source.
func NewBackendDataSource() datasource.DataSource { return &backendDataSource{} }

type backendDataSource struct{ pd *ProviderData }

type backendModel struct {
	DSN                    types.String `tfsdk:"dsn"`
	Runtime                types.String `tfsdk:"runtime"`
	Scheme                 types.String `tfsdk:"scheme"`
	CapabilityKey          types.String `tfsdk:"capability_key"`
	IsolationTier          types.String `tfsdk:"isolation_tier"`
	EgressDeny             types.Bool   `tfsdk:"egress_deny"`
	EgressDenyControl      types.String `tfsdk:"egress_deny_control"`
	Allowlist              types.Bool   `tfsdk:"allowlist"`
	AllowKinds             types.List   `tfsdk:"allow_kinds"`
	AllowlistNote          types.String `tfsdk:"allowlist_note"`
	SecretBroker           types.Bool   `tfsdk:"secret_broker"`
	SecretBrokerNote       types.String `tfsdk:"secret_broker_note"`
	CapsMode               types.String `tfsdk:"caps_mode"`
	SettableCaps           types.List   `tfsdk:"settable_caps"`
	MemoryBoundsSwap       types.Bool   `tfsdk:"memory_bounds_swap"`
	PidsCeiling            types.Bool   `tfsdk:"pids_ceiling"`
	NativeLabels           types.Bool   `tfsdk:"native_labels"`
	TenantStorage          types.Bool   `tfsdk:"tenant_storage"`
	BlockedEgressReporting types.Bool   `tfsdk:"blocked_egress_reporting"`
	MaxLifetimeSeconds     types.Int64  `tfsdk:"max_lifetime_seconds"`
	CredentialEnv          types.List   `tfsdk:"credential_env"`
	LiveChecks             types.List   `tfsdk:"live_checks"`
}

func (d *backendDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_backend"
}

func (d *backendDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	computed := func(desc string) schema.Attribute {
		return schema.StringAttribute{Computed: true, MarkdownDescription: desc}
	}
	flag := func(desc string) schema.Attribute {
		return schema.BoolAttribute{Computed: true, MarkdownDescription: desc}
	}
	list := func(desc string) schema.Attribute {
		return schema.ListAttribute{ElementType: types.StringType, Computed: true, MarkdownDescription: desc}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "What a backend can enforce, as the policy bundle sees it: the isolation tier, whether it can deny " +
			"egress and filter it per destination, which caps it applies per sandbox, and where its credentials come from. " +
			"Nothing is contacted: this reads the capability data the rules use.",
		Attributes: map[string]schema.Attribute{
			"dsn": schema.StringAttribute{Optional: true, Computed: true,
				MarkdownDescription: "Backend DSN; defaults to the provider's `default_backend`."},
			"runtime": schema.StringAttribute{Optional: true,
				MarkdownDescription: policies.Expand("Docker runtime: ${docker_runtimes|or}; defaults to `runc`.")},
			"scheme":              computed("DSN scheme: " + orList(backends.Schemes()) + "."),
			"capability_key":      computed("Key of the capability descriptor (`docker/<runtime>` or the scheme)."),
			"isolation_tier":      computed("Isolation tier: UNKNOWN, CONTAINER, GVISOR or MICROVM."),
			"egress_deny":         flag("Whether the backend can deny all egress."),
			"egress_deny_control": computed("The backend control that denies egress."),
			"allowlist":           flag("Whether the backend enforces an egress allow list."),
			"allow_kinds":         list("Kinds of allow entries accepted: cidr, ip, domain."),
			"allowlist_note":      computed("How allow lists map (or why they are refused) on this backend."),
			"secret_broker": flag(policies.Expand("Whether a broker runs that writes `brokered_secrets` into requests to their " +
				"hosts, so the sandbox never holds the value (${secret_broker}); elsewhere brokered secrets are refused.")),
			"secret_broker_note":       computed("How brokered secrets are injected on this backend, or why they are refused."),
			"caps_mode":                computed("`per_sandbox`, `template` (caps fixed by the template; non-default caps refused) or `none`."),
			"settable_caps":            list("Caps that can be set per sandbox."),
			"memory_bounds_swap":       flag("Whether the memory cap also bounds swap."),
			"pids_ceiling":             flag("Whether the backend applies a process-count ceiling."),
			"native_labels":            flag("Whether labels reach the backend's native labels."),
			"tenant_storage":           flag("Whether the backend offers tenant-scoped storage."),
			"blocked_egress_reporting": flag("Whether the backend reports blocked egress attempts (for the audit record)."),
			"max_lifetime_seconds": schema.Int64Attribute{Computed: true,
				MarkdownDescription: "Longest sandbox lifetime the backend allows; 0 for no backend limit."},
			"credential_env": list("Environment variables the backend's credentials are read from. Use least-privilege, short-lived keys."),
			"live_checks":    list("Checks made against the live backend at apply and open, not at plan."),
		},
	}
}

func (d *backendDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	pd, dd := providerData(req.ProviderData)
	resp.Diagnostics.Append(dd...)
	if pd != nil {
		d.pd = pd
	}
}

func (d *backendDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m backendModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	dsn := m.DSN.ValueString()
	if dsn == "" {
		dsn = d.pd.defaultBackend()
	}
	parsed, err := backends.ParseDSN(dsn)
	if err != nil {
		resp.Diagnostics.Append(diags.FromError(err, "invalid backend", onAttribute("dsn")))
		return
	}
	// The registry selects the descriptor: SCHEME/RUNTIME or the scheme.
	key := parsed.CapabilityKey(m.Runtime.ValueString())
	c, ok := backends.Lookup(key)
	if !ok {
		resp.Diagnostics.Append(diags.FromError(backends.RuleRefusal(rules.IsoNoCapsData, "runtime",
			"no capability description for "+key), "unknown runtime", onAttribute("runtime")))
		return
	}
	if m.DSN.IsNull() {
		// Keep a DSN the user wrote as written: rewriting it to its normal
		// form would make Terraform see an inconsistent result.
		m.DSN = types.StringValue(parsed.String())
	}
	m.Scheme = types.StringValue(parsed.Scheme)
	m.CapabilityKey = types.StringValue(key)
	m.IsolationTier = types.StringValue(string(c.Tier))
	m.EgressDeny = types.BoolValue(c.Network.Deny)
	m.EgressDenyControl = types.StringValue(c.Network.DenyControl)
	m.Allowlist = types.BoolValue(c.Network.Allowlist)
	m.AllowKinds = listValue(c.Network.AllowKinds)
	m.AllowlistNote = types.StringValue(c.Network.AllowlistNote)
	m.SecretBroker = types.BoolValue(c.Network.SecretBroker)
	m.SecretBrokerNote = types.StringValue(c.Network.SecretBrokerNote)
	m.CapsMode = types.StringValue(c.Caps.Mode)
	m.SettableCaps = listValue(c.Caps.Settable)
	m.MemoryBoundsSwap = types.BoolValue(c.Caps.MemoryBoundsSwap)
	m.PidsCeiling = types.BoolValue(c.Caps.PidsCeiling)
	m.NativeLabels = types.BoolValue(c.NativeLabels)
	m.TenantStorage = types.BoolValue(c.TenantStorage)
	m.BlockedEgressReporting = types.BoolValue(c.BlockedEgressReporting)
	m.MaxLifetimeSeconds = types.Int64Value(c.MaxLifetimeSeconds)
	m.CredentialEnv = listValue(parsed.CredentialEnv())
	m.LiveChecks = listValue(c.LiveChecks)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// onAttribute puts every diagnostic on one attribute.
func onAttribute(name string) diags.PathMapper {
	return func(string) path.Path { return path.Root(name) }
}

// orList joins words as a sentence lists them: "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}
