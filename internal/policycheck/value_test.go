package policycheck

import (
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/verdict"
)

// planValue decodes values as terraform-plugin-go decodes the JSON values
// of the provider protocol (tftypes.ValueFromJSONWithOpts, attributes the
// type lacks ignored): escapes, invalid UTF-8, numbers of every form,
// attributes left out, attributes it passes over whatever they hold. With
// a shared cache, a second decoding gives the same value.
func TestPlanValue_AsTerraformDecodesJSON(t *testing.T) {
	for _, tc := range []struct {
		typ  tftypes.Type
		json string
	}{
		{inputs.TemplateReadType, `{}`},
		{inputs.TemplateReadType, string(planJSONValues(t, templateChange("t", nil).after))},
		{inputs.TemplateReadType, " {\n\t\"name\" : \"a\\\"b\\\\c\\n\\u00e9\\ud83d\\ude00\" , \"image\":\"caf\xc3\xa9\xff\xfe\", \"labels\": {\"k\\u0041\": \"v\", \"\": \"\"}} "},
		{inputs.TemplateReadType, `{"resources":{"cpu":0.5,"memory_mb":-0,"disk_mb":1e3,"pids":12345678901234567890},"timeout_seconds":-9223372036854775808,"lifetime_seconds":1E-2}`},
		{inputs.TemplateReadType, `{"resources":{"cpu":123456789012345678,"memory_mb":-123456789012345678,"disk_mb":0.00999999999999999999999,"pids":-0.0}}`},
		{inputs.TemplateReadType, `{"spec":"{\"a\":[1,{\"b\":\"]}\\\"\"}]}","id":null,"image_id":{"x":[[],{}]},"unknown_attr":[true,false,null,"\\",-1.5e-7],"name":"n"}`},
		{inputs.TemplateReadType, `{"network":{"egress":"allow","allow":["10.0.0.0/8","",null]},"secret_names":[],"env":{}}`},
		{inputs.TemplateReadType, `{"network":null,"resources":null,"env":null,"secret_names":null}`},
		{inputs.NetworkPolicyReadType, `{"egress":"","allow":[],"backend":"docker://","policy":{"egress":"deny"}}`},
		{inputs.ResourceCapsReadType, `{"cpu":2,"memory_mb":512,"caps":{"cpu":2}}`},
		{tenantType, `{"tenant_id":"a","session_id":"b","template_spec":"{}","extra_labels":{"x":"y"}}`},
	} {
		want, err := tftypes.ValueFromJSONWithOpts([]byte(tc.json), tc.typ, tftypes.ValueFromJSONOpts{IgnoreUndefinedAttributes: true})
		if err != nil {
			t.Fatalf("%s: terraform-plugin-go: %v", tc.json, err)
		}
		cache := newValues()
		for _, c := range []*values{nil, cache, cache} {
			got, err := planValue(c, "r", tc.typ, tc.json, nil)
			if err != nil {
				t.Fatalf("%s: %v", tc.json, err)
			}
			if !got.Equal(want) {
				t.Errorf("%s:\n got %v\nwant %v", tc.json, got, want)
			}
		}
	}
}

// planJSONValues writes resource values as the test plans do.
func planJSONValues(t *testing.T, after map[string]any) []byte {
	t.Helper()
	data := planJSON(t, "", change{addr: "sandboxio_template.t", mode: "managed", typ: typeTemplate, name: "t",
		actions: []string{"create"}, after: after, unknown: map[string]any{}})
	p, err := parsePlan("plan.json", data)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(p.ResourceChanges[0].Change.After)
}

