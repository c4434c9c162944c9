package policy_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

const canary = "CANARY-s3cr3t-9f8e7d"

func engine(t testing.TB) *policy.Engine {
	t.Helper()
	e, err := policy.Shared(t.Context(), nil)
	if err != nil {
		t.Fatalf("engine: %v", err)
	}
	return e
}

func dockerRef(runtime string) *policy.BackendRef {
	if runtime == "" {
		runtime = "runc"
	}
	return &policy.BackendRef{DSN: "docker://", Scheme: "docker", Runtime: runtime, Key: backends.CapabilityKey("docker", runtime), Options: map[string]string{}}
}

// templateInput is an accepted docker template; tests change one thing.
func templateInput() policy.Input {
	n := model.NetworkPolicy{}.Normalized()
	c := model.DefaultCaps()
	return policy.Input{
		Kind:    policy.KindTemplate,
		Backend: dockerRef("runsc"),
		Template: &policy.TemplateInput{
			Name: "python", Image: "python:3.12-slim", Runtime: "runsc", RequireIsolation: "GVISOR",
			TimeoutSeconds: 120, LifetimeSeconds: 600,
			Env: map[string]string{"LANG": "C.UTF-8"}, SecretNames: []string{"OPENAI_API_KEY"},
			Labels: map[string]string{"team": "agents"},
		},
		Network:   &n,
		Resources: &c,
	}
}

func eval(t *testing.T, e *policy.Engine, in policy.Input) policy.Decision {
	t.Helper()
	d, err := e.Evaluate(t.Context(), in)
	if err != nil {
		t.Fatalf("evaluate: %v", err)
	}
	return d
}

func TestEvaluate_AcceptedTemplate(t *testing.T) {
	d := eval(t, engine(t), templateInput())
	if !d.Allowed() || len(d.Warnings) != 0 {
		t.Fatalf("accepted template: denies %+v, warnings %+v", d.Denies, d.Warnings)
	}
}

func TestEvaluate_DockerAllowListRefused(t *testing.T) {
	in := templateInput()
	in.Network.Allow = []string{"151.101.0.0/16"}
	d := eval(t, engine(t), in)
	if d.Allowed() {
		t.Fatal("a Docker allow list was accepted")
	}
	f := d.Denies[0]
	if f.ID != "SBX-NET-003" || f.Class != string(model.ErrCapabilityNotSupported) || f.Attribute != "network.allow" || f.Fix == "" || f.Title == "" {
		t.Fatalf("finding: %+v", f)
	}
	err := d.Err()
	if !errors.Is(err, model.ErrCapabilityNotSupported) {
		t.Fatalf("Err() = %v, want class CapabilityNotSupported", err)
	}
	if !strings.Contains(err.Error(), "SBX-NET-003") {
		t.Fatalf("error text lacks the rule: %v", err)
	}
}

func TestEvaluate_WarningsAreNotDenies(t *testing.T) {
	// runc: Docker daemons register runsc with --network=none, which cannot
	// give open egress (SBX-NET-010, below).
	in := templateInput()
	in.Backend = dockerRef("runc")
	in.Template.Runtime = "runc"
	in.Template.RequireIsolation = string(model.TierContainer)
	in.Network.Egress = model.EgressAllow
	d := eval(t, engine(t), in)
	if !d.Allowed() {
		t.Fatalf("open egress refused: %+v", d.Denies)
	}
	if len(d.Warnings) != 1 || d.Warnings[0].Class != string(model.OpenEgressWarning) {
		t.Fatalf("warnings: %+v", d.Warnings)
	}
}

