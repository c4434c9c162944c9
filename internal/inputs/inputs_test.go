package inputs

import (
	"errors"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

func TestBackend(t *testing.T) {
	for _, tc := range []struct {
		dsn, runtime, def string
		key, rt, norm     string
	}{
		{"docker://", "", "", "docker/runc", "runc", "docker://"},
		{"DOCKER://?runtime=runsc", "", "", "docker/runsc", "runsc", "docker://?runtime=runsc"},
		{"docker://?runtime=runsc", "runc", "", "docker/runc", "runc", "docker://?runtime=runsc"},
		{"", "", "e2b://", "e2b", "", "e2b://"},
		{"e2b://", "runsc", "docker://", "e2b", "", "e2b://"}, // a runtime means nothing off Docker
	} {
		ref, norm, err := Backend(tc.dsn, tc.runtime, tc.def)
		if err != nil || ref.Key != tc.key || ref.Runtime != tc.rt || norm != tc.norm || ref.DSN != norm {
			t.Errorf("Backend(%q, %q, %q) = %+v, %q, %v", tc.dsn, tc.runtime, tc.def, ref, norm, err)
		}
	}
	if ref, _, err := Backend("", "", ""); ref != nil || err != nil {
		t.Errorf("no backend: %+v %v", ref, err)
	}
	if _, _, err := Backend("e2b://user:pw@", "", ""); !errors.Is(err, model.ErrConfiguration) {
		t.Errorf("credential in DSN: %v", err)
	}
}

func TestTemplate_DefaultsAndSpec(t *testing.T) {
	spec, in, err := Template{Name: "p", Image: "img", Runtime: "runsc"}.Build("docker://")
	if err != nil {
		t.Fatal(err)
	}
	if in.Kind != policy.KindTemplate || in.Backend.Key != "docker/runsc" || in.Template.TimeoutSeconds != model.DefaultTimeoutSeconds ||
		in.Resources.MemoryMB != model.DefaultMemoryMB || in.Network.Egress != model.EgressDeny || in.Network.Allow == nil ||
		in.Template.Env == nil || in.Template.Labels == nil || in.Template.SecretNames == nil {
		t.Fatalf("input: %+v %+v", in, in.Template)
	}
	if spec.IsolationTier != model.TierGVisor || spec.Runtime != "runsc" || spec.Backend != "docker://" {
		t.Fatalf("spec: %+v", spec)
	}
	zero := int64(0)
	_, in, _ = Template{Name: "p", Image: "img", TimeoutSeconds: &zero, Caps: model.CapsRequest{MemoryMB: &zero}}.Build("docker://")
	if in.Template.TimeoutSeconds != 0 || in.Resources.MemoryMB != 0 {
		t.Fatal("zero values were replaced by defaults; the rules must see them to refuse them")
	}
	var me *model.Error
	if _, _, err := (Template{Name: "p"}).Build(""); !errors.As(err, &me) || me.Rule != rules.DSNUnknown || me.Attribute != "backend" {
		t.Fatalf("no backend: %v", err)
	}
}

func TestNetworkPolicyAndCaps(t *testing.T) {
	in, n, err := NetworkPolicy{Allow: []string{"10.0.0.0/8"}}.Build("")
	if err != nil || in.Backend != nil || n.Egress != model.EgressDeny || in.Kind != policy.KindNetworkPolicy {
		t.Fatalf("network policy: %+v %+v %v", in, n, err)
	}
	four := int64(4096)
	in, caps, err := ResourceCaps{Caps: model.CapsRequest{MemoryMB: &four}, Backend: "e2b://"}.Build("docker://")
	if err != nil || in.Backend.Key != "e2b" || caps.MemoryMB != 4096 || caps.CPU != model.DefaultCPU {
		t.Fatalf("caps: %+v %+v %v", in, caps, err)
	}
}

func TestTenant(t *testing.T) {
	tenant := Tenant{TenantID: "acme", SessionID: "s-1"}
	if part := tenant.Part(); part.Kind != policy.KindTenantSandbox || part.Template != nil || part.Tenant.Labels == nil {
		t.Fatalf("part: %+v", part)
	}
	tmpl, _, err := Template{Name: "p", Image: "img", Labels: map[string]string{"team": "a"}}.Build("docker://")
	if err != nil {
		t.Fatal(err)
	}
	spec, in, err := tenant.Sandbox(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Labels[model.LabelTenantID] != "acme" || in.Template.Labels[model.LabelTenantID] != "" || in.Tenant.TenantID != "acme" ||
		in.Kind != policy.KindTenantSandbox {
		t.Fatalf("tenant sandbox: %+v %+v", spec, in)
	}
	sin, _, err := Spec(spec)
	if err != nil || sin.Kind != policy.KindSpec || sin.Backend.Key != "docker/runc" {
		t.Fatalf("spec: %+v %v", sin, err)
	}
	// A rendered spec's own reserved labels are not the user's; edited
	// ones are, and the label rules see them.
	if _, ok := sin.Template.Labels[model.LabelTenantID]; ok {
		t.Fatalf("a rendered spec's own tenant label is checked as a user label: %v", sin.Template.Labels)
	}
	edited := spec
	edited.Labels = map[string]string{model.LabelTenantID: "globex", model.LabelSessionID: "s-1", model.LabelTemplate: "p"}
	if sin, _, _ := Spec(edited); sin.Template.Labels[model.LabelTenantID] != "globex" || len(sin.Template.Labels) != 1 {
		t.Fatalf("an edited reserved label is hidden from the label rules: %v", sin.Template.Labels)
	}
}

// A reserved label in a template spec or in the extra labels reaches the
// label rules as given, before rendering overwrites it.
func TestTenant_ReservedLabelsKeptForTheRules(t *testing.T) {
	tmpl, _, err := Template{Name: "p", Image: "img"}.Build("docker://")
	if err != nil {
		t.Fatal(err)
	}
	tmpl.Labels = map[string]string{model.LabelTenantID: "globex", "team": "a"}
	spec, in, err := Tenant{TenantID: "acme", SessionID: "s-1", ExtraLabels: map[string]string{model.LabelSessionID: "s-9"}}.Sandbox(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Labels[model.LabelTenantID] != "acme" || spec.Labels[model.LabelSessionID] != "s-1" {
		t.Fatalf("rendered labels: %v", spec.Labels)
	}
	if in.Template.Labels[model.LabelTenantID] != "globex" || in.Tenant.Labels[model.LabelSessionID] != "s-9" {
		t.Fatalf("the rules do not see the reserved labels as given: template %v tenant %v", in.Template.Labels, in.Tenant.Labels)
	}
}

// Spec recomputes the isolation tier from the capability data: a spec that
// leaves it out gets its backend's, one that states another is refused
// (SBX-SPC-005), and one without a backend is refused (SBX-DSN-001). A
// backend without a descriptor is left to the rules (SBX-ISO-005).
func TestSpecTierAndBackend(t *testing.T) {
	tmpl, _, err := Template{Name: "p", Image: "img", Runtime: "runsc"}.Build("docker://")
	if err != nil {
		t.Fatal(err)
	}
	if tmpl.IsolationTier != model.TierGVisor {
		t.Fatalf("template tier %s", tmpl.IsolationTier)
	}
	refused := func(s model.Spec, rule, attr string) {
		t.Helper()
		_, _, err := Spec(s)
		var me *model.Error
		if !errors.As(err, &me) || me.Class != model.ErrConfiguration || me.Rule != rule || me.Attribute != attr || me.Fix == "" {
			t.Fatalf("%+v: got %v, want %s on %s", s, err, rule, attr)
		}
		if _, _, err := (Tenant{TenantID: "acme", SessionID: "s-1"}).Sandbox(s); !errors.As(err, &me) || me.Rule != rule {
			t.Fatalf("Sandbox: got %v, want %s", err, rule)
		}
	}
	for _, claim := range []model.Tier{"LOL", model.TierContainer, model.TierMicroVM, model.TierUnknown, "gvisor"} {
		s := tmpl
		s.IsolationTier = claim
		refused(s, "SBX-SPC-005", "isolation_tier")
	}
	s := tmpl
	s.Backend = ""
	refused(s, "SBX-DSN-001", "backend")

	s = tmpl
	s.IsolationTier = ""
	_, tier, err := Spec(s)
	if err != nil || tier != model.TierGVisor {
		t.Fatalf("no claim: %s %v", tier, err)
	}
	rendered, _, err := Tenant{TenantID: "acme", SessionID: "s-1"}.Sandbox(s)
	if err != nil || rendered.IsolationTier != model.TierGVisor {
		t.Fatalf("rendered tier %q %v", rendered.IsolationTier, err)
	}

	s = tmpl
	s.Runtime = "youki"
	in, tier, err := Spec(s)
	if err != nil || tier != model.TierUnknown || in.Backend.Key != "docker/youki" {
		t.Fatalf("undescribed runtime: %+v %s %v", in.Backend, tier, err)
	}
}
