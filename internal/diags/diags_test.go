package diags_test

import (
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/diags"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/verdict"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

func attributePath(t *testing.T, d diag.Diagnostic) path.Path {
	t.Helper()
	wp, ok := d.(diag.DiagnosticWithPath)
	if !ok {
		return path.Empty()
	}
	return wp.Path()
}

// On the standalone resources the leading network. or resources. is
// dropped from the text as well as from the path: the attribute named is
// the one the user wrote on that resource.
func TestStripPrefixNamesTheResourcesAttribute(t *testing.T) {
	for _, tc := range []struct {
		mapper             diags.Mapper
		attribute, name    string
		wantPath, wantText string
	}{
		{diags.StripPrefix("network."), "network.allow", "network policy", "allow", "Attribute: allow\n"},
		{diags.StripPrefix("resources."), "resources.pids", "resource caps", "pids", "Attribute: pids\n"},
		{diags.Dotted, "network.allow", "template", "network.allow", "Attribute: network.allow\n"},
	} {
		v := verdict.Verdict{Results: []verdict.Result{{
			Finding: policy.Finding{ID: "SBX-X-001", Class: "CapabilityNotSupported", Title: "t", Attribute: tc.attribute,
				Message: "m", Fix: "f", Builtin: true},
			Outcome: verdict.Fail,
		}}}
		got := diags.FromVerdict(v, tc.mapper)
		if len(got) != 1 {
			t.Fatalf("%s: %d diagnostics", tc.name, len(got))
		}
		if !strings.Contains(got[0].Detail(), tc.wantText) {
			t.Errorf("%s: detail %q does not name %q", tc.name, got[0].Detail(), tc.wantText)
		}
		if p := attributePath(t, got[0]); p.String() != tc.wantPath {
			t.Errorf("%s: path %q, want %q", tc.name, p, tc.wantPath)
		}

		// Errors and verdicts read the same way.
		e := diags.FromError(&model.Error{Class: model.ErrConfiguration, Rule: "SBX-X-002", Attribute: tc.attribute,
			Message: "m", Fix: "f"}, "s", tc.mapper)
		if !strings.Contains(e.Detail(), tc.wantText) {
			t.Errorf("%s: error detail %q does not name %q", tc.name, e.Detail(), tc.wantText)
		}
	}
}

// An attribute that is not the resource's own keeps its name and has no path.
func TestStripPrefixLeavesOtherAttributes(t *testing.T) {
	m := diags.StripPrefix("network.")
	if p := m.Path("backend"); !p.Equal(path.Empty()) {
		t.Errorf("path of backend: %q, want none", p)
	}
	if n := m.Name("backend"); n != "backend" {
		t.Errorf("name of backend: %q", n)
	}
	// A mapper that places everything elsewhere keeps the finding's name.
	onSpec := diags.PathMapper(func(string) path.Path { return path.Root("template_spec") })
	e := diags.FromError(&model.Error{Class: model.ErrConfiguration, Attribute: "network.allow", Message: "m"}, "s", onSpec)
	if !strings.Contains(e.Detail(), "Attribute: network.allow") {
		t.Errorf("detail %q", e.Detail())
	}
}
