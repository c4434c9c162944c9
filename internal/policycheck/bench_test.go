package policycheck

import (
	"fmt"
	"testing"
)

// BenchmarkCheck1000 checks a 1,000-template plan (engine compiled once, as
// in a long-lived process; scripts/bench-policy-check.sh times the whole
// CLI against conftest).
func BenchmarkCheck1000(b *testing.B) {
	e := builtinEngine(b)
	changes := make([]change, 1000)
	for i := range changes {
		changes[i] = templateChange(fmt.Sprintf("t%d", i), map[string]any{"labels": map[string]any{"team": "agents"}})
	}
	data := planJSON(b, "docker://", changes...)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		rep, err := Check(b.Context(), e, "plan.json", data, Options{Now: now})
		if err != nil || len(rep.Resources) != 1000 {
			b.Fatalf("check: %v", err)
		}
	}
}
