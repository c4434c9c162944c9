package resources_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/policycheck"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/provider"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/verdict"
)

// decision is what a check decided on one resource: refused, accepted or
// checked-at-apply, with the rule IDs of its findings (refusals when
// refused, warnings when accepted), sorted.
type decision struct {
	outcome string
	rules   []string
}

func (d decision) String() string { return fmt.Sprintf("%s %v", d.outcome, d.rules) }

var ruleInDetail = regexp.MustCompile(`Rule: (\S+)`)

// recorder serves the provider and keeps the diagnostics of its last plan
// of a sandboxio_template: what `terraform plan` decided.
type recorder struct {
	tfprotov6.ProviderServer
	mu    sync.Mutex
	diags []*tfprotov6.Diagnostic
}

func (r *recorder) PlanResourceChange(ctx context.Context, req *tfprotov6.PlanResourceChangeRequest) (*tfprotov6.PlanResourceChangeResponse, error) {
	resp, err := r.ProviderServer.PlanResourceChange(ctx, req)
	if req.TypeName == "sandboxio_template" && resp != nil {
		r.mu.Lock()
		r.diags = resp.Diagnostics
		r.mu.Unlock()
	}
	return resp, err
}

func (r *recorder) decision() decision {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs, warns []string
	deferred := false
	for _, d := range r.diags {
		ids := ruleInDetail.FindAllStringSubmatch(d.Detail, -1)
		switch {
		case d.Severity == tfprotov6.DiagnosticSeverityError:
			for _, id := range ids {
				errs = append(errs, id[1])
			}
		case strings.HasPrefix(d.Summary, "CheckedAtApply: policy checked at apply"):
			deferred = true
		default:
			for _, id := range ids {
				warns = append(warns, id[1])
			}
		}
	}
	switch {
	case len(errs) > 0:
		return decision{"refused", sortedSet(errs)}
	case deferred:
		return decision{"checked-at-apply", nil}
	}
	return decision{"accepted", sortedSet(warns)}
}

func sortedSet(xs []string) []string {
	slices.Sort(xs)
	return slices.Compact(xs)
}

// checkDecision is what `sandboxio policy check` decides on the template of
// a plan in `terraform show -json` form.
func checkDecision(t *testing.T, planJSON []byte) decision {
	t.Helper()
	eng, err := policy.Load(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := policycheck.Check(t.Context(), eng, "plan.json", planJSON, policycheck.Options{})
	if err != nil {
		t.Fatalf("policy check: %v", err)
	}
	for _, r := range rep.Resources {
		if r.Address != "sandboxio_template.test" {
			continue
		}
		var fails, warns []string
		for _, res := range r.Results {
			switch res.Outcome {
			case verdict.Fail:
				fails = append(fails, res.ID)
			case verdict.Warn:
				warns = append(warns, res.ID)
			}
		}
		switch {
		case len(fails) > 0:
			return decision{"refused", sortedSet(fails)}
		case len(r.Deferred) > 0:
			return decision{"checked-at-apply", nil}
		}
		return decision{"accepted", sortedSet(warns)}
	}
	t.Fatalf("policy check did not report sandboxio_template.test: %+v", rep.Resources)
	return decision{}
}

// capturePlan keeps the plan as `terraform show -json` printed it.
type capturePlan struct{ data *[]byte }

func (c capturePlan) CheckPlan(_ context.Context, req plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	b, err := json.Marshal(req.Plan)
	if err != nil {
		resp.Error = err
		return
	}
	*c.data = b
}

// planOf runs `terraform plan` on config with the real provider and returns
// the provider's decision and, when the plan succeeded, the plan JSON.
func planOf(t *testing.T, config string, wantErr *regexp.Regexp) (decision, []byte) {
	t.Helper()
	rec := &recorder{}
	factories := map[string]func() (tfprotov6.ProviderServer, error){
		"sandboxio": func() (tfprotov6.ProviderServer, error) {
			s, err := providerserver.NewProtocol6WithError(provider.New("test")())()
			rec.mu.Lock()
			rec.ProviderServer = s
			rec.mu.Unlock()
			return rec, err
		},
	}
	var plan []byte
	step := resource.TestStep{Config: config, PlanOnly: true, ExpectNonEmptyPlan: true}
	if wantErr != nil {
		step.ExpectError = wantErr
	} else {
		step.ConfigPlanChecks.PostApplyPreRefresh = []plancheck.PlanCheck{capturePlan{&plan}}
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: factories,
		Steps:                    []resource.TestStep{step},
	})
	return rec.decision(), plan
}

