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
			_, err = float64Of(bigNumber(t, tc.value))
		} else {
			_, err = int64Of(bigNumber(t, tc.value), "resources.pids")
		}
		var me *model.Error
		if !errors.As(err, &me) || me.Class != model.ErrConfiguration || (me.Attribute != "resources.cpu" && me.Attribute != "resources.pids") {
			t.Errorf("%s: got %v, want a ConfigurationError naming the attribute", tc.value, err)
		}
	}
	inf := tftypes.NewValue(tftypes.Number, new(big.Float).SetInf(false))
	if _, err := float64Of(inf); !errors.Is(err, model.ErrConfiguration) {
		t.Errorf("+Inf: %v", err)
	}
	if _, err := int64Of(inf, "timeout_seconds"); !errors.Is(err, model.ErrConfiguration) {
		t.Errorf("+Inf as int: %v", err)
	}
	for _, s := range []string{"9223372036854775807", "-9223372036854775808", "0", "-5"} {
		if _, err := int64Of(bigNumber(t, s), "pids"); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	if f, err := float64Of(bigNumber(t, "0.5")); err != nil || *f != 0.5 {
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
	if !r.Known() || !errors.As(err, &me) || me.Class != model.ErrConfiguration || me.Attribute != "resources.cpu" {
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

// templateValue is a template as configured: every attribute the reader
// reads set, computed ones unknown, with the given attributes replaced.
func templateValue(t *testing.T, with map[string]tftypes.Value) tftypes.Value {
	t.Helper()
	attrs := map[string]tftypes.Value{}
	for name, typ := range TemplateType.AttributeTypes {
		attrs[name] = tftypes.NewValue(typ, tftypes.UnknownValue)
	}
	for _, name := range templateAttributes {
		attrs[name] = tftypes.NewValue(TemplateType.AttributeTypes[name], nil)
	}
	attrs["name"], attrs["backend"], attrs["image"] = stringValue("p"), stringValue("docker://"), stringValue("img")
	attrs["network"] = tftypes.NewValue(networkType, map[string]tftypes.Value{
		"egress": stringValue("deny"), "allow": tftypes.NewValue(tftypes.List{ElementType: tftypes.String}, []tftypes.Value{})})
	caps := map[string]tftypes.Value{}
	for name := range capsType.AttributeTypes {
		caps[name] = bigNumber(t, "512")
	}
	caps["cpu"] = bigNumber(t, "1")
	attrs["resources"] = tftypes.NewValue(capsType, caps)
	attrs["timeout_seconds"], attrs["lifetime_seconds"] = bigNumber(t, "300"), bigNumber(t, "300")
	attrs["labels"] = tftypes.NewValue(tftypes.Map{ElementType: tftypes.String}, map[string]tftypes.Value{"team": stringValue("agents")})
	for k, v := range with {
		attrs[k] = v
	}
	return tftypes.NewValue(TemplateType, attrs)
}

// ReadTemplate reads the value's own attributes without copying them, and
// copies them before it puts placeholders in: the value it read from is
// unchanged (tftypes values are immutable; the framework may hold it).
func TestReadTemplate_PlaceholdersLeaveTheValue(t *testing.T) {
	strMap := tftypes.Map{ElementType: tftypes.String}
	v := templateValue(t, map[string]tftypes.Value{
		"image": tftypes.NewValue(tftypes.String, tftypes.UnknownValue),
		"env":   tftypes.NewValue(strMap, map[string]tftypes.Value{"HOST": tftypes.NewValue(tftypes.String, tftypes.UnknownValue)}),
	})
	before := v.Copy()
	r, err := ReadTemplate(v)
	if err != nil || !r.Known() || len(r.Placeholders) != 2 || r.Config.Image != "" || r.Config.Env["HOST"] != "" {
		t.Fatalf("read: %+v, %v", r, err)
	}
	if !v.Equal(before) {
		t.Fatalf("ReadTemplate changed the value it read:\n%v\nwas\n%v", v, before)
	}
}

// Reading a template allocates within a budget: the value's own map is
// read, strings go straight into the configuration's fields, and a whole
// cpu is converted without writing it out as text.
func TestReadTemplate_Allocations(t *testing.T) {
	v := templateValue(t, nil)
	allocs := testing.AllocsPerRun(100, func() {
		if r, err := ReadTemplate(v); err != nil || !r.Known() {
			t.Fatalf("read: %+v, %v", r, err)
		}
	})
	// 34 here (go1.26); 60 with a copy of the attributes, a map of string
	// fields, a string read through a variable of its own and cpu compared
	// as text (bfed504); 41 with only the cpu's short way.
	const budget = 38
	t.Logf("%.0f allocations", allocs)
	if allocs > budget {
		t.Errorf("%.0f allocations reading a template, budget %d", allocs, budget)
	}
}

// brokered_secrets is read beside secret_names: null gives none, a null
// format reads as "" (the default once normalised), and a value unknown at
// plan leaves the check to apply, since the rules decide on all of it.
func TestReadTemplate_BrokeredSecrets(t *testing.T) {
	base := func() map[string]tftypes.Value {
		attrs := map[string]tftypes.Value{}
		for name, typ := range TemplateType.AttributeTypes {
			attrs[name] = tftypes.NewValue(typ, nil)
		}
		attrs["name"], attrs["backend"], attrs["image"] = stringValue("p"), stringValue("docker://?egress=gateway"), stringValue("img")
		return attrs
	}
	elem := brokeredType.ElementType.(tftypes.Object)
	secret := func(hosts tftypes.Value, format tftypes.Value) tftypes.Value {
		return tftypes.NewValue(brokeredType, map[string]tftypes.Value{"GITHUB_TOKEN": tftypes.NewValue(elem, map[string]tftypes.Value{
			"hosts": hosts, "header": stringValue("Authorization"), "format": format,
		})})
	}
	hosts := tftypes.NewValue(tftypes.List{ElementType: tftypes.String}, []tftypes.Value{stringValue("b.example.com"), stringValue("a.example.com")})

	r, err := ReadTemplate(tftypes.NewValue(TemplateType, base()))
	if err != nil || r.Config.BrokeredSecrets != nil {
		t.Fatalf("null brokered_secrets: %+v, %v", r.Config.BrokeredSecrets, err)
	}

	attrs := base()
	attrs["brokered_secrets"] = secret(hosts, tftypes.NewValue(tftypes.String, nil))
	r, err = ReadTemplate(tftypes.NewValue(TemplateType, attrs))
	if err != nil {
		t.Fatal(err)
	}
	got := r.Config.BrokeredSecrets["GITHUB_TOKEN"]
	if got.Header != "Authorization" || got.Format != "" || len(got.Hosts) != 2 {
		t.Fatalf("read %+v", got)
	}
	spec, in, err := r.Config.Build("")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []model.BrokeredSecret{spec.BrokeredSecrets["GITHUB_TOKEN"], in.Template.BrokeredSecrets["GITHUB_TOKEN"]} {
		if b.Format != model.DefaultBrokeredFormat || b.Hosts[0] != "a.example.com" {
			t.Errorf("not normalised: %+v", b)
		}
	}

	attrs = base()
	attrs["brokered_secrets"] = secret(tftypes.NewValue(tftypes.List{ElementType: tftypes.String}, tftypes.UnknownValue), stringValue("%s"))
	if r, err = ReadTemplate(tftypes.NewValue(TemplateType, attrs)); err != nil || r.Known() {
		t.Fatalf("unknown hosts: known %v (%v), %v; want the check left to apply", r.Known(), r.Unknown, err)
	}
}
