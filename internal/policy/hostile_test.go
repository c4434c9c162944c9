package policy_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/testing/hostile"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// refusedEverywhere is one template that breaks many built-in rules at once:
// egress learn and an allow list on runsc, cpu 0, memory -1 and timeout 0.
func refusedEverywhere() policy.Input {
	in := templateInput()
	in.Backend = dockerRef("runsc") // learn is refused there (it is accepted on runc)
	in.Template.Runtime = "runsc"
	in.Template.RequireIsolation = ""
	in.Template.TimeoutSeconds = 0
	n := *in.Network
	n.Egress = "learn"
	n.Allow = []string{"151.101.0.0/16"}
	in.Network = &n
	c := *in.Resources
	c.CPU = 0
	c.MemoryMB = -1
	in.Resources = &c
	return in
}

func findingIDs(fs []policy.Finding) []string {
	ids := make([]string, len(fs))
	for i, f := range fs {
		ids[i] = f.ID + " " + f.Attribute
	}
	return ids
}

// No team package can make a built-in refusal disappear: each hostile
// bundle is refused when it loads, refuses every evaluation, or leaves the
// built-in findings exactly as they are without it.
func TestHostileTeamPolicies_FailClosed(t *testing.T) {
	ctx := t.Context()
	in := refusedEverywhere()
	want := eval(t, engine(t), in)
	if len(want.Denies) < 5 {
		t.Fatalf("the reference input should break many rules, got %v", findingIDs(want.Denies))
	}
	for _, c := range hostile.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			e, err := policy.New(ctx, []string{c.Write(t)})
			if err == nil {
				err = e.CheckTeam()
			}
			if c.Want == hostile.RefusedAtLoad {
				assertRule(t, err, c.Rule)
				if c.Rule == "SBX-POL-001" && strings.Contains(err.Error(), "partial set rule") && !strings.Contains(err.Error(), "deny contains msg if") {
					t.Fatalf("the refusal does not show the right form: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			if c.Slow {
				e = e.WithBudget(300 * time.Millisecond)
			}
			start := time.Now()
			got, err := e.Evaluate(ctx, in)
			if c.Want == hostile.EvalRefused {
				assertRule(t, err, c.Rule)
				if c.Slow && time.Since(start) > 10*time.Second {
					t.Fatalf("the budget of 300ms was not kept: %v", time.Since(start))
				}
				return
			}
			if err != nil {
				t.Fatalf("evaluate: %v", err)
			}
			var builtin []policy.Finding
			for _, f := range got.Denies {
				if f.Builtin {
					builtin = append(builtin, f)
				}
			}
			if !reflect.DeepEqual(findingIDs(builtin), findingIDs(want.Denies)) {
				t.Fatalf("built-in refusals changed:\n got %v\nwant %v", findingIDs(builtin), findingIDs(want.Denies))
			}
		})
	}
}

func assertRule(t *testing.T, err error, rule string) {
	t.Helper()
	var me *model.Error
	if !errors.As(err, &me) || me.Rule != rule || me.Class != model.ErrConfiguration || me.Fix == "" {
		t.Fatalf("got %v, want a ConfigurationError %s with a fix", err, rule)
	}
}

// The hostile bundles through the official opa CLI: what OPA refuses, the
// loader refuses too, and what OPA accepts is one of the cases above, so
// Rego that OPA takes cannot slip past the loader. SANDBOXIO_OPA names the
// binary (make test builds it); without it the test skips.
func TestHostileTeamPolicies_OfficialOPA(t *testing.T) {
	opa := os.Getenv("SANDBOXIO_OPA")
	if opa == "" {
		t.Skip("SANDBOXIO_OPA is not set (make test sets it to the OPA CLI it builds)")
	}
	bundle, err := filepath.Abs(filepath.Join("..", "..", "policies"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := ast.JSON(refusedEverywhere().Value())
	if err != nil {
		t.Fatal(err)
	}
	input, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	inputFile := filepath.Join(t.TempDir(), "input.json")
	if err := os.WriteFile(inputFile, input, 0o600); err != nil {
		t.Fatal(err)
	}
	accepted := 0
	for _, c := range hostile.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			dir := c.Write(t)
			out, err := exec.Command(opa, "check", "--v1-compatible", bundle, dir).CombinedOutput()
			loadErr := loadHostile(dir)
			if err != nil {
				// OPA refuses the bundle: so must the loader.
				if loadErr == nil {
					t.Fatalf("opa check refuses it (%s) but the loader takes it", out)
				}
				return
			}
			accepted++
			// OPA takes it: the loader refuses it, or every evaluation
			// fails closed, or the built-in refusal stands beside it. In
			// OPA's own evaluation too, the built-in refusal stands.
			args := []string{"eval", "--v1-compatible", "--format", "json", "-d", bundle, "-d", dir, "-i", inputFile, "--timeout", "2s", "data.sandboxio.network.deny"}
			out, err = exec.Command(opa, args...).CombinedOutput()
			if c.Want == hostile.BuiltinsIntact && (err != nil || !strings.Contains(string(out), "SBX-NET-001")) {
				t.Fatalf("opa eval does not refuse egress learn beside this team package: %v: %s", err, out)
			}
			if loadErr != nil {
				return
			}
			e, _ := policy.New(t.Context(), []string{dir})
			if c.Slow {
				e = e.WithBudget(300 * time.Millisecond)
			}
			d, err := e.Evaluate(t.Context(), refusedEverywhere())
			if err == nil && !hasDeny(d, "SBX-NET-001") {
				t.Fatalf("OPA takes this bundle and the engine passed the configuration: %v", findingIDs(d.Denies))
			}
		})
	}
	if accepted == 0 {
		t.Fatal("opa check accepted none of the hostile bundles: the cases test nothing the loader alone could not see")
	}
}

// loadHostile loads a team bundle as every caller does (New, then CheckTeam).
func loadHostile(dir string) error {
	e, err := policy.New(context.Background(), []string{dir})
	if err != nil {
		return err
	}
	return e.CheckTeam()
}

func hasDeny(d policy.Decision, id string) bool {
	for _, f := range d.Denies {
		if f.ID == id {
			return true
		}
	}
	return false
}