func TestEvaluate_OpenEgressOnRunscRefused(t *testing.T) {
	in := templateInput()
	in.Network.Egress = model.EgressAllow
	d := eval(t, engine(t), in)
	if len(d.Denies) != 1 {
		t.Fatalf("denies: %+v", d.Denies)
	}
	f := d.Denies[0]
	if f.ID != "SBX-NET-010" || f.Class != string(model.ErrCapabilityNotSupported) || f.Attribute != "network.egress" || f.Title == "" ||
		!strings.Contains(f.Message, "docker/runsc") || !strings.Contains(f.Fix, "runc") {
		t.Fatalf("finding: %+v", f)
	}
	if len(d.Warnings) != 1 || d.Warnings[0].Class != string(model.OpenEgressWarning) {
		t.Fatalf("warnings: %+v", d.Warnings)
	}
}

func TestEvaluate_UnknownTierWarns(t *testing.T) {
	in := templateInput()
	in.Backend = &policy.BackendRef{DSN: "daytona://", Scheme: "daytona", Key: "daytona"}
	in.Template.Runtime = ""
	in.Template.RequireIsolation = ""
	d := eval(t, engine(t), in)
	// A default Daytona template plans (its memory cap bounds swap): no
	// refusal, and the unverified tier is a warning.
	if len(d.Denies) != 0 {
		t.Fatalf("daytona template refusals: %+v", d.Denies)
	}
	found := false
	for _, w := range d.Warnings {
		found = found || w.Class == string(model.UnverifiedIsolationWarning)
	}
	if !found {
		t.Fatalf("no UnverifiedIsolationWarning: %+v", d.Warnings)
	}
}

// Nothing a rule says may repeat a secret: neither a value pasted into
// secret_names nor a credential-looking env value.
func TestEvaluate_CanaryNeverInFindings(t *testing.T) {
	in := templateInput()
	in.Template.SecretNames = []string{"sk-" + canary}
	in.Template.Env = map[string]string{"OPENAI_API_KEY_LITERAL": "sk-" + canary + "abcdefabcdefabcdef", "X": "ghp_" + canary}
	d := eval(t, engine(t), in)
	if d.Allowed() {
		t.Fatal("a secret value in secret_names was accepted")
	}
	if len(d.Warnings) == 0 {
		t.Fatal("a credential in env was not warned about")
	}
	for _, f := range append(d.Denies, d.Warnings...) {
		for _, s := range []string{f.Message, f.Fix, f.Attribute, f.Title, f.Error().Error()} {
			if strings.Contains(s, canary) {
				t.Fatalf("finding %s repeats the secret: %q", f.ID, s)
			}
		}
	}
}

func TestEvaluate_FromSpecDropsOwnReservedLabels(t *testing.T) {
	s := model.Spec{SpecVersion: 1, Name: "python", Backend: "docker://", Image: "img", Runtime: "runc",
		IsolationTier: model.TierContainer, Network: model.NetworkPolicy{}.Normalized(), Resources: model.DefaultCaps(),
		TimeoutSeconds: 300, LifetimeSeconds: 300,
		Labels:   map[string]string{model.LabelTenantID: "acme", model.LabelSessionID: "s-1", "team": "a"},
		TenantID: "acme", SessionID: "s-1"}
	d := eval(t, engine(t), policy.FromSpec(s, dockerRef("runc")))
	if !d.Allowed() {
		t.Fatalf("rendered spec refused: %+v", d.Denies)
	}
	s.Labels["sandboxio.evil"] = "x"
	if eval(t, engine(t), policy.FromSpec(s, dockerRef("runc"))).Allowed() {
		t.Fatal("a user label under the reserved prefix was accepted")
	}
}

func TestShared_CompiledOncePerPaths(t *testing.T) {
	a, b := engine(t), engine(t)
	if a != b {
		t.Fatal("Shared compiled the bundle twice for the same paths")
	}
}

func TestRules_EveryRuleAnnotated(t *testing.T) {
	rules := engine(t).Rules()
	if len(rules) < 20 {
		t.Fatalf("only %d annotated rules", len(rules))
	}
	for _, r := range rules {
		if r.Title == "" || r.Class == "" || r.Fix == "" || r.Package == "" || !r.Builtin {
			t.Errorf("rule %s incomplete: %+v", r.ID, r)
		}
	}
}

