package resources

import (
	"fmt"
	"maps"
	"math/big"

	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// The template is planned once per resource in every `terraform plan`, so
// its configuration is read and its plan written as raw Terraform values:
// the framework's reflection-based Get/Set cost more than the policy itself.

// rawObject returns an object's attributes; a null or unknown object gives nil.
func rawObject(v tftypes.Value) (map[string]tftypes.Value, error) {
	if v.IsNull() || !v.IsKnown() {
		return nil, nil
	}
	var m map[string]tftypes.Value
	if err := v.As(&m); err != nil {
		return nil, fmt.Errorf("read object: %w", err)
	}
	// As hands out the value's own map; a copy keeps the value immutable
	// when the caller fills in attributes.
	return maps.Clone(m), nil
}

func rawString(v tftypes.Value) (string, error) {
	if v.IsNull() {
		return "", nil
	}
	var s string
	if err := v.As(&s); err != nil {
		return "", fmt.Errorf("read string: %w", err)
	}
	return s, nil
}

// rawInt64 returns nil for null. A value that is not a whole number in
// int64's range is refused with a ConfigurationError naming the attribute:
// clamping it to the range, or truncating it, would check and store a
// value other than the one configured.
func rawInt64(v tftypes.Value, attribute string) (*int64, error) {
	if v.IsNull() {
		return nil, nil
	}
	var f big.Float
	if err := v.As(&f); err != nil {
		return nil, fmt.Errorf("read number: %w", err)
	}
	i, acc := f.Int64()
	if f.IsInf() || acc != big.Exact {
		return nil, numberError(attribute, &f, "a whole number in the 64-bit integer range")
	}
	return &i, nil
}

// rawFloat64 reads a cpu; null gives nil. A value a float64 cannot hold
// as written (beyond its range, or with more digits than it keeps) is
// refused (inputs.CPU): planned after rounding, it would differ from the
// configuration, and could round into the range it lies outside.
func rawFloat64(v tftypes.Value, attribute string) (*float64, error) {
	if v.IsNull() {
		return nil, nil
	}
	var f big.Float
	if err := v.As(&f); err != nil {
		return nil, fmt.Errorf("read number: %w", err)
	}
	x, err := inputs.CPU(&f, attribute)
	if err != nil {
		return nil, err
	}
	return &x, nil
}

func numberError(attribute string, f *big.Float, want string) error {
	shown := f.Text('g', 10)
	if len(shown) > 40 {
		shown = shown[:40] + "…"
	}
	return &model.Error{
		Class: model.ConfigurationError, Attribute: attribute,
		Message: fmt.Sprintf("%s is %s, which is not %s", attribute, shown, want),
		Fix:     fmt.Sprintf("set %s to %s", attribute, want),
	}
}

// rawStrings reads a list of strings; null gives nil.
func rawStrings(v tftypes.Value) ([]string, error) {
	if v.IsNull() {
		return nil, nil
	}
	var elems []tftypes.Value
	if err := v.As(&elems); err != nil {
		return nil, fmt.Errorf("read list: %w", err)
	}
	out := make([]string, len(elems))
	for i, e := range elems {
		s, err := rawString(e)
		if err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}

// rawStringMap reads a map of strings; null gives an empty map.
func rawStringMap(v tftypes.Value) (map[string]string, error) {
	out := map[string]string{}
	if v.IsNull() {
		return out, nil
	}
	var elems map[string]tftypes.Value
	if err := v.As(&elems); err != nil {
		return nil, fmt.Errorf("read map: %w", err)
	}
	for k, e := range elems {
		s, err := rawString(e)
		if err != nil {
			return nil, err
		}
		out[k] = s
	}
	return out, nil
}

func stringValue(s string) tftypes.Value { return tftypes.NewValue(tftypes.String, s) }

func numberValue(f float64) tftypes.Value { return tftypes.NewValue(tftypes.Number, big.NewFloat(f)) }

func intValue(i int64) tftypes.Value {
	return tftypes.NewValue(tftypes.Number, new(big.Float).SetInt64(i))
}

func stringListValue(xs []string) tftypes.Value {
	elems := make([]tftypes.Value, len(xs))
	for i, x := range xs {
		elems[i] = stringValue(x)
	}
	return tftypes.NewValue(tftypes.List{ElementType: tftypes.String}, elems)
}
