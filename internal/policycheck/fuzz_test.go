package policycheck

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"
)

// FuzzCheck feeds arbitrary bytes to the plan reader: it must return a
// report or an *InputError, never panic, and never let a malformed plan
// through with a half-built report.
func FuzzCheck(f *testing.F) {
	for _, file := range []string{"testdata/plan-create.json", "testdata/plan-update.json"} {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		f.Add(data[:len(data)/3])
	}
	f.Add(planJSON(f, "docker://", templateChange("x", map[string]any{"network": map[string]any{"egress": "deny", "allow": []any{"10.0.0.0/8"}}})))
	f.Add([]byte(`{"format_version":"1.2","resource_changes":[{"address":"data.sandboxio_tenant_sandbox.t","mode":"data","type":"sandboxio_tenant_sandbox","name":"t","change":{"actions":["read"],"after":{"tenant_id":"a","session_id":"b","template_spec":"{}"},"after_unknown":{"extra_labels":[true]}}}]}`))
	f.Add([]byte(`{"format_version":"1.0","values":{}}`))
	f.Add([]byte(`[`))
	f.Add([]byte(``))
	e := builtinEngine(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		rep, err := Check(context.Background(), e, "fuzz.json", data, Options{Now: now})
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
			if r.Address == "" || (!r.Checked() && len(r.Deferred) == 0) {
				t.Fatalf("resource neither checked nor deferred: %+v", r)
			}
		}
		for _, format := range Formats {
			if err := Render(&bytes.Buffer{}, rep, RenderOptions{Format: format}); err != nil {
				t.Fatalf("render %s: %v", format, err)
			}
		}
	})
}
