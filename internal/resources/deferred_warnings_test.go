package resources

import (
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// applyRequest builds the config and plan of a resource: the given
// attributes set, every other one null in the config and, in the plan,
// null or (for the computed attributes in computed) unknown, as Terraform
// plans it when ModifyPlan waited for apply. With known, the computed
// attributes hold the values given there instead, as after an evaluated plan.
func applyRequest(t *testing.T, r resource.Resource, set map[string]tftypes.Value, computed []string, known map[string]tftypes.Value) (resource.CreateRequest, *resource.CreateResponse) {
	t.Helper()
	ctx := t.Context()
	var sr resource.SchemaResponse
	r.Schema(ctx, resource.SchemaRequest{}, &sr)
	typ, ok := sr.Schema.Type().TerraformType(ctx).(tftypes.Object)
	if !ok {
		t.Fatal("schema is not an object")
	}
	config, plan := map[string]tftypes.Value{}, map[string]tftypes.Value{}
	for name, at := range typ.AttributeTypes {
		config[name] = tftypes.NewValue(at, nil)
		plan[name] = tftypes.NewValue(at, nil)
		if v, ok := set[name]; ok {
			config[name], plan[name] = v, v
		}
	}
	for _, name := range computed {
		plan[name] = tftypes.NewValue(typ.AttributeTypes[name], tftypes.UnknownValue)
		if v, ok := known[name]; ok {
			plan[name] = v
		}
	}
	req := resource.CreateRequest{
		Config: tfsdk.Config{Schema: sr.Schema, Raw: tftypes.NewValue(typ, config)},
		Plan:   tfsdk.Plan{Schema: sr.Schema, Raw: tftypes.NewValue(typ, plan)},
	}
	return req, &resource.CreateResponse{State: tfsdk.State{Schema: sr.Schema, Raw: tftypes.NewValue(typ, nil)}}
}

func warningSummaries(d diag.Diagnostics) string {
	var out []string
	for _, w := range d.Warnings() {
		out = append(out, w.Summary())
	}
	return strings.Join(out, "; ")
}

// A configuration whose check waited for apply (a value unknown at plan)
// still reports its warnings, at apply; one the plan evaluated does not
// repeat them (the plan showed them).
func TestApply_DeferredCheckReportsWarnings(t *testing.T) {
	ctx := t.Context()
	t.Run("template", func(t *testing.T) {
		r := &templateResource{}
		var sr resource.SchemaResponse
		r.Schema(ctx, resource.SchemaRequest{}, &sr)
		netType := sr.Schema.Type().TerraformType(ctx).(tftypes.Object).AttributeTypes["network"]
		network := tftypes.NewValue(netType, map[string]tftypes.Value{
			"egress": stringValue("allow"), "allow": tftypes.NewValue(tftypes.List{ElementType: tftypes.String}, nil)})
		set := map[string]tftypes.Value{"name": stringValue("python"), "image": stringValue("base"), "backend": stringValue("e2b://"),
			"network": network}
		computed := []string{"id", "isolation_tier", "spec", "spec_sha256", "timeout_seconds", "lifetime_seconds", "resources",
			"image_id", "disk_cap_strategy", "pids_cap_strategy"}

		req, resp := applyRequest(t, r, set, computed, nil)
		r.Create(ctx, req, resp)
		if resp.Diagnostics.HasError() {
			t.Fatalf("apply: %v", resp.Diagnostics)
		}
		if got := warningSummaries(resp.Diagnostics); !strings.Contains(got, "OpenEgressWarning") {
			t.Fatalf("deferred apply: warnings %q, want OpenEgressWarning", got)
		}

		req, resp = applyRequest(t, r, set, computed, map[string]tftypes.Value{"spec": stringValue("{}")})
		r.Create(ctx, req, resp)
		if resp.Diagnostics.HasError() || len(resp.Diagnostics.Warnings()) != 0 {
			t.Fatalf("apply after an evaluated plan: %v", resp.Diagnostics)
		}
	})
	t.Run("network policy", func(t *testing.T) {
		r := &networkPolicyResource{}
		set := map[string]tftypes.Value{"egress": stringValue("allow"), "backend": stringValue("e2b://")}
		computed := []string{"id", "allow", "policy"}

		req, resp := applyRequest(t, r, set, computed, nil)
		r.Create(ctx, req, resp)
		if resp.Diagnostics.HasError() {
			t.Fatalf("apply: %v", resp.Diagnostics)
		}
		if got := warningSummaries(resp.Diagnostics); !strings.Contains(got, "OpenEgressWarning") {
			t.Fatalf("deferred apply: warnings %q, want OpenEgressWarning", got)
		}

		var sr resource.SchemaResponse
		r.Schema(ctx, resource.SchemaRequest{}, &sr)
		policyType := sr.Schema.Type().TerraformType(ctx).(tftypes.Object).AttributeTypes["policy"]
		policy := tftypes.NewValue(policyType, map[string]tftypes.Value{"egress": stringValue("allow"), "allow": stringListValue(nil)})
		req, resp = applyRequest(t, r, set, computed, map[string]tftypes.Value{"policy": policy})
		r.Create(ctx, req, resp)
		if resp.Diagnostics.HasError() || len(resp.Diagnostics.Warnings()) != 0 {
			t.Fatalf("apply after an evaluated plan: %v", resp.Diagnostics)
		}
	})
}
