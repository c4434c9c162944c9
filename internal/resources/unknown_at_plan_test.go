package resources

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
)

// The warning of a plan that cannot decide names what is unknown and says
// the check happens at apply, before anything is created, under the rule ID
// `sandboxio policy check` uses for the same case (one constant,
// rules.CheckedAtApply).
func TestCheckedAtApplyWarning(t *testing.T) {
	for _, tc := range []struct {
		unknown []string
		want    string
	}{
		{[]string{"backend"}, "backend is unknown until apply"},
		{[]string{"backend", "network.allow", "the provider's default_backend"},
			"backend, network.allow and the provider's default_backend are unknown until apply"},
	} {
		d := checkedAtApply("sandboxio_template", tc.unknown)
		if d.Severity() != diag.SeverityWarning {
			t.Errorf("severity %v, want a warning: the plan itself is not refused", d.Severity())
		}
		for _, want := range []string{tc.want, "sandboxio_template", "checked at apply, before anything is created",
			"Rule: SBX-CHK-001", "Fix: "} {
			if !strings.Contains(d.Summary()+"\n"+d.Detail(), want) {
				t.Errorf("warning %q / %q does not say %q", d.Summary(), d.Detail(), want)
			}
		}
		if !strings.HasPrefix(d.Summary(), "CheckedAtApply: ") {
			t.Errorf("summary %q does not start with the class", d.Summary())
		}
	}
}

// modifyPlan runs a resource's ModifyPlan on a configuration with the given
// attributes set, the others null, as Terraform plans a new resource.
func modifyPlan(t *testing.T, r resource.ResourceWithModifyPlan, pd *ProviderData, set map[string]tftypes.Value) *resource.ModifyPlanResponse {
	t.Helper()
	if c, ok := r.(resource.ResourceWithConfigure); ok {
		var cr resource.ConfigureResponse
		c.Configure(t.Context(), resource.ConfigureRequest{ProviderData: pd}, &cr)
	}
	req, _ := applyRequest(t, r, set, nil, nil)
	resp := &resource.ModifyPlanResponse{Plan: req.Plan}
	state := tfsdk.State{Schema: req.Plan.Schema, Raw: tftypes.NewValue(req.Plan.Raw.Type(), nil)}
	r.ModifyPlan(t.Context(), resource.ModifyPlanRequest{Config: req.Config, Plan: req.Plan, State: state}, resp)
	return resp
}

func templateSet(t *testing.T, extra map[string]tftypes.Value) map[string]tftypes.Value {
	t.Helper()
	set := map[string]tftypes.Value{"name": stringValue("python"), "image": stringValue("python:3.12-slim")}
	maps.Copy(set, extra)
	return set
}

func attrType(t *testing.T, r resource.Resource, name string) tftypes.Type {
	t.Helper()
	var sr resource.SchemaResponse
	r.Schema(t.Context(), resource.SchemaRequest{}, &sr)
	return sr.Schema.Type().TerraformType(t.Context()).(tftypes.Object).AttributeTypes[name]
}

func allowList(t *testing.T, r resource.Resource, entries ...tftypes.Value) tftypes.Value {
	t.Helper()
	typ := attrType(t, r, "network").(tftypes.Object)
	return tftypes.NewValue(typ, map[string]tftypes.Value{
		"egress": tftypes.NewValue(tftypes.String, nil),
		"allow":  tftypes.NewValue(tftypes.List{ElementType: tftypes.String}, entries),
	})
}

func warningTexts(d diag.Diagnostics) string {
	var out []string
	for _, w := range d.Warnings() {
		out = append(out, w.Summary()+": "+w.Detail())
	}
	return strings.Join(out, "\n")
}

