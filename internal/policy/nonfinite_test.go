package policy_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// A CPU cap of ±Inf or NaN has no OPA value: evaluating it used to panic
// inside OPA's number comparison. It must be a ConfigurationError naming the
// attribute, from Evaluate and from Map alike.
func TestEvaluate_NonFiniteCPUIsConfigurationError(t *testing.T) {
	for _, cpu := range []float64{math.Inf(1), math.Inf(-1), math.NaN()} {
		in := templateInput()
		c := *in.Resources
		c.CPU = cpu
		in.Resources = &c
		_, err := engine(t).Evaluate(t.Context(), in)
		var me *model.Error
		if !errors.As(err, &me) || me.Class != model.ErrConfiguration || me.Attribute != "resources.cpu" {
			t.Fatalf("cpu %v: got %v, want a ConfigurationError on resources.cpu", cpu, err)
		}
		if _, err := in.Map(); !errors.Is(err, model.ErrConfiguration) {
			t.Fatalf("cpu %v: Map: %v", cpu, err)
		}
	}
}

// Defence in depth: whatever goes wrong inside evaluation, Evaluate returns
// an error rather than panicking. A zero Engine (no store, no query) panics
// on its first step, inside the guarded part.
func TestEvaluate_PanicBecomesError(t *testing.T) {
	var e policy.Engine
	_, err := e.Evaluate(t.Context(), templateInput())
	var me *model.Error
	if !errors.As(err, &me) || me.Rule != "SBX-POL-003" || !strings.Contains(err.Error(), "refused rather than passed") {
		t.Fatalf("Evaluate on a broken engine: %v, want an error", err)
	}
}
