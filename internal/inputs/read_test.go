package inputs

import (
	"errors"
	"math/big"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

func bigNumber(t *testing.T, s string) tftypes.Value {
	t.Helper()
	f, _, err := big.ParseFloat(s, 10, 512, big.ToNearestEven)
	if err != nil {
		t.Fatal(err)
	}
	return tftypes.NewValue(tftypes.Number, f)
}

// A number Terraform holds exactly but Go cannot (beyond float64's range, or
// beyond int64's) is a ConfigurationError naming the attribute: never ±Inf
// (which used to reach the policy engine and panic it), never a silent clamp.
func TestRawNumbers_OutOfRangeRefused(t *testing.T) {
	for _, tc := range []struct {
		value string
		float bool
	}{
		{"1e400", true}, {"-1e400", true},
		{"9223372036854775808", false}, {"-9223372036854775809", false}, {"1e30", false}, {"1.5", false},
	} {
		var err error
		if tc.float {
			_, err = float64Of(bigNumber(t, tc.value), "resources.cpu")
		} else {
			_, err = int64Of(bigNumber(t, tc.value), "resources.pids")
		}
		var me *model.Error
		if !errors.As(err, &me) || me.Class != model.ConfigurationError || (me.Attribute != "resources.cpu" && me.Attribute != "resources.pids") {
			t.Errorf("%s: got %v, want a ConfigurationError naming the attribute", tc.value, err)
		}
	}
	inf := tftypes.NewValue(tftypes.Number, new(big.Float).SetInf(false))
	if _, err := float64Of(inf, "resources.cpu"); !errors.Is(err, model.ConfigurationError) {
		t.Errorf("+Inf: %v", err)
	}
	if _, err := int64Of(inf, "timeout_seconds"); !errors.Is(err, model.ConfigurationError) {
		t.Errorf("+Inf as int: %v", err)
	}
	for _, s := range []string{"9223372036854775807", "-9223372036854775808", "0", "-5"} {
		if _, err := int64Of(bigNumber(t, s), "pids"); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	if f, err := float64Of(bigNumber(t, "0.5"), "resources.cpu"); err != nil || *f != 0.5 {
		t.Errorf("0.5: %v %v", f, err)
	}
}

// The template's configuration, as read at plan and again at apply (and by
// `sandboxio policy check`), refuses such a number with the attribute's path.
func TestReadTemplate_HugeCPURefused(t *testing.T) {
	attrs := map[string]tftypes.Value{}
	for name, typ := range TemplateType.AttributeTypes {
		attrs[name] = tftypes.NewValue(typ, nil)
	}
	attrs["name"], attrs["backend"], attrs["image"] = stringValue("p"), stringValue("docker://"), stringValue("img")
	caps := map[string]tftypes.Value{}
	for name, typ := range capsType.AttributeTypes {
		caps[name] = tftypes.NewValue(typ, nil)
	}
	caps["cpu"] = bigNumber(t, "1e400")
	attrs["resources"] = tftypes.NewValue(capsType, caps)
	r, err := ReadTemplate(tftypes.NewValue(TemplateType, attrs))
	var me *model.Error
	if !r.Known() || !errors.As(err, &me) || me.Class != model.ConfigurationError || me.Attribute != "resources.cpu" {
		t.Fatalf("cpu = 1e400: known %v, err %v; want a ConfigurationError on resources.cpu", r.Known(), err)
	}
}

func stringValue(s string) tftypes.Value { return tftypes.NewValue(tftypes.String, s) }

// Object's map belongs to the caller: filling in attributes must not
// change the value it was read from (tftypes values are immutable, and the
// framework may hold the same value elsewhere).
func TestRawObjectDoesNotAliasTheValue(t *testing.T) {
	typ := tftypes.Object{AttributeTypes: map[string]tftypes.Type{"id": tftypes.String}}
	v := tftypes.NewValue(typ, map[string]tftypes.Value{"id": tftypes.NewValue(tftypes.String, tftypes.UnknownValue)})
	attrs, err := Object(v)
	if err != nil {
		t.Fatal(err)
	}
	attrs["id"] = stringValue("filled in")
	again, err := Object(v)
	if err != nil {
		t.Fatal(err)
	}
	if again["id"].IsKnown() {
		t.Fatalf("the value changed under its reader: %v", again["id"])
	}
}
