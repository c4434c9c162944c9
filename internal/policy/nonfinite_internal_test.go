package policy

import (
	"math"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// The unguarded evaluation does panic on a non-finite number: this is what
// Validate and the recover in Evaluate stand in front of. If OPA ever stops
// panicking here, the guard stays harmless.
func TestEvaluateUnguarded_NonFiniteCPUPanicsInOPA(t *testing.T) {
	e, err := Shared(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	n := model.NetworkPolicy{}.Normalized()
	c := model.DefaultCaps()
	c.CPU = math.Inf(1)
	in := Input{Kind: KindResourceCaps, Network: &n, Resources: &c,
		Backend: &BackendRef{DSN: "docker://", Scheme: "docker", Runtime: "runc", Key: "docker/runc"}}
	panicked := func() (p bool) {
		defer func() { p = recover() != nil }()
		_, _ = e.evaluate(t.Context(), in)
		return false
	}()
	if !panicked {
		t.Skip("OPA no longer panics on a non-finite number; Validate still refuses it")
	}
	if _, err := e.Evaluate(t.Context(), in); err == nil {
		t.Fatal("Evaluate accepted a non-finite CPU cap")
	}
}