// after_unknown's marks make values unknown at any depth, also where after
// leaves the attribute out; marks of another shape than the value, false
// and what Terraform does not write there mark nothing.
func TestPlanValue_Unknowns(t *testing.T) {
	str := func(s string) tftypes.Value { return tftypes.NewValue(tftypes.String, s) }
	unknown := func(typ tftypes.Type) tftypes.Value { return tftypes.NewValue(typ, tftypes.UnknownValue) }
	strMap := tftypes.Map{ElementType: tftypes.String}
	strList := tftypes.List{ElementType: tftypes.String}
	networkType := inputs.TemplateReadType.AttributeTypes["network"]
	capsType := inputs.TemplateReadType.AttributeTypes["resources"].(tftypes.Object)
	for _, tc := range []struct {
		after, unknown string
		want           map[string]tftypes.Value // the attributes that are not null
	}{
		{`{"name":"n"}`, `{"image":true,"spec":true,"name":false}`, map[string]tftypes.Value{"name": str("n"), "image": unknown(tftypes.String)}},
		{`{"image":"i"}`, `{"image":true}`, map[string]tftypes.Value{"image": unknown(tftypes.String)}},
		{`{"env":{"A":"a","B":null}}`, `{"env":{"B":true,"C":true}}`,
			map[string]tftypes.Value{"env": tftypes.NewValue(strMap, map[string]tftypes.Value{"A": str("a"), "B": unknown(tftypes.String), "C": unknown(tftypes.String)})}},
		{`{"network":{"egress":"deny","allow":["a",null,"c"]}}`, `{"network":{"allow":[false,true]}}`,
			map[string]tftypes.Value{"network": tftypes.NewValue(networkType, map[string]tftypes.Value{
				"egress": str("deny"), "allow": tftypes.NewValue(strList, []tftypes.Value{str("a"), unknown(tftypes.String), str("c")})})}},
		{`{"resources":{"cpu":1}}`, `{"resources":{"memory_mb":true}}`,
			map[string]tftypes.Value{"resources": tftypes.NewValue(capsType, map[string]tftypes.Value{
				"cpu": tftypes.NewValue(tftypes.Number, big.NewFloat(1)), "memory_mb": unknown(tftypes.Number),
				"disk_mb": tftypes.NewValue(tftypes.Number, nil), "pids": tftypes.NewValue(tftypes.Number, nil)})}},
		// A mark of another shape (a list for a map), a string, a number.
		{`{"labels":{"a":"b"},"name":"n","image":"i"}`, `{"labels":[true],"name":"yes","image":1}`,
			map[string]tftypes.Value{"labels": tftypes.NewValue(strMap, map[string]tftypes.Value{"a": str("b")}), "name": str("n"), "image": str("i")}},
	} {
		mask, err := readMask(jsonText(tc.unknown))
		if err != nil {
			t.Fatal(err)
		}
		got, err := planValue(newValues(), "r", inputs.TemplateReadType, tc.after, mask)
		if err != nil {
			t.Fatalf("%s: %v", tc.after, err)
		}
		attrs := map[string]tftypes.Value{}
		for k, at := range inputs.TemplateReadType.AttributeTypes {
			attrs[k] = tftypes.NewValue(at, nil)
		}
		for k, v := range tc.want {
			attrs[k] = v
		}
		if want := tftypes.NewValue(inputs.TemplateReadType, attrs); !got.Equal(want) {
			t.Errorf("%s with %s:\n got %v\nwant %v", tc.after, tc.unknown, got, want)
		}
	}
	mask, _ := readMask(jsonText(`true`))
	if got, err := planValue(nil, "r", inputs.TemplateReadType, `{"name":"n"}`, mask); err != nil || got.IsKnown() {
		t.Errorf("wholly unknown: %v, %v", got, err)
	}
}

// readMask keeps only what marks something unknown; a collection nested
// absurdly deep is taken as unknown; anything but an object or a boolean
// is refused.
func TestReadMask(t *testing.T) {
	for _, tc := range []struct {
		raw      string
		want     string // fmt's %v of the mark, when it matters
		contains bool
	}{
		{``, "<nil>", false}, {`null`, "<nil>", false}, {`false`, "<nil>", false}, {`{}`, "<nil>", false},
		{` { } `, "<nil>", false}, {`true`, "true", true},
		{`{"a":false,"b":{},"c":[],"d":[false,{}],"e":"x","f":1,"g":null}`, "<nil>", false},
		{`{"a":true,"b":{"c":[false,true]},"d":false}`, "map[a:true b:map[c:[<nil> true]]]", true},
		{`{"k\"ey":true}`, `map[k"ey:true]`, true},
		{`{"a":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`, "", true},
		{`{"a":` + strings.Repeat(`{"b":`, 60) + `false` + strings.Repeat("}", 60) + `}`, "<nil>", false},
	} {
		got, err := readMask(jsonText(tc.raw))
		if err != nil {
			t.Fatalf("%s: %v", tc.raw, err)
		}
		if s := fmt.Sprintf("%v", got); (tc.want != "" && s != tc.want) || containsTrue(got) != tc.contains {
			t.Errorf("%s: got %s (contains true: %v), want %s (%v)", tc.raw, s, containsTrue(got), tc.want, tc.contains)
		}
	}
	for _, raw := range []string{`"yes"`, `1`, `[true]`} {
		if _, err := readMask(jsonText(raw)); err == nil || !strings.Contains(err.Error(), "want an object or a boolean") {
			t.Errorf("%s: %v", raw, err)
		}
	}
}

