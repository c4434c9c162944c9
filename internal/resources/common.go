// Package resources holds the provider's resources and data sources, one
// file each. Plan-time checks run in ModifyPlan through the policy engine and
// run again at apply, before any side effect.
package resources

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/diags"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/verdict"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// ProviderData is what the provider hands to every resource and data source.
type ProviderData struct {
	DefaultBackend string
	// DefaultBackendUnknown is set while the provider's default_backend is
	// unknown (at plan, from another resource's attribute): a resource that
	// relies on it waits for apply.
	DefaultBackendUnknown bool
	PolicyPaths           []string
	Engine                *policy.Engine
	// Waivers is the provider's policy_waivers file, nil when none is set.
	Waivers *verdict.Waivers
}

// providerData extracts ProviderData in Configure.
func providerData(data any) (*ProviderData, diag.Diagnostics) {
	var d diag.Diagnostics
	if data == nil {
		return nil, d
	}
	pd, ok := data.(*ProviderData)
	if !ok {
		d.AddError("Unexpected provider data", fmt.Sprintf("expected *resources.ProviderData, got %T; this is a bug in the provider", data))
	}
	return pd, d
}

// engine returns the configured engine. Before the provider is configured
// (its own configuration still unknown at plan), the embedded bundle alone
// is used; the team policies are applied again at apply.
func (pd *ProviderData) engine(ctx context.Context) (*policy.Engine, error) {
	if pd != nil && pd.Engine != nil {
		return pd.Engine, nil
	}
	return policy.Shared(ctx, nil)
}

// waitsForDefault reports whether a resource with this backend must wait
// for apply: it has none of its own and the default is not known yet.
func (pd *ProviderData) waitsForDefault(backend string) bool {
	return backend == "" && pd != nil && pd.DefaultBackendUnknown
}

// defaultBackend is the provider's default_backend, or backends.DefaultDSN
// (the local Docker daemon) when it sets none.
func (pd *ProviderData) defaultBackend() string {
	if pd == nil || pd.DefaultBackend == "" {
		return backends.DefaultDSN
	}
	return pd.DefaultBackend
}

// evaluate decides on the document, through the same verdict.Check as
// `sandboxio policy check` and the run-time helper, and appends the
// findings to diagnostics.
func evaluate(ctx context.Context, pd *ProviderData, in policy.Input, mapPath diags.Mapper) diag.Diagnostics {
	return evaluateWithPlaceholders(ctx, pd, in, mapPath, nil)
}

// evaluateWithPlaceholders decides on a document in which the attributes
// named by placeholders hold placeholders for values unknown at plan. No
// built-in rule decides on them (see inputs.DecisionFree), so its findings
// stand. A team package may read them: the findings of one that may are
// left to apply, which checks the real values, and a warning says so.
func evaluateWithPlaceholders(ctx context.Context, pd *ProviderData, in policy.Input, mapPath diags.Mapper, placeholders []string) diag.Diagnostics {
	var out diag.Diagnostics
	eng, err := pd.engine(ctx)
	if err != nil {
		out.Append(diags.FromError(err, "policy engine not ready", mapPath))
		return out
	}
	v, err := verdict.Check(ctx, eng, in, verdict.Options{Waivers: pd.waivers()})
	if err != nil {
		// A *model.Error (a document the engine refuses to evaluate, such
		// as a non-finite number) keeps its class and attribute.
		out.Append(diags.FromError(err, "Policy evaluation failed", mapPath))
		return out
	}
	v, teamReads := verdict.WithoutTeamReads(eng, v, inputs.PlaceholderPaths(placeholders))
	if teamReads {
		out.Append(teamPoliciesAtApply(placeholders))
	}
	out.Append(diags.FromVerdict(v, mapPath)...)
	return out
}

// checkedAtApply is the warning of a plan that cannot decide on a resource:
// a value a policy decision depends on is unknown until apply. CI running
// `terraform plan` must not read the plan as a clean policy check.
func checkedAtApply(resource string, unknown []string) diag.Diagnostic {
	what := joinAnd(unknown)
	verb := "are"
	if len(unknown) == 1 {
		verb = "is"
	}
	return diag.NewWarningDiagnostic("CheckedAtApply: policy checked at apply, not at plan",
		diags.Detail(fmt.Sprintf("The policies cannot decide on this %s at plan: %s %s unknown until apply. "+
			"They are checked at apply, before anything is created, and a refusal then fails the apply; "+
			"this plan does not show whether the policies accept it.", resource, what, verb),
			rules.CheckedAtApply, "",
			"nothing, if the values come from other resources: apply runs the same rules. To have the plan decide "+
				"(in CI), give these attributes values known at plan time (constants or variables)"))
}

