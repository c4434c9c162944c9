package policies_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/loader"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/tester"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
	"github.com/sandboxio/terraform-provider-sandboxio/policies"
)

// loadBundle loads the embedded bundle the way `opa test policies` loads the
// directory: every module with its annotations, and capabilities/data.json
// at data.capabilities.
func loadBundle(t testing.TB) *loader.Result {
	t.Helper()
	res, err := loader.NewFileLoader().
		WithFS(policies.Bundle).
		WithProcessAnnotation(true).
		WithRegoVersion(ast.RegoV1).
		All([]string{"."})
	if err != nil {
		t.Fatalf("load embedded bundle: %v", err)
	}
	caps, ok := res.Documents["capabilities"].(map[string]any)
	if !ok {
		t.Fatalf("capabilities/data.json is not at data.capabilities; top-level documents: %v", keys(res.Documents))
	}
	for _, k := range []string{"tiers", "default_caps", "backends"} {
		if _, ok := caps[k]; !ok {
			t.Fatalf("data.capabilities.%s missing", k)
		}
	}
	return res
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func isTestFile(name string) bool { return strings.HasSuffix(name, "_test.rego") }

// TestRegoTests runs every test_ rule of the bundle and fails on any failure
// or error.
func TestRegoTests(t *testing.T) {
	res := loadBundle(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	store := inmem.NewFromObject(res.Documents)
	ch, err := tester.NewRunner().
		SetStore(store).
		SetModules(res.ParsedModules()).
		SetDefaultRegoVersion(ast.RegoV1).
		RaiseBuiltinErrors(true).
		SetTimeout(time.Minute).
		RunTests(ctx, nil)
	if err != nil {
		t.Fatalf("run rego tests: %v", err)
	}
	var ran, passed int
	for r := range ch {
		ran++
		switch {
		case r.Error != nil:
			t.Errorf("%s.%s (%s): error: %v", r.Package, r.Name, r.Location, r.Error)
		case r.Skip:
			t.Errorf("%s.%s (%s): skipped; every test must run", r.Package, r.Name, r.Location)
		case r.Fail:
			t.Errorf("%s.%s (%s): FAIL", r.Package, r.Name, r.Location)
		default:
			passed++
		}
	}
	if ran == 0 {
		t.Fatal("no rego test ran")
	}
	t.Logf("rego tests: %d passed of %d", passed, ran)
}

var (
	ruleID      = regexp.MustCompile(`^SBX-[A-Z]{3}-[0-9]{3}$`)
	packageName = regexp.MustCompile(`^data\.sandboxio\.[a-z]+$`)
	warnings    = []model.WarningClass{
		model.UnverifiedIsolationWarning, model.OrphanedSandboxWarning,
		model.OpenEgressWarning, model.SecretInEnvWarning, model.IdleLifetimeWarning, model.EgressLearnWarning,
		model.CapNotAppliedWarning,
	}
)

type ruleInfo struct {
	id, class, attribute, kind, pkg, title string
}

// bundleRules returns the annotation of every deny and warn rule of the
// bundle (test files excluded), checking each one's METADATA on the way.
func bundleRules(t *testing.T) []ruleInfo {
	t.Helper()
	res := loadBundle(t)
	var modules []*ast.Module
	for name, m := range res.ParsedModules() {
		if !isTestFile(name) {
			modules = append(modules, m)
		}
	}
	as, errs := ast.BuildAnnotationSet(modules)
	if len(errs) > 0 {
		t.Fatalf("annotations: %v", errs)
	}
	var out []ruleInfo
	for _, m := range modules {
		pkg := m.Package.Path.String()
		for _, r := range m.Rules {
			kind := r.Head.Name.String()
			if len(r.Head.Reference) > 0 {
				kind = r.Head.Reference[0].Value.(ast.Var).String()
			}
			if kind != "deny" && kind != "warn" {
				continue
			}
			where := r.Location.String()
			if !packageName.MatchString(pkg) {
				t.Errorf("%s: %s rule in package %s, want data.sandboxio.<concern>", where, kind, pkg)
			}
			if r.Head.RuleKind() != ast.MultiValue {
				t.Errorf("%s: %s must be a partial set rule (%s contains f if { ... })", where, kind, kind)
			}
			anns := as.GetRuleScope(r)
			if len(anns) != 1 {
				t.Errorf("%s: %s rule has %d rule-scope METADATA annotations, want 1", where, kind, len(anns))
				continue
			}
			a := anns[0]
			info := ruleInfo{kind: kind, pkg: pkg, title: a.Title}
			if a.Title == "" || a.Description == "" {
				t.Errorf("%s: METADATA needs a title and a description", where)
			}
			for field, dst := range map[string]*string{"id": &info.id, "class": &info.class, "attribute": &info.attribute} {
				s, _ := a.Custom[field].(string)
				if s == "" {
					t.Errorf("%s: METADATA custom.%s missing or empty", where, field)
				}
				*dst = s
			}
			if fix, _ := a.Custom["fix"].(string); fix == "" {
				t.Errorf("%s: METADATA custom.fix missing or empty", where)
			}
			// The finding must be built from this annotation, so the ID,
			// class, attribute and fix are written once.
			if !strings.Contains(r.Body.String(), "rego.metadata.rule()") {
				t.Errorf("%s (%s): the rule body does not build its finding from rego.metadata.rule()", where, info.id)
			}
			out = append(out, info)
		}
	}
	if len(out) == 0 {
		t.Fatal("the bundle has no deny or warn rule")
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

func TestRuleMetadata(t *testing.T) {
	rules := bundleRules(t)

	var tests strings.Builder
	err := fs.WalkDir(policies.Bundle, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !isTestFile(path) {
			return err
		}
		b, err := policies.Bundle.ReadFile(path)
		tests.Write(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	seen := map[string]string{}
	for _, r := range rules {
		if !ruleID.MatchString(r.id) {
			t.Errorf("rule %q (%s): id does not match %s", r.id, r.pkg, ruleID)
		}
		if prev, dup := seen[r.id]; dup {
			t.Errorf("rule id %s used twice (%s and %s)", r.id, prev, r.title)
		}
		seen[r.id] = r.title
		switch r.kind {
		case "deny":
			if !slices.Contains(model.ErrorClasses, model.ErrorClass(r.class)) {
				t.Errorf("deny rule %s: class %q is not an error class (%v)", r.id, r.class, model.ErrorClasses)
			}
		case "warn":
			if !slices.Contains(warnings, model.WarningClass(r.class)) {
				t.Errorf("warn rule %s: class %q is not a warning class (%v)", r.id, r.class, warnings)
			}
		}
		if !strings.Contains(tests.String(), `"`+r.id+`"`) {
			t.Errorf("rule %s has no test: its id appears in no _test.rego file", r.id)
		}
	}
	t.Logf("%d rules", len(rules))
}

// catalogueLink is where README.md sends the reader for the rules: the
// generated catalogue, by an address that works both on GitHub and in the
// guide that renders README.md (docs/guides/policy-input.md).
const catalogueLink = "(https://github.com/sandboxio/terraform-provider-sandboxio/blob/main/docs/guides/policies.md)"

// TestReadmeLinksCatalogue keeps README.md free of a hand-written rule
// table, which would drift from the rules' METADATA: it links to the
// generated catalogue instead.
func TestReadmeLinksCatalogue(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), catalogueLink) {
		t.Errorf("README.md does not link to the rule catalogue %s", catalogueLink)
	}
	row := regexp.MustCompile("(?m)^\\| `?(SBX-[A-Z]{3}-[0-9]{3})`? \\|")
	for _, m := range row.FindAllStringSubmatch(string(readme), -1) {
		t.Errorf("README.md lists rule %s in a table; the generated catalogue (docs/guides/policies.md) lists the rules", m[1])
	}
	if _, err := os.Stat(filepath.Join("..", "docs", "guides", "policies.md")); err != nil {
		t.Errorf("the catalogue README.md links to is missing: %v", err)
	}
}

// TestTopReadmeSampleErrors keeps the sample diagnostics of the top-level
// README.md in step with the bundle: each "Error: Class: title" there reads
// as the rule it names (the "Rule:" line below it) renders.
func TestTopReadmeSampleErrors(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rules := map[string]ruleInfo{}
	for _, r := range bundleRules(t) {
		rules[r.id] = r
	}
	sample := regexp.MustCompile(`(?m)^Error: ([A-Za-z]+): (.+)\n(?:  .*\n)*?  Rule: (SBX-[A-Z]{3}-[0-9]{3})$`)
	found := sample.FindAllStringSubmatch(string(readme), -1)
	if len(found) == 0 {
		t.Fatal("README.md shows no sample error with its rule")
	}
	for _, m := range found {
		r, ok := rules[m[3]]
		if !ok {
			continue // a Go-side rule (SBX-DSN-*, SBX-SPC-*)
		}
		if m[1] != r.class || m[2] != r.title {
			t.Errorf("README.md shows %s as %q, the rule renders %q", m[3], m[1]+": "+m[2], r.class+": "+r.title)
		}
	}
}

// TestGuideRendersReadme checks that the policies guide shows this README as
// markdown: all of it, and not wrapped in a code block, whose fence the
// README's own fences would close early.
func TestGuideRendersReadme(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	guide, err := os.ReadFile("../docs/guides/policy-input.md")
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := strings.Cut(strings.TrimPrefix(string(guide), "---\n"), "\n---\n")
	if !ok {
		t.Fatal("docs/guides/policy-input.md has no front matter")
	}
	if got, want := strings.TrimSpace(body), strings.TrimSpace(string(readme)); got != want {
		t.Errorf("docs/guides/policy-input.md is not policies/README.md as markdown (run make generate); it starts %q", got[:min(len(got), 80)])
	}
}

// --- evaluation ---------------------------------------------------------------

// acceptedTemplate is the input document of an accepted sandboxio_template on
// the backend with capability key key, as the engine builds it: the example
// template of DESIGN.md, with the requirement the backend gives (none on an
// UNKNOWN-tier backend).
func acceptedTemplate(t testing.TB, key string) map[string]any {
	t.Helper()
	var caps struct {
		Backends map[string]map[string]any `json:"backends"`
	}
	b, err := policies.Bundle.ReadFile(policies.CapabilitiesPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &caps); err != nil {
		t.Fatal(err)
	}
	desc, ok := caps.Backends[key]
	if !ok {
		t.Fatalf("no capability descriptor %q", key)
	}
	scheme, runtime, tier := desc["backend"].(string), desc["runtime"].(string), desc["tier"].(string)
	require := tier
	if tier == string(model.TierUnknown) {
		require = ""
	}
	// the defaults, with more memory where the backend sets memory
	resources := map[string]any{"cpu": 1, "memory_mb": 512, "disk_mb": 1024, "pids": 256}
	if slices.Contains(desc["caps"].(map[string]any)["settable"].([]any), any("memory_mb")) {
		resources["memory_mb"] = 1024
	}
	if per, ok := desc["caps"].(map[string]any)["vcpu_memory_mb"].(float64); ok {
		resources["memory_mb"] = per // one vCPU with its memory (Vercel)
	}
	return map[string]any{
		"input_version": 1,
		"kind":          "template",
		"address":       "sandboxio_template.python",
		"backend": map[string]any{
			"dsn": scheme + "://", "scheme": scheme, "runtime": runtime, "key": key, "options": map[string]any{},
		},
		"capabilities": desc,
		"template": map[string]any{
			"name": "python", "image": "python:3.12-slim", "runtime": runtime, "require_isolation": require,
			"timeout_seconds": 120, "lifetime_seconds": 600,
			"env":          map[string]any{"LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1"},
			"secret_names": []any{"OPENAI_API_KEY"},
			"labels":       map[string]any{"team": "agents"},
		},
		"network":   map[string]any{"egress": "deny", "allow": []any{}},
		"resources": resources,
	}
}

// prepareBundle compiles the rule modules (tests excluded) over the
// capability data and prepares the query the engine (internal/policy) runs:
// every deny and every warn set of the bundle, in one array.
func prepareBundle(t testing.TB) (rego.PreparedEvalQuery, []string) {
	t.Helper()
	res := loadBundle(t)
	var sets []string
	opts := []func(*rego.Rego){
		rego.Store(inmem.NewFromObjectWithOpts(res.Documents, inmem.OptReturnASTValuesOnRead(true))),
		rego.SetRegoVersion(ast.RegoV1),
		rego.StrictBuiltinErrors(true),
	}
	seen := map[string]bool{}
	for name, m := range res.ParsedModules() {
		if isTestFile(name) {
			continue
		}
		opts = append(opts, rego.ParsedModule(m))
		for _, r := range m.Rules {
			kind := r.Head.Name.String()
			if len(r.Head.Reference) > 0 {
				kind = r.Head.Reference[0].Value.(ast.Var).String()
			}
			if ref := m.Package.Path.String() + "." + kind; (kind == "deny" || kind == "warn") && !seen[ref] {
				seen[ref] = true
				sets = append(sets, ref)
			}
		}
	}
	sort.Strings(sets)
	opts = append(opts, rego.Query("x := ["+strings.Join(sets, ", ")+"]"))
	pq, err := rego.New(opts...).PrepareForEval(t.Context())
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	return pq, sets
}

// evalFindings evaluates input and returns the IDs of the deny and warn findings.
func evalFindings(t *testing.T, pq rego.PreparedEvalQuery, sets []string, input map[string]any) (deny, warn []map[string]any) {
	t.Helper()
	rs, err := pq.Eval(t.Context(), rego.EvalInput(input))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 {
		t.Fatalf("got %d results, want 1", len(rs))
	}
	for i, set := range rs[0].Bindings["x"].([]any) {
		for _, f := range set.([]any) {
			if strings.HasSuffix(sets[i], ".deny") {
				deny = append(deny, f.(map[string]any))
			} else {
				warn = append(warn, f.(map[string]any))
			}
		}
	}
	return deny, warn
}

func TestAcceptedTemplateOnEveryBackend(t *testing.T) {
	pq, sets := prepareBundle(t)
	for _, key := range []string{"docker/runc", "docker/runsc", "docker/kata", "e2b", "modal", "vercel", "daytona"} {
		deny, warn := evalFindings(t, pq, sets, acceptedTemplate(t, key))
		// Daytona plans too (its memory cap bounds swap), with two more
		// warnings: its isolation tier is unverified and its lifetime is an
		// idle limit. Where a backend cannot set a default cap per sandbox,
		// the plan says the default is not applied.
		wantWarn := map[string]bool{}
		switch key {
		case "daytona":
			wantWarn = map[string]bool{"UnverifiedIsolationWarning": true, "IdleLifetimeWarning": true, "CapNotAppliedWarning": true}
		case "modal", "vercel":
			wantWarn = map[string]bool{"CapNotAppliedWarning": true}
		}
		if len(deny) != 0 {
			t.Errorf("%s: refused: %v", key, deny)
		}
		got := map[string]bool{}
		for _, w := range warn {
			got[w["class"].(string)] = true
		}
		if !maps.Equal(got, wantWarn) {
			t.Errorf("%s: warnings %v, want %v", key, warn, wantWarn)
		}
	}
}

func TestRefusedTemplateFindings(t *testing.T) {
	pq, sets := prepareBundle(t)
	input := acceptedTemplate(t, "docker/runsc")
	input["network"] = map[string]any{"egress": "deny", "allow": []any{"151.101.0.0/16"}}
	deny, _ := evalFindings(t, pq, sets, input)
	if len(deny) != 1 {
		t.Fatalf("deny: %v, want one finding", deny)
	}
	f := deny[0]
	if f["id"] != "SBX-NET-003" || f["class"] != string(model.ErrCapabilityNotSupported) || f["attribute"] != "network.allow" {
		t.Errorf("finding %v, want SBX-NET-003 CapabilityNotSupported network.allow", f)
	}
	if !strings.Contains(f["msg"].(string), "docker/runsc") || f["fix"] == "" {
		t.Errorf("finding %v: message must name the backend and the fix must be set", f)
	}
}

// BenchmarkAcceptedTemplate measures one evaluation of the whole bundle for an
// accepted template, the per-resource cost at plan time, on each backend.
func BenchmarkAcceptedTemplate(b *testing.B) {
	pq, _ := prepareBundle(b)
	for _, key := range []string{"docker/runsc", "e2b", "modal", "vercel"} {
		input, err := ast.InterfaceToValue(acceptedTemplate(b, key))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(strings.ReplaceAll(key, "/", "-"), func(b *testing.B) {
			ctx := b.Context()
			b.ReportAllocs()
			for b.Loop() {
				rs, err := pq.Eval(ctx, rego.EvalParsedInput(input))
				if err != nil || len(rs) != 1 {
					b.Fatalf("eval: %v %v", rs, err)
				}
			}
		})
	}
}

// The finding constructors of lib.rego read meta.custom.id, .class,
// .attribute and .fix directly: a deny or warn rule whose annotation lacked
// one would build no finding and so never fire. Every such rule of the
// bundle must carry all four, as non-empty strings.
func TestEveryDenyAndWarnRuleCarriesFindingFields(t *testing.T) {
	res := loadBundle(t)
	checked := 0
	for name, m := range res.Modules {
		if strings.HasSuffix(name, "_test.rego") {
			continue
		}
		for _, r := range m.Parsed.Rules {
			head := r.Head.Name.String()
			if len(r.Head.Reference) > 0 {
				head = r.Head.Reference[0].String()
			}
			if head != "deny" && head != "warn" {
				continue
			}
			checked++
			var custom map[string]any
			for _, a := range r.Annotations {
				if a.Scope == "rule" {
					custom = a.Custom
				}
			}
			for _, field := range []string{"id", "class", "attribute", "fix"} {
				if s, ok := custom[field].(string); !ok || strings.TrimSpace(s) == "" {
					t.Errorf("%s:%d: %s rule has no custom.%s in its METADATA, so it would never fire", name, r.Location.Row, head, field)
				}
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d deny/warn rules found", checked)
	}
}