func writePolicy(t *testing.T, dir, name, src string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestTeamPolicy_Evaluated(t *testing.T) {
	dir := t.TempDir()
	writePolicy(t, dir, "registry.rego", `package team.registry

# METADATA
# title: Images from the approved registry
# custom:
#   id: TEAM-IMG-001
#   class: ConfigurationError
#   attribute: image
#   fix: use an image from registry.internal
deny contains {"id": "TEAM-IMG-001", "class": "ConfigurationError", "attribute": "image", "msg": sprintf("image %s is not from registry.internal", [input.template.image]), "fix": "use registry.internal"} if {
	input.template
	not startswith(input.template.image, "registry.internal/")
}

warn contains "plain team warning" if { input.template.name == "python" }
`)
	writePolicy(t, dir, "registry_test.rego", `package team.registry_test
test_skipped_by_engine if { true }
`)
	e, err := policy.New(t.Context(), []string{dir})
	if err != nil {
		t.Fatalf("team policy: %v", err)
	}
	d := eval(t, e, templateInput())
	if d.Allowed() || d.Denies[0].ID != "TEAM-IMG-001" || d.Denies[0].Builtin {
		t.Fatalf("team deny: %+v", d.Denies)
	}
	if len(d.Warnings) != 1 || d.Warnings[0].Message != "plain team warning" {
		t.Fatalf("team warning: %+v", d.Warnings)
	}
	// The built-in rules still apply beside the team's.
	in := templateInput()
	in.Network.Allow = []string{"10.0.0.0/8"}
	ids := map[string]bool{}
	for _, f := range eval(t, e, in).Denies {
		ids[f.ID] = true
	}
	if !ids["SBX-NET-003"] || !ids["TEAM-IMG-001"] {
		t.Fatalf("denies with team policy: %v", ids)
	}
}

// A team policy cannot shadow or extend the built-in rules: the reserved
// namespace is refused outright.
func TestTeamPolicy_ReservedNamespaceRefused(t *testing.T) {
	dir := t.TempDir()
	writePolicy(t, dir, "override.rego", `package sandboxio.network

deny := set()
`)
	_, err := policy.New(t.Context(), []string{dir})
	if !errors.Is(err, model.ErrConfiguration) || !strings.Contains(err.Error(), "reserved") {
		t.Fatalf("reserved namespace: %v", err)
	}
}

func TestTeamPolicy_BrokenPoliciesAreConfigurationErrors(t *testing.T) {
	for name, src := range map[string]string{
		"syntax":  "package team.x\n\ndeny contains msg if {",
		"compile": "package team.x\n\ndeny contains msg if { msg := undefined_function(1) }\n",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writePolicy(t, dir, "bad.rego", src)
			_, err := policy.New(t.Context(), []string{dir})
			if !errors.Is(err, model.ErrConfiguration) {
				t.Fatalf("want ConfigurationError, got %v", err)
			}
		})
	}
	_, err := policy.New(t.Context(), []string{"/does/not/exist"})
	if !errors.Is(err, model.ErrConfiguration) {
		t.Fatalf("missing path: %v", err)
	}
}

func TestInput_MapIsVersioned(t *testing.T) {
	m, err := templateInput().Map()
	if err != nil {
		t.Fatal(err)
	}
	// A missing input_version must fail too: policy authors rely on it.
	if v := fmt.Sprint(m["input_version"]); v != fmt.Sprint(policy.InputVersion) {
		t.Fatalf("input_version = %#v, want %d", m["input_version"], policy.InputVersion)
	}
	caps, _ := m["capabilities"].(map[string]any)
	if caps["key"] != "docker/runsc" || caps["tier"] != "GVISOR" {
		t.Fatalf("capabilities in input: %#v", caps)
	}
}

