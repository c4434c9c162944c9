package main

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// mutatePlan decodes a plan fixture, lets edit change it and writes it.
func mutatePlan(t *testing.T, dir, name, fixture string, edit func(p map[string]any)) string {
	t.Helper()
	data, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatal(err)
	}
	edit(p)
	out, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, dir, name, string(out))
}

const readFixture = "../../internal/policycheck/testdata/plan-read.json"

func priorResources(p map[string]any) []any {
	return p["prior_state"].(map[string]any)["values"].(map[string]any)["root_module"].(map[string]any)["resources"].([]any)
}

// Data sources Terraform reads while planning are only in prior_state: the
// check decides on them too. The real plan passes; the same plan with the
// tenant spec's allow list on Docker is refused.
func TestPolicyCheck_PriorStateDataSources(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := cli(t, "", "policy", "check", "--format", "json", readFixture)
	if code != exitOK || !strings.Contains(out, `"address": "data.sandboxio_tenant_sandbox.acme"`) {
		t.Fatalf("real plan: code %d, the data source read at plan is not in the report\n%s\n%s", code, out, errOut)
	}
	refused := mutatePlan(t, dir, "refused.json", readFixture, func(p map[string]any) {
		for _, r := range priorResources(p) {
			r := r.(map[string]any)
			if r["type"] == "sandboxio_tenant_sandbox" {
				v := r["values"].(map[string]any)
				v["template_spec"] = strings.Replace(v["template_spec"].(string), `"allow":[]`, `"allow":["10.0.0.0/8"]`, 1)
			}
		}
	})
	code, out, errOut = cli(t, "", "policy", "check", refused)
	if code != exitDenied || !strings.Contains(out, "data.sandboxio_tenant_sandbox.acme") || !strings.Contains(out, "SBX-NET-003") {
		t.Fatalf("refused spec in prior_state: code %d (want %d)\n%s\n%s", code, exitDenied, out, errOut)
	}
}

// Every sandboxio resource the check does not decide on is reported, in
// every format, whatever its mode, provider address or action; a
// sandboxio resource type bound to another provider address (a mirror, a
// fork) is decided on, not skipped.
func TestPolicyCheck_ReportsWhatItSkips(t *testing.T) {
	dir := t.TempDir()
	rc := func(addr, mode, typ, provider string, actions []any, after map[string]any) map[string]any {
		return map[string]any{"address": addr, "mode": mode, "type": typ, "name": "x", "provider_name": provider,
			"change": map[string]any{"actions": actions, "before": nil, "after": after, "after_unknown": map[string]any{}}}
	}
	const ours = "registry.terraform.io/sandboxio/sandboxio"
	skipped := mutatePlan(t, dir, "skipped.json", readFixture, func(p map[string]any) {
		p["resource_changes"] = append(p["resource_changes"].([]any),
			rc("sandboxio_template.gone", "managed", "sandboxio_template", ours, []any{"delete"}, nil),
			rc("sandboxio_template.mirror_gone", "managed", "sandboxio_template", "mirror.example.com/sandboxio/sandboxio", []any{"delete"}, nil),
			rc("sandboxio_sandbox_pool.x", "managed", "sandboxio_sandbox_pool", ours, []any{"create"}, map[string]any{}),
			rc("data.sandboxio_future.x", "data", "sandboxio_future", ours, []any{"no-op"}, map[string]any{}),
			rc("Sandboxio_template.x", "managed", "Sandboxio_template", ours, []any{"create"}, map[string]any{}),
			rc("sandboxio_tenant_sandbox.x", "managed", "sandboxio_tenant_sandbox", ours, []any{"create"}, map[string]any{}),
		)
		p["deferred_changes"] = []any{map[string]any{"reason": "provider_config_unknown",
			"resource_change": rc("sandboxio_template.later", "managed", "sandboxio_template", ours, []any{"create"}, map[string]any{})}}
	})
	want := []string{"sandboxio_template.gone", "sandboxio_template.mirror_gone", "sandboxio_sandbox_pool.x", "data.sandboxio_future.x",
		"Sandboxio_template.x", "sandboxio_tenant_sandbox.x", "sandboxio_template.later", "data.sandboxio_backend.d"}
	for _, format := range []string{"text", "json", "sarif", "junit"} {
		code, out, errOut := cli(t, "", "policy", "check", "--format", format, skipped)
		if code != exitOK {
			t.Fatalf("%s: code %d\n%s\n%s", format, code, out, errOut)
		}
		switch format {
		case "json", "sarif":
			var v any
			if err := json.Unmarshal([]byte(out), &v); err != nil {
				t.Fatalf("%s: invalid JSON: %v", format, err)
			}
		case "junit":
			if err := xml.Unmarshal([]byte(out), new(struct{})); err != nil {
				t.Fatalf("junit: invalid XML: %v", err)
			}
		}
		for _, addr := range want {
			if !strings.Contains(out, addr) {
				t.Errorf("%s: %s is not reported", format, addr)
			}
		}
		if !strings.Contains(out, "SBX-CHK-002") && format != "text" && format != "json" {
			t.Errorf("%s: no SBX-CHK-002 result", format)
		}
		if format == "text" && (!strings.Contains(out, "not checked: it is being deleted") || !strings.Contains(out, "case-sensitive")) {
			t.Errorf("text: reasons missing\n%s", out)
		}
		if format == "json" && !strings.Contains(out, `"not_checked": 8`) {
			t.Errorf("json: summary does not count 8 resources not checked\n%s", out)
		}
	}
	// A sandboxio type under another provider address is checked.
	fork := writeFile(t, dir, "fork.json", strings.Replace(
		plan("forked", map[string]any{"network": map[string]any{"egress": "deny", "allow": []any{"10.0.0.0/8"}}}),
		"registry.terraform.io/sandboxio/sandboxio", "registry.terraform.io/acme/sandboxio-fork", 1))
	if code, out, errOut := cli(t, "", "policy", "check", fork); code != exitDenied || !strings.Contains(out, "SBX-NET-003") {
		t.Fatalf("fork provider: code %d (want %d)\n%s\n%s", code, exitDenied, out, errOut)
	}
}