// A plan that cannot decide (a value a rule decides on is unknown) says so
// with a warning naming what is unknown, on every resource, so that CI
// running terraform plan does not take the plan for a passed check.
func TestModifyPlan_UndecidableWarns(t *testing.T) {
	docker := &ProviderData{DefaultBackend: "docker://"}
	tmpl := &templateResource{}
	for _, tc := range []struct {
		name string
		r    resource.ResourceWithModifyPlan
		pd   *ProviderData
		set  map[string]tftypes.Value
		want string
	}{
		{"template backend", tmpl, docker, templateSet(t, map[string]tftypes.Value{"backend": unknownString}), "backend is unknown"},
		{"template allow entry", tmpl, docker, templateSet(t, map[string]tftypes.Value{
			"network": allowList(t, tmpl, stringValue("10.0.0.0/8"), unknownString)}), "network.allow is unknown"},
		{"template name", tmpl, docker, templateSet(t, map[string]tftypes.Value{"name": unknownString}), "name is unknown"},
		{"template on the provider's default", tmpl, &ProviderData{DefaultBackendUnknown: true}, templateSet(t, nil),
			"the provider's default_backend is unknown"},
		{"network policy allow", &networkPolicyResource{}, docker, map[string]tftypes.Value{
			"allow": tftypes.NewValue(tftypes.List{ElementType: tftypes.String}, tftypes.UnknownValue)}, "sandboxio_network_policy at plan: allow is unknown"},
		{"network policy on the provider's default", &networkPolicyResource{}, &ProviderData{DefaultBackendUnknown: true}, nil,
			"the provider's default_backend is unknown"},
		{"resource caps", &resourceCapsResource{}, docker, map[string]tftypes.Value{
			"memory_mb": tftypes.NewValue(tftypes.Number, tftypes.UnknownValue)}, "sandboxio_resource_caps at plan: memory_mb is unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := modifyPlan(t, tc.r, tc.pd, tc.set)
			if resp.Diagnostics.HasError() {
				t.Fatalf("plan refused: %v", resp.Diagnostics)
			}
			if got := warningTexts(resp.Diagnostics); !strings.Contains(got, tc.want) || !strings.Contains(got, "SBX-CHK-001") {
				t.Errorf("warnings %q, want one saying %q", got, tc.want)
			}
		})
	}
}

// With only decision-free values unknown (image; env and label values),
// the plan decides with placeholders: refusals at plan, no warning, the
// values computed from them unknown.
func TestModifyPlan_UnknownImageDecides(t *testing.T) {
	docker := &ProviderData{DefaultBackend: "docker://"}
	r := &templateResource{}
	unknownImage := map[string]tftypes.Value{"image": unknownString}

	resp := modifyPlan(t, r, docker, templateSet(t, map[string]tftypes.Value{"image": unknownString,
		"network": allowList(t, r, stringValue("1.2.3.4/32"))}))
	if !strings.Contains(fmt.Sprint(resp.Diagnostics.Errors()), "SBX-NET-003") {
		t.Fatalf("allow list on Docker with an unknown image: %v, want SBX-NET-003 at plan", resp.Diagnostics)
	}

	resp = modifyPlan(t, r, docker, templateSet(t, unknownImage))
	if len(resp.Diagnostics) != 0 {
		t.Fatalf("accepted template with an unknown image: %v", resp.Diagnostics)
	}
	planned, err := inputs.Object(resp.Plan.Raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"spec", "spec_sha256", "image_id", "disk_cap_strategy", "pids_cap_strategy", "image"} {
		if planned[a].IsKnown() {
			t.Errorf("%s is known in the plan (%v); it depends on the image", a, planned[a])
		}
	}
	for a, want := range map[string]string{"id": "python", "isolation_tier": "CONTAINER", "backend": "docker://"} {
		if got, _ := inputs.String(planned[a]); got != want {
			t.Errorf("%s = %q in the plan, want %q", a, got, want)
		}
	}

	// A team package that reads the image is left to apply, with a
	// warning; one that does not still decides.
	eng, err := policy.New(t.Context(), []string{"../../examples/policies"})
	if err != nil {
		t.Fatal(err)
	}
	team := &ProviderData{DefaultBackend: "docker://", Engine: eng}
	resp = modifyPlan(t, r, team, templateSet(t, unknownImage))
	if resp.Diagnostics.HasError() {
		t.Fatalf("the registry rule decided on the placeholder: %v", resp.Diagnostics)
	}
	if got := warningTexts(resp.Diagnostics); !strings.Contains(got, "team policies checked at apply") || !strings.Contains(got, "image is unknown") {
		t.Errorf("warnings %q, want one saying the team policies are checked at apply", got)
	}
	capsType := attrType(t, r, "resources").(tftypes.Object)
	bigMemory := tftypes.NewValue(capsType, map[string]tftypes.Value{"cpu": tftypes.NewValue(tftypes.Number, nil),
		"memory_mb": intValue(8192), "disk_mb": tftypes.NewValue(tftypes.Number, nil), "pids": tftypes.NewValue(tftypes.Number, nil)})
	resp = modifyPlan(t, r, team, templateSet(t, map[string]tftypes.Value{"image": unknownString, "resources": bigMemory}))
	if !strings.Contains(fmt.Sprint(resp.Diagnostics.Errors()), "TEAM-MEM-001") {
		t.Errorf("the memory rule reads no image and must decide at plan: %v", resp.Diagnostics)
	}
}