// The document always holds brokered_secrets ({} when none), so a team
// rule can read it unguarded; an entry carries hosts, header and format.
func TestInput_MapHoldsBrokeredSecrets(t *testing.T) {
	m, err := templateInput().Map()
	if err != nil {
		t.Fatal(err)
	}
	tmpl, _ := m["template"].(map[string]any)
	if b, ok := tmpl["brokered_secrets"].(map[string]any); !ok || len(b) != 0 {
		t.Fatalf("brokered_secrets of a template without any: %#v", tmpl["brokered_secrets"])
	}
	in := templateInput()
	in.Template.BrokeredSecrets = map[string]model.BrokeredSecret{"GH": {Hosts: []string{"api.github.com"}, Header: "Authorization", Format: "Bearer %s"}}
	if m, err = in.Map(); err != nil {
		t.Fatal(err)
	}
	tmpl, _ = m["template"].(map[string]any)
	want := map[string]any{"GH": map[string]any{"hosts": []any{"api.github.com"}, "header": "Authorization", "format": "Bearer %s"}}
	if !reflect.DeepEqual(tmpl["brokered_secrets"], want) {
		t.Fatalf("brokered_secrets = %#v, want %#v", tmpl["brokered_secrets"], want)
	}
}

// Evaluations share the engine, its pooled caches and the parts of the input
// built once; run with -race.
func TestEvaluate_Concurrent(t *testing.T) {
	e := engine(t)
	inputs := []policy.Input{templateInput()}
	refused := templateInput()
	refused.Network.Allow = []string{"151.101.0.0/16", "not a host!"}
	refused.Resources.Pids = 0
	refused.Template.Labels = map[string]string{"sandboxio.x": "y", "bad key!": "z"}
	inputs = append(inputs, refused)
	daytona := templateInput()
	daytona.Backend = &policy.BackendRef{DSN: "daytona://", Scheme: "daytona", Key: "daytona"}
	daytona.Template.Runtime, daytona.Template.RequireIsolation = "", ""
	inputs = append(inputs, daytona)
	want := make([]policy.Decision, len(inputs))
	for i, in := range inputs {
		want[i] = eval(t, e, in)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8*len(inputs))
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 50 {
				i := (g + n) % len(inputs)
				d, err := e.Evaluate(context.WithoutCancel(t.Context()), inputs[i])
				if err != nil || !reflect.DeepEqual(d, want[i]) {
					errs <- fmt.Sprintf("input %d: %v %+v", i, err, d)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for msg := range errs {
		t.Error(msg)
	}
}

// The capability data is what the built-in rules trust: a team package in
// its namespace could rank runc as a microVM. New refuses it outright, not
// only Load.
func TestTeamPolicy_CapabilitiesNamespaceRefused(t *testing.T) {
	dir := t.TempDir()
	writePolicy(t, dir, "tiers.rego", `package capabilities

tiers := {"UNKNOWN": 0, "CONTAINER": 3, "GVISOR": 3, "MICROVM": 3}
`)
	_, err := policy.New(t.Context(), []string{dir})
	if !errors.Is(err, model.ErrConfiguration) || !strings.Contains(err.Error(), "reserved namespace") {
		t.Fatalf("capabilities namespace: %v", err)
	}
}

// Numbers from the capability data print as written in messages and fixes:
// decoded as float64 they came out as 2.592e+06.
func TestEvaluate_BoundsPrintAsWritten(t *testing.T) {
	in := templateInput()
	in.Template.LifetimeSeconds = 3000000
	c := *in.Resources
	c.MemoryMB = 17592186044416
	in.Resources = &c
	d := eval(t, engine(t), in)
	var text []string
	for _, f := range d.Denies {
		text = append(text, f.ID+": "+f.Message+" fix: "+f.Fix)
	}
	all := strings.Join(text, "\n")
	for _, want := range []string{"2592000", "16777216", "17592186044416"} {
		if !strings.Contains(all, want) {
			t.Errorf("refusals do not name %s:\n%s", want, all)
		}
	}
	if strings.Contains(all, "e+") {
		t.Errorf("a number printed in exponent form:\n%s", all)
	}
}
