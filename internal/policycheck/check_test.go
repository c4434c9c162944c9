package policycheck

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/verdict"
)

var now = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)

func builtinEngine(t testing.TB) *policy.Engine {
	t.Helper()
	e, err := policy.Load(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// change is one resource of a synthetic plan.
type change struct {
	addr, mode, typ, name string
	actions               []string
	after                 map[string]any
	unknown               map[string]any
}

func templateChange(name string, after map[string]any) change {
	base := map[string]any{
		"name": name, "backend": "docker://", "image": "python:3.12-slim", "runtime": nil, "require_isolation": nil,
		"network":         map[string]any{"egress": "deny", "allow": []any{}},
		"resources":       map[string]any{"cpu": 1, "memory_mb": 512, "disk_mb": 1024, "pids": 256},
		"timeout_seconds": 300, "lifetime_seconds": 300, "env": nil, "secret_names": nil, "labels": nil,
	}
	for k, v := range after {
		base[k] = v
	}
	return change{addr: "sandboxio_template." + name, mode: "managed", typ: "sandboxio_template", name: name,
		actions: []string{"create"}, after: base, unknown: map[string]any{}}
}

// planJSON renders a plan as `terraform show -json` would, with the
// provider's default_backend set to defaultBackend.
func planJSON(t testing.TB, defaultBackend string, changes ...change) []byte {
	t.Helper()
	var rcs, planned, cfg []any
	for _, c := range changes {
		rcs = append(rcs, map[string]any{
			"address": c.addr, "mode": c.mode, "type": c.typ, "name": c.name,
			"provider_name": "registry.terraform.io/sandboxio/sandboxio",
			"change":        map[string]any{"actions": c.actions, "before": nil, "after": c.after, "after_unknown": c.unknown},
		})
		planned = append(planned, map[string]any{"address": c.addr, "mode": c.mode, "type": c.typ, "name": c.name,
			"provider_name": "registry.terraform.io/sandboxio/sandboxio", "values": c.after})
		a := c.typ + "." + c.name
		if c.mode == "data" {
			a = "data." + a
		}
		cfg = append(cfg, map[string]any{"address": a, "mode": c.mode, "type": c.typ, "name": c.name, "provider_config_key": "sandboxio"})
	}
	pc := map[string]any{"name": "sandboxio", "full_name": "registry.terraform.io/sandboxio/sandboxio"}
	if defaultBackend != "" {
		pc["expressions"] = map[string]any{"default_backend": map[string]any{"constant_value": defaultBackend}}
	}
	p := map[string]any{
		"format_version": "1.2", "terraform_version": "1.11.4",
		"planned_values":   map[string]any{"root_module": map[string]any{"resources": planned}},
		"resource_changes": rcs,
		"configuration": map[string]any{
			"provider_config": map[string]any{"sandboxio": pc},
			"root_module":     map[string]any{"resources": cfg},
		},
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func check(t testing.TB, e *policy.Engine, data []byte, w *verdict.Waivers) *Report {
	t.Helper()
	rep, err := Check(t.Context(), e, "plan.json", data, Options{Waivers: w, Now: now})
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	return rep
}

func byAddress(rep *Report) map[string]ResourceReport {
	m := map[string]ResourceReport{}
	for _, r := range rep.Resources {
		m[r.Address] = r
	}
	return m
}

func ids(r ResourceReport, o verdict.Outcome) []string {
	var out []string
	for _, x := range r.Results {
		if x.Outcome == o {
			out = append(out, x.ID)
		}
	}
	return out
}

// A plan written by Terraform 1.11 (testdata/README.md has its
// configuration): count, for_each, a child module, a default_backend from a
// variable, values unknown until apply and a deferred data source read.
func TestCheck_RealPlan(t *testing.T) {
	data, err := os.ReadFile("testdata/plan-create.json")
	if err != nil {
		t.Fatal(err)
	}
	rep := check(t, builtinEngine(t), data, nil)
	got := byAddress(rep)
	want := map[string]string{
		"data.sandboxio_tenant_sandbox.acme":       "pass",
		"module.m.sandboxio_template.inner[\"a\"]": "pass",
		"sandboxio_network_policy.deny":            "pass",
		"sandboxio_resource_caps.small":            "pass",
		"sandboxio_template.python":                "pass",
		"sandboxio_template.later[0]":              "deferred",
		"sandboxio_template.later[1]":              "deferred",
	}
	if len(got) != len(want) {
		t.Fatalf("resources: %v", rep.Resources)
	}
	for addr, st := range want {
		r, ok := got[addr]
		if !ok {
			t.Fatalf("%s missing from %v", addr, rep.Resources)
		}
		if status(r) != st {
			t.Errorf("%s: status %s, want %s (%+v)", addr, status(r), st, r)
		}
	}
	later := got["sandboxio_template.later[0]"]
	if !strings.Contains(strings.Join(later.Deferred, ","), "backend") || later.Checked() {
		t.Errorf("unknown backend not reported as checked at apply: %+v", later)
	}
	// The module's template used the provider default, resolved from var.be.
	if got["module.m.sandboxio_template.inner[\"a\"]"].Kind != policy.KindTemplate {
		t.Errorf("module template not checked: %+v", got["module.m.sandboxio_template.inner[\"a\"]"])
	}
	if !rep.Passed(true) || rep.Summary().Deferred != 2 {
		t.Errorf("summary: %+v", rep.Summary())
	}
}

func TestCheck_RealPlanWithUpdates(t *testing.T) {
	data, err := os.ReadFile("testdata/plan-update.json")
	if err != nil {
		t.Fatal(err)
	}
	got := byAddress(check(t, builtinEngine(t), data, nil))
	for addr, action := range map[string]string{
		"sandboxio_resource_caps.small": "update", "sandboxio_template.python": "update",
		"sandboxio_network_policy.deny": "no-op", "data.sandboxio_tenant_sandbox.acme": "read",
	} {
		if got[addr].Action != action || status(got[addr]) != "pass" {
			t.Errorf("%s: %+v", addr, got[addr])
		}
	}
}

func TestCheck_BuiltinRefusals(t *testing.T) {
	e := builtinEngine(t)
	data := planJSON(t, "docker://",
		templateChange("allowlist", map[string]any{"network": map[string]any{"egress": "deny", "allow": []any{"10.0.0.0/8"}}}),
		templateChange("credential", map[string]any{"backend": "e2b://user:hunter2@"}),
		templateChange("open", map[string]any{"network": map[string]any{"egress": "allow", "allow": []any{}}}),
		change{addr: "sandboxio_network_policy.p", mode: "managed", typ: "sandboxio_network_policy", name: "p", actions: []string{"create"},
			after: map[string]any{"egress": "learn", "allow": []any{}, "backend": "e2b://"}},
		change{addr: "sandboxio_resource_caps.c", mode: "managed", typ: "sandboxio_resource_caps", name: "c", actions: []string{"update"},
			after: map[string]any{"cpu": 1, "memory_mb": 0, "disk_mb": 1024, "pids": 256, "backend": nil}},
		change{addr: "sandboxio_template.gone", mode: "managed", typ: "sandboxio_template", name: "gone", actions: []string{"delete"}},
	)
	rep := check(t, e, data, nil)
	got := byAddress(rep)
	for addr, want := range map[string]string{
		"sandboxio_template.allowlist":  "SBX-NET-003",
		"sandboxio_template.credential": "SBX-DSN-003",
		"sandboxio_network_policy.p":    "SBX-NET-001",
		"sandboxio_resource_caps.c":     "SBX-RES-001",
	} {
		if f := ids(got[addr], verdict.Fail); len(f) == 0 || f[0] != want {
			t.Errorf("%s: failures %v, want %s", addr, f, want)
		}
	}
	if w := ids(got["sandboxio_template.open"], verdict.Warn); len(w) != 1 || w[0] != "SBX-NET-007" {
		t.Errorf("open egress: %v", w)
	}
	if g := got["sandboxio_template.gone"]; g.Checked() || !strings.Contains(g.Skipped, "deleted") {
		t.Errorf("a deleted resource was checked, or not reported as not checked: %+v", g)
	}
	// The DSN refusal never echoes the credential.
	for _, x := range got["sandboxio_template.credential"].Results {
		if strings.Contains(x.Message, "hunter2") {
			t.Errorf("credential repeated: %q", x.Message)
		}
	}
	if rep.Passed(false) {
		t.Fatal("a plan with refusals passed")
	}
}

// The provider's default_backend decides where network policies and caps
// are checked; when the plan cannot say it, the resource waits for apply.
func TestCheck_ProviderDefaultBackend(t *testing.T) {
	e := builtinEngine(t)
	np := change{addr: "sandboxio_network_policy.p", mode: "managed", typ: "sandboxio_network_policy", name: "p", actions: []string{"create"},
		after: map[string]any{"egress": "deny", "allow": []any{"10.0.0.0/8"}, "backend": nil}}
	if f := ids(byAddress(check(t, e, planJSON(t, "docker://", np), nil))["sandboxio_network_policy.p"], verdict.Fail); len(f) != 1 || f[0] != "SBX-NET-003" {
		t.Errorf("docker default: %v", f)
	}
	if f := ids(byAddress(check(t, e, planJSON(t, "e2b://", np), nil))["sandboxio_network_policy.p"], verdict.Fail); len(f) != 0 {
		t.Errorf("e2b default: %v", f)
	}
	// No default_backend: the provider's default, docker://, as the provider
	// itself decides at plan.
	if f := ids(byAddress(check(t, e, planJSON(t, "", np), nil))["sandboxio_network_policy.p"], verdict.Fail); len(f) != 1 || f[0] != "SBX-NET-003" {
		t.Errorf("no default_backend: %v", f)
	}
	// default_backend from a reference the check cannot follow.
	data := planJSON(t, "", np)
	var p map[string]any
	_ = json.Unmarshal(data, &p)
	p["configuration"].(map[string]any)["provider_config"].(map[string]any)["sandboxio"].(map[string]any)["expressions"] =
		map[string]any{"default_backend": map[string]any{"references": []any{"terraform_data.x.output", "terraform_data.x"}}}
	data, _ = json.Marshal(p)
	r := byAddress(check(t, e, data, nil))["sandboxio_network_policy.p"]
	if status(r) != "deferred" || !strings.Contains(strings.Join(r.Deferred, ""), "default_backend") {
		t.Errorf("unknown default_backend: %+v", r)
	}
}

func TestCheck_TenantSandbox(t *testing.T) {
	e := builtinEngine(t)
	spec := `{"spec_version":1,"name":"python","backend":"docker://","image":"img","runtime":"runc","isolation_tier":"CONTAINER",` +
		`"network":{"egress":"deny","allow":["10.0.0.0/8"]},"resources":{"cpu":1,"memory_mb":512,"disk_mb":1024,"pids":256},` +
		`"timeout_seconds":300,"lifetime_seconds":300,"env":{},"secret_names":[],"labels":{}}`
	ds := func(name, tenant string, after map[string]any, unknown map[string]any) change {
		a := map[string]any{"tenant_id": tenant, "session_id": "s-1", "extra_labels": nil, "template_spec": spec}
		for k, v := range after {
			a[k] = v
		}
		return change{addr: "data.sandboxio_tenant_sandbox." + name, mode: "data", typ: "sandboxio_tenant_sandbox", name: name,
			actions: []string{"read"}, after: a, unknown: unknown}
	}
	data := planJSON(t, "",
		ds("tampered", "acme", nil, nil),
		ds("badtenant", "acme corp", map[string]any{"template_spec": nil}, map[string]any{"template_spec": true, "spec": true}),
		ds("later", "acme", map[string]any{"template_spec": nil}, map[string]any{"template_spec": true}),
		ds("notspec", "acme", map[string]any{"template_spec": `{"spec_version":1,"surprise":true}`}, nil),
	)
	got := byAddress(check(t, e, data, nil))
	if f := ids(got["data.sandboxio_tenant_sandbox.tampered"], verdict.Fail); len(f) != 1 || f[0] != "SBX-NET-003" {
		t.Errorf("tampered spec: %v", f)
	}
	bad := got["data.sandboxio_tenant_sandbox.badtenant"]
	if f := ids(bad, verdict.Fail); len(f) != 1 || f[0] != "SBX-TEN-001" || len(bad.Deferred) != 1 {
		t.Errorf("tenant part with unknown spec: %+v", bad)
	}
	later := got["data.sandboxio_tenant_sandbox.later"]
	if status(later) != "pass" || !later.Checked() || later.Deferred[0] != "template_spec" || !strings.Contains(deferredText(later), "partly checked") {
		t.Errorf("partly checked tenant sandbox: %+v", later)
	}
	if f := ids(got["data.sandboxio_tenant_sandbox.notspec"], verdict.Fail); len(f) != 1 || f[0] != "SBX-SPC-001" {
		t.Errorf("not a spec: %v", f)
	}
}

// Malformed, truncated and non-plan JSON: an *InputError that says what is
// wrong, never a panic and never a passing report.
func TestCheck_MalformedInput(t *testing.T) {
	e := builtinEngine(t)
	valid := string(planJSON(t, "docker://", templateChange("x", nil)))
	typeErr := func(path string, v any) string {
		var p map[string]any
		_ = json.Unmarshal([]byte(valid), &p)
		set(p, strings.Split(path, "."), v)
		b, _ := json.Marshal(p)
		return string(b)
	}
	for name, tc := range map[string]struct{ src, want string }{
		"empty":          {"", "empty"},
		"whitespace":     {" \n\t", "empty"},
		"array":          {"[]", "must be an object"},
		"string":         {`"plan"`, "must be an object"},
		"truncated":      {valid[:len(valid)/2], "truncated"},
		"syntax":         {`{"format_version": "1.2",}`, "invalid JSON at line 1"},
		"trailing":       {valid + valid, "trailing data"},
		"state":          {`{"format_version":"1.0","terraform_version":"1.11.4","values":{"root_module":{}}}`, "state, not of a plan"},
		"no version":     {`{"planned_values":{}}`, "no format_version"},
		"version 2":      {`{"format_version":"2.0","planned_values":{}}`, "not supported"},
		"no plan parts":  {`{"format_version":"1.2"}`, "neither planned_values nor resource_changes"},
		"errored":        {`{"format_version":"1.2","errored":true,"planned_values":{}}`, "errored"},
		"version number": {`{"format_version":1.2}`, "format_version holds a JSON number"},
		"key case":       {`{"Format_Version":"1.2","planned_values":{}}`, "no format_version"},
		"duplicate key":  {`{"format_version":"1.2","resource_changes":[],"resource_changes":[]}`, `"resource_changes" appears twice`},
		"changes object": {typeErr("resource_changes", map[string]any{}), "resource_changes holds a JSON object"},
		"change missing": {`{"format_version":"1.2","resource_changes":[{"address":"a","type":"sandboxio_template"}]}`, "lacks an address, a type or a change"},
		"actions string": {typeErr("resource_changes.0.change.actions", "create"), "actions holds a JSON string"},
		"after string":   {typeErr("resource_changes.0.change.after", "x"), "change.after"},
		"memory string":  {typeErr("resource_changes.0.change.after.resources.memory_mb", "lots"), "memory_mb holds a string, not a number"},
		"env number":     {typeErr("resource_changes.0.change.after.env", map[string]any{"A": 1}), `env["A"] holds the number 1`},
		"allow object":   {typeErr("resource_changes.0.change.after.network.allow", map[string]any{}), "allow holds an object"},
		"unknown string": {typeErr("resource_changes.0.change.after_unknown", "yes"), "after_unknown"},
		"number garbage": {strings.ReplaceAll(valid, `"memory_mb":512`, `"memory_mb":1e999999999`), "memory_mb"},
	} {
		t.Run(name, func(t *testing.T) {
			rep, err := Check(t.Context(), e, "plan.json", []byte(tc.src), Options{Now: now})
			var ie *InputError
			if !errors.As(err, &ie) {
				t.Fatalf("want an InputError, got report %v, err %v", rep, err)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "plan.json: ") {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

func set(m any, path []string, v any) {
	for i, k := range path {
		last := i == len(path)-1
		switch x := m.(type) {
		case map[string]any:
			if last {
				x[k] = v
				return
			}
			m = x[k]
		case []any:
			var n int
			for _, c := range k {
				n = n*10 + int(c-'0')
			}
			if last {
				x[n] = v
				return
			}
			m = x[n]
		}
	}
}

func TestCheck_NoSandboxioResources(t *testing.T) {
	rep := check(t, builtinEngine(t), []byte(`{"format_version":"1.2","planned_values":{"root_module":{}},"resource_changes":[
		{"address":"terraform_data.x","mode":"managed","type":"terraform_data","name":"x","provider_name":"terraform.io/builtin/terraform","change":{"actions":["create"],"after":{}}}]}`), nil)
	if len(rep.Resources) != 0 || !rep.Passed(true) {
		t.Fatalf("report: %+v", rep)
	}
	var buf bytes.Buffer
	if err := Render(&buf, rep, RenderOptions{Format: "text"}); err != nil || !strings.Contains(buf.String(), "nothing was checked") {
		t.Fatalf("text: %v %s", err, buf.String())
	}
}

// teamDir writes a team bundle: a soft-mandatory rule on every template
// whose name starts with "legacy", for waiver tests.
func teamEngine(t *testing.T, files map[string]string) *policy.Engine {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e, err := policy.Load(t.Context(), []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

const softRule = `package team.soft

import data.sandboxio.lib

# METADATA
# title: legacy template
# description: legacy templates are being retired
# custom:
#   id: TEAM-LEG-001
#   class: ConfigurationError
#   attribute: name
#   severity: medium
#   enforcement: soft-mandatory
#   fix: retire the template
deny contains f if {
	startswith(input.template.name, "legacy")
	f := lib.finding(rego.metadata.rule(), "legacy template")
}
`

// A team bundle cannot make a Docker allow list pass: its own deny, warn
// or allow rules add findings, never remove built-in ones.
func TestCheck_TeamPolicyCannotAllowDockerAllowList(t *testing.T) {
	e := teamEngine(t, map[string]string{"override.rego": `package team.override

# Attempts to cancel the built-in decision: none of these is read as a decision.
allow := true

# deny and warn may only be partial sets (a complete or default rule is
# refused at load, see the hostile cases); empty ones change nothing.
deny contains "never" if { false }

warn contains "never" if { false }

violation := set()
`})
	data := planJSON(t, "docker://", templateChange("x", map[string]any{"network": map[string]any{"egress": "deny", "allow": []any{"151.101.0.0/16"}}}))
	r := byAddress(check(t, e, data, nil))["sandboxio_template.x"]
	if f := ids(r, verdict.Fail); len(f) != 1 || f[0] != "SBX-NET-003" {
		t.Fatalf("docker allow list with a team override: %+v", r)
	}
}

func TestCheck_WaiversInReport(t *testing.T) {
	e := teamEngine(t, map[string]string{"soft.rego": softRule})
	w, err := verdict.ParseWaivers("waivers.yaml", []byte(`waivers:
  - rule: TEAM-LEG-001
    address: sandboxio_template.legacy_a
    reason: retiring in Q3
    expires: 2026-12-31
  - rule: TEAM-LEG-001
    address: sandboxio_template.legacy_b
    reason: was retiring in Q1
    expires: 2026-03-31
  - rule: SBX-NET-003
    address: "*"
    reason: please
    expires: 2026-12-31
`))
	if err != nil {
		t.Fatal(err)
	}
	data := planJSON(t, "docker://", templateChange("legacy_a", nil), templateChange("legacy_b", nil),
		templateChange("legacy_c", map[string]any{"network": map[string]any{"egress": "deny", "allow": []any{"10.0.0.0/8"}}}))
	rep := check(t, e, data, w)
	got := byAddress(rep)
	if o := ids(got["sandboxio_template.legacy_a"], verdict.Waived); len(o) != 1 {
		t.Errorf("legacy_a not waived: %+v", got["sandboxio_template.legacy_a"])
	}
	if o := ids(got["sandboxio_template.legacy_b"], verdict.Fail); len(o) != 1 || !strings.Contains(got["sandboxio_template.legacy_b"].Results[0].Note, "expired") {
		t.Errorf("legacy_b: expired waiver applied or not reported: %+v", got["sandboxio_template.legacy_b"])
	}
	if o := ids(got["sandboxio_template.legacy_c"], verdict.Fail); len(o) != 2 {
		t.Errorf("legacy_c: %v", o)
	}
	statuses := map[string]string{}
	for _, wr := range rep.Waivers {
		statuses[wr.Waiver.Address+"/"+wr.Waiver.Rule] = wr.Status
	}
	if statuses["sandboxio_template.legacy_a/TEAM-LEG-001"] != "active" || statuses["sandboxio_template.legacy_b/TEAM-LEG-001"] != "expired" ||
		statuses["*/SBX-NET-003"] != "refused" {
		t.Errorf("waiver statuses: %v", statuses)
	}

	// Every format reports the waived finding as waived, with its reason.
	for _, format := range Formats {
		var buf bytes.Buffer
		if err := Render(&buf, rep, RenderOptions{Format: format, Version: "test"}); err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		out := buf.String()
		if !strings.Contains(out, "retiring in Q3") || !strings.Contains(strings.ToLower(out), "waived") {
			t.Errorf("%s output does not report the waived finding with its reason:\n%s", format, out)
		}
		if !strings.Contains(out, "expired") {
			t.Errorf("%s output does not report the expired waiver", format)
		}
	}
}

func renderString(t *testing.T, rep *Report, format string) string {
	t.Helper()
	var buf bytes.Buffer
	if err := Render(&buf, rep, RenderOptions{Format: format, Version: "test"}); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func TestRender_SARIF(t *testing.T) {
	e := teamEngine(t, map[string]string{"soft.rego": softRule})
	w, _ := verdict.ParseWaivers("w.yaml", []byte("waivers:\n  - {rule: TEAM-LEG-001, address: sandboxio_template.legacy, reason: going, expires: 2030-01-01}\n"))
	data := planJSON(t, "docker://",
		templateChange("legacy", nil),
		templateChange("bad", map[string]any{"network": map[string]any{"egress": "deny", "allow": []any{"10.0.0.0/8"}}}),
		templateChange("open", map[string]any{"network": map[string]any{"egress": "allow", "allow": []any{}}}),
		func() change {
			c := templateChange("later", map[string]any{"backend": nil})
			c.unknown = map[string]any{"backend": true}
			return c
		}(),
	)
	var log struct {
		Version string `json:"version"`
		Runs    []struct {
			Tool struct {
				Driver struct {
					Name  string `json:"name"`
					Rules []struct {
						ID   string `json:"id"`
						Help struct {
							Text string `json:"text"`
						} `json:"help"`
						ShortDescription struct {
							Text string `json:"text"`
						} `json:"shortDescription"`
						DefaultConfiguration struct {
							Level string `json:"level"`
						} `json:"defaultConfiguration"`
					} `json:"rules"`
				} `json:"driver"`
			} `json:"tool"`
			Results []struct {
				RuleID    string `json:"ruleId"`
				RuleIndex int    `json:"ruleIndex"`
				Level     string `json:"level"`
				Locations []struct {
					LogicalLocations []struct {
						FullyQualifiedName string `json:"fullyQualifiedName"`
						Kind               string `json:"kind"`
					} `json:"logicalLocations"`
				} `json:"locations"`
				Suppressions []struct {
					Kind, Status, Justification string
				} `json:"suppressions"`
			} `json:"results"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(renderString(t, check(t, e, data, w), "sarif")), &log); err != nil {
		t.Fatal(err)
	}
	if log.Version != "2.1.0" || len(log.Runs) != 1 || log.Runs[0].Tool.Driver.Name != "sandboxio" {
		t.Fatalf("log: %+v", log)
	}
	run := log.Runs[0]
	seen := map[string]bool{}
	for _, r := range run.Tool.Driver.Rules {
		if seen[r.ID] {
			t.Errorf("rule %s described twice", r.ID)
		}
		seen[r.ID] = true
		if r.Help.Text == "" || r.ShortDescription.Text == "" {
			t.Errorf("rule %s without help text", r.ID)
		}
	}
	for _, id := range []string{"SBX-NET-003", "SBX-NET-007", "TEAM-LEG-001", rules.CheckedAtApply} {
		if !seen[id] {
			t.Errorf("no descriptor for %s", id)
		}
	}
	levels := map[string]string{}
	for _, r := range run.Results {
		if run.Tool.Driver.Rules[r.RuleIndex].ID != r.RuleID {
			t.Errorf("result %s points at rule %d", r.RuleID, r.RuleIndex)
		}
		addr := r.Locations[0].LogicalLocations[0].FullyQualifiedName
		levels[addr+" "+r.RuleID] = r.Level
		if r.RuleID == "TEAM-LEG-001" {
			if len(r.Suppressions) != 1 || r.Suppressions[0].Status != "accepted" || !strings.Contains(r.Suppressions[0].Justification, "going") {
				t.Errorf("waived result without an accepted suppression: %+v", r)
			}
		}
	}
	for k, want := range map[string]string{
		"sandboxio_template.bad SBX-NET-003":               "error",
		"sandboxio_template.open SBX-NET-007":              "warning",
		"sandboxio_template.later " + rules.CheckedAtApply: "note",
		"sandboxio_template.legacy TEAM-LEG-001":           "error",
	} {
		if levels[k] != want {
			t.Errorf("%s: level %q, want %q (all %v)", k, levels[k], want, levels)
		}
	}
}

func TestRender_JUnit(t *testing.T) {
	e := builtinEngine(t)
	later := templateChange("later", map[string]any{"backend": nil})
	later.unknown = map[string]any{"backend": true}
	data := planJSON(t, "docker://",
		templateChange("bad", map[string]any{"network": map[string]any{"egress": "deny", "allow": []any{"10.0.0.0/8"}}}),
		later, templateChange("dsn", map[string]any{"backend": "lxc://"}))
	rep := check(t, e, data, nil)
	var suites struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Suites   []struct {
			Name  string `xml:"name,attr"`
			Cases []struct {
				Name    string    `xml:"name,attr"`
				Failure *struct{} `xml:"failure"`
				Skipped *struct{} `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal([]byte(renderString(t, rep, "junit")), &suites); err != nil {
		t.Fatal(err)
	}
	// The pre-execution rules decide calls, not plan resources: a plan
	// report has no case for them.
	bundleRules := 0
	for _, r := range e.Rules() {
		if r.Decision == "" {
			bundleRules++
		}
	}
	if len(suites.Suites) != 3 {
		t.Fatalf("suites: %d", len(suites.Suites))
	}
	for _, s := range suites.Suites {
		failed, skipped := 0, 0
		for _, c := range s.Cases {
			if c.Failure != nil {
				failed++
			}
			if c.Skipped != nil {
				skipped++
			}
		}
		switch s.Name {
		case "sandboxio_template.bad":
			if len(s.Cases) != bundleRules || failed != 1 || skipped != 0 {
				t.Errorf("%s: %d cases, %d failed, %d skipped", s.Name, len(s.Cases), failed, skipped)
			}
		case "sandboxio_template.later":
			if len(s.Cases) != bundleRules+1 || skipped != bundleRules+1 || failed != 0 {
				t.Errorf("%s: %d cases, %d skipped", s.Name, len(s.Cases), skipped)
			}
		case "sandboxio_template.dsn":
			if failed != 1 || skipped != bundleRules {
				t.Errorf("%s: %d failed, %d skipped", s.Name, failed, skipped)
			}
		}
	}
	if suites.Failures != 2 {
		t.Errorf("failures: %d", suites.Failures)
	}
}

// With --fail-on-warn a warning fails the run, and the JUnit report says so
// (CI systems read the report, not only the exit code); without it the
// warning is output on a passing case.
func TestRender_JUnitFailOnWarn(t *testing.T) {
	e := builtinEngine(t)
	rep := check(t, e, planJSON(t, "docker://", templateChange("open", map[string]any{"network": map[string]any{"egress": "allow", "allow": []any{}}})), nil)
	for _, failOnWarn := range []bool{false, true} {
		var buf bytes.Buffer
		if err := Render(&buf, rep, RenderOptions{Format: "junit", FailOnWarn: failOnWarn}); err != nil {
			t.Fatal(err)
		}
		var suites struct {
			Failures int `xml:"failures,attr"`
			Suites   []struct {
				Cases []struct {
					Name    string `xml:"name,attr"`
					Failure *struct {
						Type string `xml:"type,attr"`
					} `xml:"failure"`
					SystemOut string `xml:"system-out"`
				} `xml:"testcase"`
			} `xml:"testsuite"`
		}
		if err := xml.Unmarshal(buf.Bytes(), &suites); err != nil {
			t.Fatal(err)
		}
		var warned []string
		for _, c := range suites.Suites[0].Cases {
			if c.Failure != nil {
				warned = append(warned, c.Name+" failure "+c.Failure.Type)
			} else if strings.Contains(c.SystemOut, "SBX-NET-007") {
				warned = append(warned, c.Name+" output")
			}
		}
		want, failures := "output", 0
		if failOnWarn {
			want, failures = "failure OpenEgressWarning", 1
		}
		if len(warned) != 1 || !strings.HasSuffix(warned[0], want) || suites.Failures != failures {
			t.Errorf("fail-on-warn %t: %v, %d failures; want one %q and %d", failOnWarn, warned, suites.Failures, want, failures)
		}
	}
}

func TestRender_JSONAndText(t *testing.T) {
	e := builtinEngine(t)
	data := planJSON(t, "docker://", templateChange("open", map[string]any{"network": map[string]any{"egress": "allow", "allow": []any{}}}))
	rep := check(t, e, data, nil)
	var out struct {
		ReportVersion int  `json:"report_version"`
		Passed        bool `json:"passed"`
		Resources     []struct {
			Address  string `json:"address"`
			Status   string `json:"status"`
			Findings []struct {
				Rule, Outcome, Enforcement string
			} `json:"findings"`
		} `json:"resources"`
	}
	if err := json.Unmarshal([]byte(renderString(t, rep, "json")), &out); err != nil {
		t.Fatal(err)
	}
	if out.ReportVersion != 1 || !out.Passed || out.Resources[0].Status != "warn" || out.Resources[0].Findings[0].Outcome != "warn" {
		t.Fatalf("json: %+v", out)
	}
	var buf bytes.Buffer
	if err := Render(&buf, rep, RenderOptions{Format: "text", FailOnWarn: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "result: FAIL (warnings, with --fail-on-warn)") || !strings.Contains(buf.String(), "SBX-NET-007") {
		t.Fatalf("text:\n%s", buf.String())
	}
	if err := Render(&buf, rep, RenderOptions{Format: "yaml"}); err == nil {
		t.Fatal("unknown format accepted")
	}
}

func TestStripInstanceKeysAndLastName(t *testing.T) {
	for in, want := range map[string]string{
		`module.a["x.y]"].module.b[0]`: "module.a.module.b",
		"module.a":                     "module.a",
		`module.a["q\"]"]`:             "module.a",
	} {
		if got := stripInstanceKeys(in); got != want {
			t.Errorf("stripInstanceKeys(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		`module.a["x.y"].sandboxio_template.t["k.1"]`: `t["k.1"]`,
		"sandboxio_template.t":                        "t",
		"x":                                           "x",
	} {
		if got := lastName(in); got != want {
			t.Errorf("lastName(%q) = %q, want %q", in, got, want)
		}
	}
}