// The claim the placeholders rest on: no built-in refusal depends on the
// image, the env values or the label values. Templates on every backend,
// refused and accepted, are refused for the same rules and attributes with
// real values as with the placeholders, and the placeholders raise no
// warning the real values do not.
func TestDecisionFree_PlaceholdersDecideAsRealValues(t *testing.T) {
	want := []string{"env", "image", "labels"}
	if !slices.Equal(slices.Sorted(maps.Keys(inputs.DecisionFree)), want) {
		t.Fatalf("DecisionFree %v must name %v", inputs.DecisionFree, want)
	}
	for i, p := range inputs.PlaceholderPaths(want) {
		if !slices.Equal(p, []string{"template", want[i]}) {
			t.Fatalf("PlaceholderPaths(%s) = %v", want[i], p)
		}
	}
	ctx := t.Context()
	eng, err := policy.Shared(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	four, zero := int64(4096), int64(0)
	variants := map[string]func(*inputs.Template){
		"accepted":  func(*inputs.Template) {},
		"allow":     func(c *inputs.Template) { c.Allow = []string{"151.101.0.0/16", "pypi.org"} },
		"caps":      func(c *inputs.Template) { c.Caps.MemoryMB = &four },
		"timeout":   func(c *inputs.Template) { c.TimeoutSeconds = &zero },
		"isolation": func(c *inputs.Template) { c.RequireIsolation = "MICROVM" },
		"secrets":   func(c *inputs.Template) { c.SecretNames = []string{"API_TOKEN"} },
	}
	values := []string{"python:3.12-slim", "", strings.Repeat("x", 300), "sk-proj-Zq3vN8wLk2Xr7tY1pQ9sM4bH6",
		"postgres://agent:hunter2hunter2@db/app", "sandboxio.tenant_id", "a b\n", "registry.internal.example/agent@sha256:00"}
	for _, backend := range []string{"docker://", "docker://?runtime=runsc", "e2b://", "modal://app", "vercel://acme/agents", "daytona://"} {
		for vname, variant := range variants {
			for _, v := range values {
				real := inputs.Template{Name: "python", Backend: backend, Image: v,
					Env:    map[string]string{"LANG": v, "API_TOKEN": v, "DB_URL": v},
					Labels: map[string]string{"team": v, "app.kubernetes.io/name": v}}
				variant(&real)
				placeholder := real
				placeholder.Image = inputs.DecisionFree["image"]
				placeholder.Env = map[string]string{}
				for k := range real.Env {
					placeholder.Env[k] = inputs.DecisionFree["env"]
				}
				placeholder.Labels = map[string]string{}
				for k := range real.Labels {
					placeholder.Labels[k] = inputs.DecisionFree["labels"]
				}
				realDenies, realWarns := decide(t, eng, real)
				phDenies, phWarns := decide(t, eng, placeholder)
				if !slices.Equal(realDenies, phDenies) {
					t.Errorf("%s, %s, value %q: refused for %v, with placeholders %v", backend, vname, v, realDenies, phDenies)
				}
				for _, w := range phWarns {
					if !slices.Contains(realWarns, w) {
						t.Errorf("%s, %s, value %q: the placeholders warn %s, the real values do not", backend, vname, v, w)
					}
				}
			}
		}
	}
}

func decide(t *testing.T, eng *policy.Engine, c inputs.Template) (denies, warns []string) {
	t.Helper()
	_, in, err := c.Build("")
	if err != nil {
		t.Fatal(err)
	}
	d, err := eng.Evaluate(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range d.Denies {
		denies = append(denies, f.ID+" "+f.Attribute)
	}
	for _, f := range d.Warnings {
		warns = append(warns, f.ID+" "+f.Attribute)
	}
	sort.Strings(denies)
	sort.Strings(warns)
	return denies, warns
}
