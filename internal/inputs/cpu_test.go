package inputs

import (
	"errors"
	"math/big"
	"strconv"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// A cpu a float64 holds as written passes through; anything else is
// refused under SBX-RES-001, never rounded into (or out of) the range.
func TestCPU_ExactOrRefused(t *testing.T) {
	parse := func(s string) *big.Float {
		f, _, err := big.ParseFloat(s, 10, 512, big.ToNearestEven)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	for _, s := range []string{"0.01", "0.1", "1", "2.5", "1024", "0", "-1", "0.0000001"} {
		if _, err := CPU(parse(s), "resources.cpu"); err != nil {
			t.Errorf("%s: %v (the range rule decides on it, not the conversion)", s, err)
		}
	}
	for _, s := range []string{"0.00999999999999999999999", "1.00000000000000000001", "1e-400", "1e400", "-1e-400"} {
		_, err := CPU(parse(s), "resources.cpu")
		var me *model.Error
		if !errors.As(err, &me) || me.Rule != "SBX-RES-001" || me.Class != model.ErrConfiguration || me.Attribute != "resources.cpu" || me.Fix == "" {
			t.Errorf("%s: got %v, want SBX-RES-001 on resources.cpu", s, err)
		}
	}
	if _, err := CPU(new(big.Float).SetInf(false), "resources.cpu"); err == nil {
		t.Error("+Inf accepted")
	}
}

// CPU's short way for whole numbers decides as the comparison of texts
// does, up to and around 2^53 (where a float64 stops holding every whole
// number) and beyond it (1e23 is held as 99999999999999991611392).
func TestCPU_WholeNumbersAsWritten(t *testing.T) {
	for _, s := range []string{"0", "-0", "1", "-1", "64", "9007199254740991", "9007199254740992", "9007199254740993",
		"-9007199254740993", "18014398509481984", "100000000000000000000000", "1e23", "1e400"} {
		f, _, err := big.ParseFloat(s, 10, 512, big.ToNearestEven)
		if err != nil {
			t.Fatal(err)
		}
		x, _ := f.Float64()
		want := !f.IsInf() && strconv.FormatFloat(x, 'f', -1, 64) == f.Text('f', -1)
		got, err := CPU(f, "resources.cpu")
		if (err == nil) != want || (err == nil && got != x) {
			t.Errorf("%s: CPU = %v, %v; written as held: %v", s, got, err, want)
		}
	}
}