// teamPoliciesAtApply is the warning of a plan that decided with
// placeholders while a team policy may read them.
func teamPoliciesAtApply(placeholders []string) diag.Diagnostic {
	what := make([]string, len(placeholders))
	for i, a := range placeholders {
		what[i] = a
		if a != "image" {
			what[i] = "values in " + a // env and labels: their keys are known
		}
	}
	verb := "are"
	if len(what) == 1 && what[0] == "image" {
		verb = "is"
	}
	return diag.NewWarningDiagnostic("CheckedAtApply: team policies checked at apply, not at plan",
		diags.Detail(fmt.Sprintf("The built-in rules decided at plan, but %s %s unknown until apply and a team policy "+
			"(policy_paths) may read them: the team policies are checked at apply, before anything is created, and a "+
			"refusal then fails the apply.", joinAnd(what), verb),
			rules.CheckedAtApply, "",
			"nothing, if the values come from other resources: apply runs the same rules. To have the plan decide "+
				"(in CI), give these attributes values known at plan time"))
}

// joinAnd renders ["a", "b", "c"] as "a, b and c".
func joinAnd(items []string) string {
	if len(items) <= 1 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

func (pd *ProviderData) waivers() *verdict.Waivers {
	if pd == nil {
		return nil
	}
	return pd.Waivers
}

// backendError renders a DSN error on the backend attribute.
func backendError(err error, mapPath diags.Mapper) diag.Diagnostic {
	return backendErrorSummary(err, "invalid backend", mapPath)
}

func backendErrorSummary(err error, summary string, mapPath diags.Mapper) diag.Diagnostic {
	var me *model.Error
	if errors.As(err, &me) && me.Attribute == "" {
		me.Attribute = "backend"
	}
	return diags.FromError(err, summary, mapPath)
}

func stringMap(ctx context.Context, m types.Map) (map[string]string, diag.Diagnostics) {
	out := map[string]string{}
	if m.IsNull() || m.IsUnknown() {
		return out, nil
	}
	d := m.ElementsAs(ctx, &out, false)
	return out, d
}

func listValue(xs []string) types.List {
	elems := make([]attrValue, len(xs))
	for i, x := range xs {
		elems[i] = types.StringValue(x)
	}
	return types.ListValueMust(types.StringType, elems)
}

func mapValue(m map[string]string) types.Map {
	elems := make(map[string]attrValue, len(m))
	for k, v := range m {
		elems[k] = types.StringValue(v)
	}
	return types.MapValueMust(types.StringType, elems)
}

type attrValue = attr.Value

// networkAttrTypes is the object type of a network policy, shared by
// sandboxio_network_policy.policy and sandboxio_template.network.
var networkAttrTypes = map[string]attr.Type{
	"egress": types.StringType,
	"allow":  types.ListType{ElemType: types.StringType},
}

// capsAttrTypes is the object type of resource caps, shared by
// sandboxio_resource_caps.caps and sandboxio_template.resources.
var capsAttrTypes = map[string]attr.Type{
	"cpu":       types.Float64Type,
	"memory_mb": types.Int64Type,
	"disk_mb":   types.Int64Type,
	"pids":      types.Int64Type,
}

func networkObject(n model.NetworkPolicy) types.Object {
	n = n.Normalized()
	return types.ObjectValueMust(networkAttrTypes, map[string]attr.Value{
		"egress": types.StringValue(n.Egress),
		"allow":  listValue(n.Allow),
	})
}

func capsObject(c model.Caps) types.Object {
	return types.ObjectValueMust(capsAttrTypes, map[string]attr.Value{
		"cpu":       types.Float64Value(c.CPU),
		"memory_mb": types.Int64Value(c.MemoryMB),
		"disk_mb":   types.Int64Value(c.DiskMB),
		"pids":      types.Int64Value(c.Pids),
	})
}

// errorsOnly keeps the errors: at apply the plan's warnings were already shown.
func errorsOnly(in diag.Diagnostics) diag.Diagnostics {
	return in.Errors()
}

// applyDiagnostics is what apply reports of its check: the errors, and the
// warnings too when the plan did not evaluate the configuration (a value
// was unknown then, so the check waited for apply and the plan showed no
// warning: UnverifiedIsolationWarning, OpenEgressWarning and
// SecretInEnvWarning must still reach Terraform). When the plan evaluated
// it, its warnings were shown then and are not repeated.
func applyDiagnostics(in diag.Diagnostics, deferred bool) diag.Diagnostics {
	if deferred {
		return in
	}
	return errorsOnly(in)
}

// deferredAtPlan reports whether the plan left the computed attribute, set
// only once the configuration is evaluated, unknown: the check waited for
// apply.
func deferredAtPlan(plan tftypes.Value, attribute string) bool {
	attrs, err := inputs.Object(plan)
	if err != nil || attrs == nil {
		return false
	}
	v, ok := attrs[attribute]
	return ok && !v.IsKnown()
}
