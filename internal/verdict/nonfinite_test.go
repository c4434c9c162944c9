package verdict

import (
	"errors"
	"math"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// A non-finite CPU cap built by the shared builder reaches the one decision
// function as a ConfigurationError naming the attribute, not as a panic.
func TestCheck_NonFiniteCPUFromBuild(t *testing.T) {
	eng, err := policy.Shared(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, cpu := range []float64{math.Inf(1), math.Inf(-1), math.NaN()} {
		_, in, err := inputs.Template{Name: "p", Image: "img", Caps: model.CapsRequest{CPU: &cpu}}.Build("docker://")
		if err != nil {
			t.Fatal(err)
		}
		_, err = Check(t.Context(), eng, in, Options{})
		var me *model.Error
		if !errors.As(err, &me) || me.Class != model.ErrConfiguration || me.Attribute != "resources.cpu" {
			t.Fatalf("cpu %v: Check = %v, want a ConfigurationError on resources.cpu", cpu, err)
		}
	}
}