// --fail-on-deferred fails (exit 3) on anything checked at apply; a
// refusal still exits 1.
func TestPolicyCheck_FailOnDeferred(t *testing.T) {
	dir := t.TempDir()
	deferredPlan := strings.Replace(plan("later", nil), `"after_unknown":{}`, `"after_unknown":{"network":true}`, 1) // the image alone is decided with a placeholder
	deferred := writeFile(t, dir, "deferred.json", deferredPlan)
	for _, tc := range []struct {
		name string
		args []string
		code int
		out  string
	}{
		{"without the flag", []string{deferred}, exitOK, "checked at apply"},
		{"text", []string{"--fail-on-deferred", deferred}, exitDeferred, "result: FAIL (checked at apply, with --fail-on-deferred)"},
		{"json", []string{"--fail-on-deferred", "--format", "json", deferred}, exitDeferred, `"passed": false`},
		{"sarif", []string{"--fail-on-deferred", "--format", "sarif", deferred}, exitDeferred, `"level": "error"`},
		{"junit", []string{"--fail-on-deferred", "--format", "junit", deferred}, exitDeferred, `failures="1"`},
		{"clean plan", []string{"--fail-on-deferred", readFixture}, exitOK, "result: PASS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := cli(t, "", append([]string{"policy", "check"}, tc.args...)...)
			if code != tc.code || !strings.Contains(out, tc.out) {
				t.Fatalf("code %d (want %d), want %q\n%s\n%s", code, tc.code, tc.out, out, errOut)
			}
		})
	}
}

// A key twice in any object of the plan is an input error naming its path.
func TestPolicyCheck_DuplicateKeysAtEveryDepth(t *testing.T) {
	dir := t.TempDir()
	base := plan("dup", nil)
	for name, tc := range map[string]struct{ from, to, path string }{
		"in a resource's values": {`"egress":"deny"`, `"egress":"allow","egress":"deny"`, `resource_changes[0].change.after.network.egress`},
		"in a change":            {`"actions":["create"]`, `"actions":["create"],"actions":["delete"]`, `resource_changes[0].change.actions`},
		"top level":              {`"format_version":"1.2"`, `"format_version":"1.2","format_version":"1.2"`, `"format_version" appears twice at the top level`},
	} {
		t.Run(name, func(t *testing.T) {
			if !strings.Contains(base, tc.from) {
				t.Fatalf("fixture lacks %s", tc.from)
			}
			p := writeFile(t, dir, "dup.json", strings.Replace(base, tc.from, tc.to, 1))
			code, out, errOut := cli(t, "", "policy", "check", p)
			if code != exitUsage || !strings.Contains(errOut, tc.path) || !strings.Contains(errOut, "twice") {
				t.Fatalf("code %d (want %d), want the path %s\n%s\n%s", code, exitUsage, tc.path, out, errOut)
			}
		})
	}
}

