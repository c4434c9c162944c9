package resources

import (
	"math/big"

	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// The template is planned once per resource in every `terraform plan`, so
// its configuration is read (inputs.ReadTemplate) and its plan written as
// raw Terraform values: the framework's reflection-based Get/Set cost more
// than the policy itself.

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