// The provider at `terraform plan` and `sandboxio policy check` on the
// plan's `terraform show -json` read a template through the same reader
// (inputs.ReadTemplate) and decide alike: refused, accepted or checked at
// apply, for the same rules. In particular, a template whose image (or an
// env value) is unknown is decided with placeholders by both: no rule
// decides on those values.
func TestAccPolicyCheckDecidesAsPlan(t *testing.T) {
	sources := `
resource "terraform_data" "image" {
  input = "python:3.12-slim"
}
resource "terraform_data" "egress" {
  input = "deny"
}
resource "terraform_data" "memory" {
  input = 512
}
`
	template := func(image, body string) string {
		return providerBlock("") + sources + fmt.Sprintf(`
resource "sandboxio_template" "test" {
  name    = "python"
  backend = "docker://"
  image   = %s
%s
}
`, image, body)
	}
	const unknownImage = "terraform_data.image.output"
	const knownImage = `"python:3.12-slim"`
	for _, tc := range []struct {
		name, config string
		want         decision
		// refusedTwin: for a refused configuration, which has no plan,
		// the configuration without its refused attribute, whose plan is
		// then given that attribute as the provider would have planned it.
		twin  string
		patch func(after map[string]any)
	}{
		{name: "everything known", config: template(knownImage, ""), want: decision{"accepted", nil}},
		{name: "everything known, open egress", config: template(knownImage, `  network = { egress = "allow" }`),
			want: decision{"accepted", []string{"SBX-NET-007"}}},
		{name: "image unknown", config: template(unknownImage, ""), want: decision{"accepted", nil}},
		{name: "image unknown, open egress", config: template(unknownImage, `  network = { egress = "allow" }`),
			want: decision{"accepted", []string{"SBX-NET-007"}}},
		{name: "env value unknown", config: template(knownImage, `  env = { HOST = terraform_data.image.id, LANG = "C" }`),
			want: decision{"accepted", nil}},
		{name: "network unknown", config: template(knownImage, `  network = { egress = terraform_data.egress.output }`),
			want: decision{"checked-at-apply", nil}},
		{name: "caps unknown", config: template(knownImage, `  resources = { memory_mb = terraform_data.memory.output }`),
			want: decision{"checked-at-apply", nil}},
		{name: "image unknown, allow list on docker", config: template(unknownImage, `  network = { allow = ["1.2.3.4/32"] }`),
			want: decision{"refused", []string{"SBX-NET-003"}},
			twin: template(unknownImage, ""),
			patch: func(after map[string]any) {
				after["network"] = map[string]any{"egress": "deny", "allow": []any{"1.2.3.4/32"}}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) { samePlanAndCheck(t, tc.config, tc.twin, tc.patch, tc.want) })
	}
}

// samePlanAndCheck plans config, wants decision want from terraform plan,
// and the same from `sandboxio policy check` on the plan's JSON. A refused
// configuration has no plan: its twin (without the refused attribute) is
// planned, and patch gives that plan the attribute as planned.
func samePlanAndCheck(t *testing.T, config, twin string, patch func(after map[string]any), want decision) {
	t.Helper()
	var wantErr *regexp.Regexp
	if want.outcome == "refused" {
		wantErr = regexp.MustCompile(`Rule: ` + regexp.QuoteMeta(want.rules[0]))
	}
	planned, plan := planOf(t, config, wantErr)
	if t.Skipped() {
		return
	}
	if planned.String() != want.String() {
		t.Fatalf("terraform plan decided %v, want %v", planned, want)
	}
	if twin != "" {
		_, plan = planOf(t, twin, nil)
		plan = patchTemplate(t, plan, patch)
	}
	if checked := checkDecision(t, plan); checked.String() != planned.String() {
		t.Fatalf("terraform plan decided %v, sandboxio policy check on its plan %v", planned, checked)
	}
}

// patchTemplate changes the planned values of sandboxio_template.test.
func patchTemplate(t *testing.T, plan []byte, patch func(after map[string]any)) []byte {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal(plan, &p); err != nil {
		t.Fatal(err)
	}
	changes, _ := p["resource_changes"].([]any)
	for _, c := range changes {
		rc, _ := c.(map[string]any)
		if rc["address"] != "sandboxio_template.test" {
			continue
		}
		change, _ := rc["change"].(map[string]any)
		after, _ := change["after"].(map[string]any)
		patch(after)
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	t.Fatal("no change for sandboxio_template.test in the plan")
	return nil
}