// Inputs are bounded and must be regular files: the limit is checked
// before reading, devices and FIFOs are refused without being opened.
func TestPolicyCheck_InputsBoundedAndRegular(t *testing.T) {
	dir := t.TempDir()
	clean := writeFile(t, dir, "clean.json", plan("clean", nil))
	huge := filepath.Join(dir, "huge.json")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(65 << 20); err != nil { // sparse: nothing is written
		t.Fatal(err)
	}
	f.Close()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	policyDir := filepath.Join(dir, "team")
	if err := os.MkdirAll(policyDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(policyDir, "zero.rego")); err != nil {
		t.Fatal(err)
	}
	big := writeFile(t, dir, "big.json", plan("big", map[string]any{"env": map[string]any{"PAD": strings.Repeat("x", 2<<20)}}))
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		code  int
		err   string
	}{
		{"plan over the default limit", "", []string{huge}, exitUsage, "over the limit of 64 MiB"},
		{"plan over a lower limit", "", []string{"--max-input-mib", "1", big}, exitUsage, "--max-input-mib"},
		{"limit raised", "", []string{"--max-input-mib", "3", big}, exitOK, ""},
		{"stdin over the limit", plan("big", map[string]any{"env": map[string]any{"PAD": strings.Repeat("x", 2<<20)}}),
			[]string{"--max-input-mib", "1", "-"}, exitUsage, "more than 1 MiB"},
		{"plan is a FIFO", "", []string{fifo}, exitUsage, "not a regular file (a named pipe)"},
		{"plan is a device", "", []string{"/dev/zero"}, exitUsage, "not a regular file (a character device)"},
		{"policy is a FIFO", "", []string{"--policy", fifo, clean}, exitUsage, "not a regular file"},
		{"policy is a device", "", []string{"--policy", "/dev/zero", clean}, exitUsage, "not a regular file"},
		{"policy dir holds a device", "", []string{"--policy", policyDir, clean}, exitUsage, "zero.rego: not a regular file"},
		{"waivers is a FIFO", "", []string{"--waivers", fifo, clean}, exitUsage, "not a regular file"},
		{"bad limit", "", []string{"--max-input-mib", "0", clean}, exitUsage, "--max-input-mib 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := cli(t, tc.stdin, append([]string{"policy", "check"}, tc.args...)...)
			if code != tc.code || !strings.Contains(errOut, tc.err) {
				t.Fatalf("code %d (want %d), want %q on stderr\n%s\n%s", code, tc.code, tc.err, out, errOut)
			}
		})
	}
}

// An empty egress and a cpu a float64 cannot hold as written are refused
// by their rules, as the provider refuses them at plan.
func TestPolicyCheck_EmptyEgressAndInexactCPU(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct {
		after map[string]any
		rule  string
	}{
		"empty egress":       {map[string]any{"network": map[string]any{"egress": "", "allow": []any{}}}, "SBX-NET-002"},
		"cpu rounds to 0.01": {map[string]any{"resources": map[string]any{"cpu": json.Number("0.00999999999999999999999"), "memory_mb": 512, "disk_mb": 1024, "pids": 256}}, "SBX-RES-001"},
	} {
		t.Run(name, func(t *testing.T) {
			p := writeFile(t, dir, "p.json", plan("t", tc.after))
			code, out, errOut := cli(t, "", "policy", "check", p)
			if code != exitDenied || !strings.Contains(out, tc.rule) {
				t.Fatalf("code %d (want %d), want %s\n%s\n%s", code, exitDenied, tc.rule, out, errOut)
			}
		})
	}
}

// A template Terraform deferred to a later plan is decided by no check of
// this plan: --fail-on-deferred fails on it as on an apply-time check
// (exit 3), where it once passed.
func TestPolicyCheck_FailOnDeferredCountsTerraformDeferred(t *testing.T) {
	var p map[string]any
	if err := json.Unmarshal([]byte(plan("now", nil)), &p); err != nil {
		t.Fatal(err)
	}
	p["deferred_changes"] = []any{map[string]any{"reason": "provider_config_unknown",
		"resource_change": map[string]any{"address": "sandboxio_template.later", "mode": "managed", "type": "sandboxio_template", "name": "later",
			"provider_name": "registry.terraform.io/sandboxio/sandboxio", "change": map[string]any{"actions": []any{"create"}, "after": map[string]any{}}}}}
	b, _ := json.Marshal(p)
	file := writeFile(t, t.TempDir(), "plan.json", string(b))
	if code, out, errOut := cli(t, "", "policy", "check", file); code != exitOK || !strings.Contains(out, "sandboxio_template.later") {
		t.Fatalf("without the flag: code %d\n%s\n%s", code, out, errOut)
	}
	if code, out, errOut := cli(t, "", "policy", "check", "--fail-on-deferred", file); code != exitDeferred {
		t.Fatalf("with --fail-on-deferred: code %d, want %d\n%s\n%s", code, exitDeferred, out, errOut)
	}
}

// A create whose after is missing or null says nothing of the resource; it
// is an input error, never a default configuration that passes.
func TestPolicyCheck_CreateWithoutValuesIsAnInputError(t *testing.T) {
	for _, after := range []string{`"after":null`, ``} {
		src := plan("x", nil)
		i := strings.Index(src, `"after":{`)
		j := strings.Index(src, `,"after_unknown"`)
		if i < 0 || j < i {
			t.Fatalf("plan shape: %s", src)
		}
		repl := after
		if repl == "" {
			src = src[:i-1] + src[j:] // drop ,"after":{...}
		} else {
			src = src[:i] + repl + src[j:]
		}
		file := writeFile(t, t.TempDir(), "plan.json", src)
		code, out, errOut := cli(t, "", "policy", "check", file)
		if code != exitUsage || !strings.Contains(errOut, "change.after is missing") {
			t.Fatalf("after %q: code %d\n%s\n%s\n%s", after, code, out, errOut, src)
		}
	}
}
