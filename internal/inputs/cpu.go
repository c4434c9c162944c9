package inputs

import (
	"fmt"
	"math"
	"math/big"
	"strconv"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// CPU converts a configured cpu, as Terraform holds it (an exact decimal),
// to the 64-bit float caps hold. Terraform compares numbers by their
// shortest decimal text: a value a float64 cannot hold as written (more
// significant digits than it keeps, or beyond its range) would be checked
// as one value and planned as another, which Terraform rejects as an
// invalid plan, or would pass the range rule after rounding into it
// (0.00999999999999999999999 becomes 0.01). Such a value is refused here,
// under the range rule (SBX-RES-001) and with the value as written.
// attribute names it in the refusal (resources.cpu).
func CPU(f *big.Float, attribute string) (float64, error) {
	x, acc := f.Float64()
	if acc == big.Exact && f.IsInt() && math.Abs(x) < 1<<53 {
		// A whole number below 2^53, what most configurations hold: its
		// shortest text is its digits, in both, so the comparison below
		// holds without writing the number out (which allocates).
		return x, nil
	}
	written := f.Text('f', -1)
	if !f.IsInf() && strconv.FormatFloat(x, 'f', -1, 64) == written {
		return x, nil
	}
	shown := written
	if len(shown) > 40 {
		shown = f.Text('g', 20)
	}
	bounds := model.CapBounds().CPU
	limit := func(v float64) *big.Float {
		b, _, _ := big.ParseFloat(strconv.FormatFloat(v, 'f', -1, 64), 10, 512, big.ToNearestEven)
		return b
	}
	between := fmt.Sprintf("set %s between %s and %s, or leave it out to get the default (%g)",
		attribute, strconv.FormatFloat(bounds.Min, 'f', -1, 64), strconv.FormatFloat(bounds.Max, 'f', -1, 64), model.DefaultCPU)
	refuse := func(msg, fix string) error {
		return &model.Error{Class: model.ErrConfiguration, Rule: rules.ResCap, Attribute: attribute, Message: msg, Fix: fix}
	}
	switch {
	case f.Sign() <= 0:
		return 0, refuse(fmt.Sprintf("%s = %s: every cap must be positive, because a cap can be raised but never removed", attribute, shown),
			between)
	case f.Cmp(limit(bounds.Min)) < 0:
		return 0, refuse(fmt.Sprintf("%s = %s is below the minimum of %g: no backend can apply a smaller cap, and Docker would round it to no limit or refuse it",
			attribute, shown, bounds.Min), between)
	case f.Cmp(limit(bounds.Max)) > 0:
		return 0, refuse(fmt.Sprintf("%s = %s is above the maximum of %g: converted to the backend's units it would overflow, and the cap could end as no limit",
			attribute, shown, bounds.Max), between)
	}
	return 0, refuse(fmt.Sprintf("%s = %s has more significant digits than a cap holds (a 64-bit floating-point number): it would be checked and stored as %s, not as written",
		attribute, shown, strconv.FormatFloat(x, 'f', -1, 64)),
		fmt.Sprintf("write %s with at most 15 significant digits, for example %s", attribute, strconv.FormatFloat(x, 'g', 15, 64)))
}
