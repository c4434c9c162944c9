package policy_test

import (
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
)

// BenchmarkEvaluateTemplate evaluates one accepted template against the whole
// bundle, as terraform plan does per template; its targets are in
// docs/design/policy-engine-cost.md.
func BenchmarkEvaluateTemplate(b *testing.B) {
	e := engine(b)
	in := templateInput()
	ctx := b.Context()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		d, err := e.Evaluate(ctx, in)
		if err != nil || !d.Allowed() {
			b.Fatalf("evaluate: %v %+v", err, d.Denies)
		}
	}
}

// BenchmarkEvaluateRefusedTemplate measures the path that builds findings.
func BenchmarkEvaluateRefusedTemplate(b *testing.B) {
	e := engine(b)
	in := templateInput()
	in.Network.Allow = []string{"151.101.0.0/16"}
	ctx := b.Context()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		d, err := e.Evaluate(ctx, in)
		if err != nil || d.Allowed() {
			b.Fatalf("evaluate: %v", err)
		}
	}
}

// BenchmarkEvaluateTemplateWithTeamPolicies adds the example team bundle:
// the built-in rules and the team's are two evaluations.
func BenchmarkEvaluateTemplateWithTeamPolicies(b *testing.B) {
	e, err := policy.New(b.Context(), []string{"../../examples/policies"})
	if err != nil {
		b.Fatal(err)
	}
	in := templateInput()
	in.Template.Image = "registry.internal.example/python:3.12"
	ctx := b.Context()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := e.Evaluate(ctx, in); err != nil {
			b.Fatalf("evaluate: %v", err)
		}
	}
}
