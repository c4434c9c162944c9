package docker

import (
	"errors"
	"strings"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Every refusal validate makes under a policy rule is the one backstop
// error, in the rule catalogue's words: the class, fix and title of the
// rule's METADATA, never Docker's own text.
func TestValidateBackstopsUseCatalogueText(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*model.Spec)
		rule string
	}{
		{"learn mode on runsc", func(s *model.Spec) { s.Network.Egress, s.Runtime = model.EgressLearn, "runsc" }, "SBX-NET-001"},
		{"unknown egress", func(s *model.Spec) { s.Network.Egress = "block" }, "SBX-NET-002"},
		{"allow list", func(s *model.Spec) { s.Network.Allow = []string{"151.101.0.0/16"} }, "SBX-NET-003"},
		{"require UNKNOWN", func(s *model.Spec) { s.RequireIsolation = model.TierUnknown }, "SBX-ISO-001"},
		{"not a tier", func(s *model.Spec) { s.RequireIsolation = "VM" }, "SBX-ISO-002"},
		{"require GVISOR on runc", func(s *model.Spec) { s.RequireIsolation = model.TierGVisor }, "SBX-ISO-003"},
		{"unknown runtime", func(s *model.Spec) { s.Runtime = "youki" }, "SBX-ISO-005"},
		{"zero cpu", func(s *model.Spec) { s.Resources.CPU = 0 }, "SBX-RES-001"},
		{"pids above ceiling", func(s *model.Spec) { s.Resources.Pids = 1 << 20 }, "SBX-RES-005"},
		{"zero timeout", func(s *model.Spec) { s.TimeoutSeconds = 0 }, "SBX-TMO-001"},
		{"zero lifetime", func(s *model.Spec) { s.LifetimeSeconds = 0 }, "SBX-TMO-002"},
		{"reserved label", func(s *model.Spec) { s.Labels["sandboxio.owner"] = "me" }, "SBX-LBL-001"},
		{"empty label key", func(s *model.Spec) { s.Labels[""] = "x" }, "SBX-LBL-002"},
		{"secret name with =", func(s *model.Spec) { s.SecretNames = []string{"A=B"} }, "SBX-SEC-001"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := validate(backends.CreateRequest{Spec: testSpec(t, tc.mod), Secrets: map[string]string{"A=B": "v"}}, true)
			var me *model.Error
			if !errors.As(err, &me) {
				t.Fatalf("got %v, want a *model.Error", err)
			}
			want, ok := backends.LookupRule(tc.rule)
			if !ok || want.Title == "" || want.Fix == "" {
				t.Fatalf("%s is not in the catalogue with a title and fix: %+v", tc.rule, want)
			}
			if me.Rule != tc.rule || !backends.IsPolicyGap(err) {
				t.Fatalf("got %v, want the backstop error of %s", err, tc.rule)
			}
			if string(me.Class) != want.Class || me.Fix != want.Fix || !strings.HasSuffix(me.Message, ": "+want.Title) {
				t.Errorf("got class %s, message %q, fix %q; want the catalogue's %s, title %q, fix %q",
					me.Class, me.Message, me.Fix, want.Class, want.Title, want.Fix)
			}
		})
	}
}