// A value of the wrong type names its path and what it holds; text that
// is not JSON (which parsePlan never passes on) is an error, not a panic.
func TestPlanValue_Errors(t *testing.T) {
	for _, tc := range []struct{ json, want string }{
		{`{"name":1}`, "r: attribute name holds the number 1, not a string"},
		{`{"network":{"allow":["a",false]}}`, "attribute network.allow[1] holds a boolean, not a string"},
		{`{"env":{"a\"b":{}}}`, `attribute env["a\"b"] holds an object, not a string`},
		{`{"resources":{"pids":"` + strings.Repeat("9", 50) + `"}}`, "resources.pids holds a string, not a number"},
		{`{"resources":{"pids":` + strings.Repeat("9", 50) + `.5e999999999}}`, "resources.pids holds a number of 62 characters, not a number"},
		{`{"labels":[]}`, "attribute labels holds a list, not a map"},
		{`{"network":"deny"}`, "attribute network holds a string, not an object"},
		{`{"secret_names":{}}`, "attribute secret_names holds an object, not a list"},
		{`{"name":"a"} x`, "unexpected"},
	} {
		_, err := planValue(nil, "r", inputs.TemplateReadType, tc.json, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.json, err, tc.want)
		}
	}
	valid := string(planJSONValues(t, templateChange("t", map[string]any{"labels": map[string]any{"a": "b"}}).after))
	for i := 1; i < len(valid); i++ {
		if _, err := planValue(nil, "r", inputs.TemplateReadType, valid[:i], nil); err == nil {
			t.Errorf("%q decoded", valid[:i])
		}
		for _, text := range []string{valid[:i] + "}" + valid[i:], valid[:i] + `"` + valid[i:], valid[:i] + `\` + valid[i:]} {
			_, _ = planValue(nil, "r", inputs.TemplateReadType, text, nil)
		}
	}
}

// The check's decoding and reading of a template, as BenchmarkCheck1000
// plans them, allocates within a budget: the tftypes values the reader
// reads, no map[string]any decoded first, the values a plan repeats made
// once (TestPlanValue_AsTerraformDecodesJSON holds what it decodes).
func TestCheck_DecodeAllocations(t *testing.T) {
	changes := make([]change, 100)
	for i := range changes {
		changes[i] = templateChange(fmt.Sprintf("t%d", i), map[string]any{"labels": map[string]any{"team": "agents"}})
	}
	p, err := parsePlan("plan.json", planJSON(t, "docker://", changes...))
	if err != nil {
		t.Fatal(err)
	}
	perTemplate := testing.AllocsPerRun(20, func() {
		res, err := p.resources("plan.json")
		if err != nil {
			t.Fatal(err)
		}
		cache := newValues()
		for _, r := range res {
			if _, err := r.build(cache); err != nil {
				t.Fatal(err)
			}
		}
	}) / float64(len(changes))
	// 81 here (go1.25); 223 when the plan's values were decoded into
	// map[string]any and then into tftypes values (bfed504), 146 when
	// they were read from the map[string]any (e27749c).
	const budget = 90
	t.Logf("%.1f allocations per template", perTemplate)
	if perTemplate > budget {
		t.Errorf("%.1f allocations per template decoded and read, budget %d", perTemplate, budget)
	}
}

// FuzzPlanValue: any text decodes without a panic, and JSON that both
// planValue and terraform-plugin-go decode gives the same value.
func FuzzPlanValue(f *testing.F) {
	f.Add(`{"name":"n","network":{"egress":"deny","allow":["a"]},"resources":{"cpu":0.5,"pids":1},"env":{"A":"\u00e9"},"x":[{}]}`)
	f.Add(`{"labels":{"a":null},"secret_names":[null,"s"],"timeout_seconds":1e2}`)
	f.Fuzz(func(t *testing.T, text string) {
		got, err := planValue(newValues(), "r", inputs.TemplateReadType, text, nil)
		if err != nil || strings.TrimSpace(text) == "" {
			return
		}
		want, err := tftypes.ValueFromJSONWithOpts([]byte(text), inputs.TemplateReadType, tftypes.ValueFromJSONOpts{IgnoreUndefinedAttributes: true})
		if err == nil && json.Valid([]byte(text)) && !got.Equal(want) {
			t.Fatalf("%s:\n got %v\nwant %v", text, got, want)
		}
	})
}

// A label whose value is unknown at plan is left out of after by Terraform
// and marked in after_unknown. Its key is known, and a key under the
// reserved prefix is refused, as terraform plan refuses it; the check once
// dropped the entry and passed the plan.
func TestCheck_UnknownMapEntryKeepsItsKey(t *testing.T) {
	e := builtinEngine(t)
	c := templateChange("t", map[string]any{"labels": map[string]any{"team": "agents"}})
	c.unknown = map[string]any{"labels": map[string]any{"sandboxio.tenant_id": true}}
	r := byAddress(check(t, e, planJSON(t, "docker://", c), nil))["sandboxio_template.t"]
	if f := ids(r, verdict.Fail); len(f) != 1 || f[0] != "SBX-LBL-001" {
		t.Fatalf("refusals %v, want SBX-LBL-001 for the reserved key whose value is unknown", f)
	}
}
