package policycheck

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"os"
	"testing"
)

// FuzzCheck feeds arbitrary bytes to the plan reader: it must return a
// report or an *InputError, never panic, and never let a malformed plan
// through with a half-built report.
func FuzzCheck(f *testing.F) {
	for _, file := range []string{"testdata/plan-create.json", "testdata/plan-update.json", "testdata/plan-read.json"} {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		f.Add(data[:len(data)/3])
	}
	f.Add(planJSON(f, "docker://", templateChange("x", map[string]any{"network": map[string]any{"egress": "deny", "allow": []any{"10.0.0.0/8"}}})))
	f.Add([]byte(`{"format_version":"1.2","resource_changes":[{"address":"data.sandboxio_tenant_sandbox.t","mode":"data","type":"sandboxio_tenant_sandbox","name":"t","change":{"actions":["read"],"after":{"tenant_id":"a","session_id":"b","template_spec":"{}"},"after_unknown":{"extra_labels":[true]}}}]}`))
	// Duplicate keys below the top level, a data source read at plan
	// (prior_state), resources the check skips (deleted, deferred by
	// Terraform, unknown or case-variant types, another provider address),
	// an empty egress and a cpu a float64 cannot hold as written.
	f.Add([]byte(`{"format_version":"1.2","resource_changes":[{"address":"a","type":"sandboxio_template","change":{"actions":["create"],"actions":["delete"]}}]}`))
	f.Add([]byte(`{"format_version":"1.2","planned_values":{"root_module":{}},"prior_state":{"values":{"root_module":{"resources":[{"address":"data.sandboxio_tenant_sandbox.t","mode":"data","type":"sandboxio_tenant_sandbox","name":"t","provider_name":"registry.terraform.io/sandboxio/sandboxio","values":{"tenant_id":"a","session_id":"b","template_spec":"{}"}},{"address":"data.sandboxio_backend.b","mode":"data","type":"sandboxio_backend","name":"b","values":{}},{"address":"sandboxio_template.t","mode":"managed","type":"sandboxio_template","name":"t","values":{}}]}}}}`))
	f.Add([]byte(`{"format_version":"1.2","resource_changes":[{"address":"sandboxio_template.g","mode":"managed","type":"sandboxio_template","name":"g","provider_name":"mirror.example/x/sandboxio","change":{"actions":["delete"]}},{"address":"Sandboxio_template.c","mode":"managed","type":"Sandboxio_template","name":"c","change":{"actions":["create"],"after":{}}},{"address":"sandboxio_pool.p","mode":"managed","type":"sandboxio_pool","name":"p","change":{"actions":["no-op"],"after":{}}}],"deferred_changes":[{"reason":"provider_config_unknown","resource_change":{"address":"sandboxio_template.l","mode":"managed","type":"sandboxio_template","name":"l","change":{"actions":["create"]}}}]}`))
	f.Add([]byte(`{"format_version":"1.2","resource_changes":[{"address":"sandboxio_network_policy.p","mode":"managed","type":"sandboxio_network_policy","name":"p","change":{"actions":["create"],"after":{"egress":"","backend":"docker://"}}},{"address":"sandboxio_resource_caps.c","mode":"managed","type":"sandboxio_resource_caps","name":"c","change":{"actions":["create"],"after":{"cpu":0.00999999999999999999999,"backend":"docker://"}}}]}`))
	f.Add([]byte(`{"format_version":"1.0","values":{}}`))
	f.Add([]byte(`[`))
	f.Add([]byte(``))
	e := builtinEngine(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		rep, err := Check(t.Context(), e, "fuzz.json", data, Options{Now: now})
		if err != nil {
			var ie *InputError
			if !errors.As(err, &ie) {
				t.Fatalf("error of type %T, not an InputError: %v", err, err)
			}
			if rep != nil {
				t.Fatal("a report came with an error")
			}
			return
		}
		if !bytes.Contains(data, []byte("format_version")) {
			t.Fatal("a document without format_version was read as a plan")
		}
		for _, r := range rep.Resources {
			if r.Address == "" || (!r.Checked() && len(r.Deferred) == 0 && r.Skipped == "") {
				t.Fatalf("resource neither checked, deferred nor reported as not checked: %+v", r)
			}
			if r.Skipped != "" && (r.Checked() || len(r.Results) > 0) {
				t.Fatalf("a resource reported as not checked has results: %+v", r)
			}
		}
		if checkKeys(data) != nil {
			t.Fatal("a plan with a duplicate key was read")
		}
		for _, format := range Formats {
			var buf bytes.Buffer
			if err := Render(&buf, rep, RenderOptions{Format: format, FailOnDeferred: true}); err != nil {
				t.Fatalf("render %s: %v", format, err)
			}
			switch format {
			case "json", "sarif":
				if !json.Valid(buf.Bytes()) {
					t.Fatalf("%s output is not valid JSON", format)
				}
			case "junit":
				if err := xml.Unmarshal(buf.Bytes(), new(struct{})); err != nil {
					t.Fatalf("junit output is not valid XML: %v", err)
				}
			}
		}
	})
}
