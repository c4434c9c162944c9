package policycheck

import (
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// planValue decodes a resource's after (decoded with json.Number) and
// after_unknown into a value of typ, the provider schema's type: the check
// then reads it with the provider's own reader (inputs.ReadTemplate, ...).
// A value of the wrong type is an error: Terraform never writes one, so
// the file was edited or damaged. Attributes the type does not have (a
// provider of another version) are passed over; one the plan leaves out is
// null.
func planValue(addr string, typ tftypes.Type, after map[string]any, unknown any) (tftypes.Value, error) {
	d := decoder{addr: addr}
	v := d.value(typ, after, unknown)
	return v, d.err
}

// The primitive types as interface values, made once: converting one on
// every call allocates.
var stringType, numberType, boolType tftypes.Type = tftypes.String, tftypes.Number, tftypes.Bool

// decoder keeps the path to the value it decodes as parts, joined only
// for an error: most plans have none.
type decoder struct {
	addr string
	path []string
	err  error
}

func (d *decoder) wrong(want string, got any) {
	if d.err != nil {
		return
	}
	path := ""
	for _, p := range d.path {
		if path != "" && !strings.HasPrefix(p, "[") {
			path += "."
		}
		path += p
	}
	what := describe(got)
	if n, ok := got.(json.Number); ok {
		what = "the number " + string(n)
		if len(n) > 40 {
			what = "a number of " + strconv.Itoa(len(n)) + " characters"
		}
	}
	d.err = fmt.Errorf("%s: attribute %s holds %s, not %s", d.addr, path, what, want)
}

// value builds the value at path. unknown is after_unknown's mark at the
// same place: true for a value unknown until apply, an object or a list of
// marks for a collection with unknowns inside.
func (d *decoder) value(typ tftypes.Type, v, unknown any) tftypes.Value {
	if u, ok := unknown.(bool); ok && u {
		return tftypes.NewValue(typ, tftypes.UnknownValue)
	}
	if v == nil {
		return tftypes.NewValue(typ, nil)
	}
	switch t := typ.(type) {
	case tftypes.Object:
		m, ok := v.(map[string]any)
		if !ok {
			d.wrong("an object", v)
			return tftypes.NewValue(typ, nil)
		}
		marks, _ := unknown.(map[string]any)
		attrs := make(map[string]tftypes.Value, len(t.AttributeTypes))
		for k, at := range t.AttributeTypes {
			d.path = append(d.path, k)
			attrs[k] = d.value(at, m[k], marks[k])
			d.path = d.path[:len(d.path)-1]
		}
		return tftypes.NewValue(typ, attrs)
	case tftypes.List:
		l, ok := v.([]any)
		if !ok {
			d.wrong("a list", v)
			return tftypes.NewValue(typ, nil)
		}
		marks, _ := unknown.([]any)
		elems := make([]tftypes.Value, len(l))
		for i, e := range l {
			var mark any
			if i < len(marks) {
				mark = marks[i]
			}
			d.path = append(d.path, "["+strconv.Itoa(i)+"]")
			elems[i] = d.value(t.ElementType, e, mark)
			d.path = d.path[:len(d.path)-1]
		}
		return tftypes.NewValue(typ, elems)
	case tftypes.Map:
		m, ok := v.(map[string]any)
		if !ok {
			d.wrong("a map", v)
			return tftypes.NewValue(typ, nil)
		}
		marks, _ := unknown.(map[string]any)
		elems := make(map[string]tftypes.Value, len(m))
		for k, e := range m {
			d.path = append(d.path, "["+strconv.Quote(k)+"]")
			elems[k] = d.value(t.ElementType, e, marks[k])
			d.path = d.path[:len(d.path)-1]
		}
		return tftypes.NewValue(typ, elems)
	}
	switch {
	case typ.Is(stringType):
		if s, ok := v.(string); ok {
			return tftypes.NewValue(typ, s)
		}
		d.wrong("a string", v)
	case typ.Is(numberType):
		// At Terraform's precision, so that a number reads as written. One
		// beyond big.Float's range is no number Terraform writes.
		if n, ok := v.(json.Number); ok {
			if f, _, err := big.ParseFloat(string(n), 10, 512, big.ToNearestEven); err == nil && !f.IsInf() {
				return tftypes.NewValue(typ, f)
			}
		}
		d.wrong("a number", v)
	case typ.Is(boolType):
		if b, ok := v.(bool); ok {
			return tftypes.NewValue(typ, b)
		}
		d.wrong("a boolean", v)
	default:
		d.wrong(typ.String(), v)
	}
	return tftypes.NewValue(typ, nil)
}
