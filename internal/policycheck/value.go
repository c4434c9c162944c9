package policycheck

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// planValue decodes a resource's values as `terraform show -json` writes them
// into a value of typ, the part of the schema its reader (inputs.ReadTemplate,
// ...) reads; unknown is after_unknown at the same place (readMask). A wrong
// type is an error (the file was edited); attributes typ lacks are skipped,
// missing ones are null. The text goes straight into tftypes values in one pass, with
// repeated values made once per check (cache). tftypes.ValueFromJSON is not
// used: it is internal to terraform-plugin-go, has no after_unknown and takes
// numbers written as strings.
func planValue(cache *values, addr string, typ tftypes.Type, after string, unknown any) (tftypes.Value, error) {
	d := decoder{addr: addr, s: after, cache: cache}
	d.path = d.pathBuf[:0]
	if d.skipSpace() {
		return tftypes.NewValue(typ, nil), nil
	}
	v := d.value(typ, unknown)
	if d.err == nil && !d.skipSpace() {
		d.err = fmt.Errorf("%s: unexpected %q after the values", addr, d.s[d.i])
	}
	if d.err != nil {
		return tftypes.Value{}, d.err
	}
	return v, nil
}

// values holds the primitive values a check has decoded, by their JSON
// text, to share them between resources: a tftypes.Value is immutable
// (readers copy out of it with As). Used by one goroutine at a time.
type values struct {
	strings map[string]tftypes.Value
	numbers map[string]tftypes.Value
}

// maxShared bounds what values keeps: a plan of distinct values gains
// nothing from it.
const maxShared = 4096

func newValues() *values {
	return &values{strings: map[string]tftypes.Value{}, numbers: map[string]tftypes.Value{}}
}

// str returns the string value s.
func (c *values) str(s string) tftypes.Value {
	if c == nil {
		return tftypes.NewValue(stringType, s)
	}
	if v, ok := c.strings[s]; ok {
		return v
	}
	v := tftypes.NewValue(stringType, s)
	if len(c.strings) < maxShared {
		c.strings[s] = v
	}
	return v
}

// number returns the value of the JSON number text; false if it is no
// number Terraform writes.
func (c *values) number(text string) (tftypes.Value, bool) {
	if c != nil {
		if v, ok := c.numbers[text]; ok {
			return v, true
		}
	}
	f, ok := parseNumber(text)
	if !ok {
		return tftypes.Value{}, false
	}
	v := tftypes.NewValue(numberType, f)
	if c != nil && len(c.numbers) < maxShared {
		c.numbers[text] = v
	}
	return v, true
}

// The primitive types as interface values, made once: converting one on
// every call allocates.
var stringType, numberType, boolType tftypes.Type = tftypes.String, tftypes.Number, tftypes.Bool

// pathPart is one step of the path to the value being decoded: an
// attribute, a list index or a map key. The path is spelled out only for
// an error: most plans have none.
type pathPart struct {
	name  string
	index int
	kind  byte // '.' attribute, '[' index, '"' map key
}

type decoder struct {
	addr    string
	s       string
	i       int
	cache   *values
	path    []pathPart
	pathBuf [4]pathPart
	err     error
}

var errSyntax = errors.New("invalid JSON")

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = fmt.Errorf("%s: %w at byte %d of its values", d.addr, err, d.i)
	}
}

// skipSpace skips white space and reports whether the text ends there.
func (d *decoder) skipSpace() bool {
	for d.i < len(d.s) {
		switch d.s[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return false
		}
	}
	return true
}

// peek returns the next byte that is not white space, or 0 at the end.
func (d *decoder) peek() byte {
	if d.skipSpace() {
		return 0
	}
	return d.s[d.i]
}

// more reports whether another member or element follows in an object or
// a list whose n members or elements have been read, and consumes the
// separator, or the closing bracket end.
func (d *decoder) more(end byte, n int) bool {
	c := d.peek()
	if d.err != nil {
		return false
	}
	if c == end {
		d.i++
		return false
	}
	if n > 0 {
		if c != ',' {
			d.fail(errSyntax)
			return false
		}
		d.i++
	}
	return true
}

// key reads an object's key and the colon after it.
func (d *decoder) key() string {
	if d.peek() != '"' {
		d.fail(errSyntax)
		return ""
	}
	k := d.str()
	if d.peek() != ':' {
		d.fail(errSyntax)
		return ""
	}
	d.i++
	return k
}

// str reads a string at d.i (an opening quote). One with no escape and
// valid UTF-8 is a substring of the text; any other is decoded as
// encoding/json decodes it.
func (d *decoder) str() string {
	start := d.i + 1
	for j := start; j < len(d.s); j++ {
		switch d.s[j] {
		case '"':
			if s := d.s[start:j]; utf8.ValidString(s) {
				d.i = j + 1
				return s
			}
			return d.strSlow()
		case '\\':
			return d.strSlow()
		}
	}
	d.fail(errSyntax)
	return ""
}

func (d *decoder) strSlow() string {
	start := d.i
	d.skipString()
	var s string
	if d.err == nil {
		if err := json.Unmarshal([]byte(d.s[start:d.i]), &s); err != nil {
			d.fail(errSyntax)
		}
	}
	return s
}

// skipString moves past the string at d.i.
func (d *decoder) skipString() {
	for j := d.i + 1; j < len(d.s); j++ {
		switch d.s[j] {
		case '"':
			d.i = j + 1
			return
		case '\\':
			j++
		}
	}
	d.i = len(d.s)
	d.fail(errSyntax)
}

// literal returns the number, true, false or null at d.i.
func (d *decoder) literal() string {
	start := d.i
	for d.i < len(d.s) {
		c := d.s[d.i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'z') && c != '-' && c != '+' && c != '.' && c != 'E' {
			break
		}
		d.i++
	}
	if d.i == start {
		d.fail(errSyntax)
	}
	return d.s[start:d.i]
}

// skip moves past the value at d.i.
func (d *decoder) skip() {
	depth := 0
	for d.err == nil {
		switch d.peek() {
		case 0:
			d.fail(errSyntax)
		case '"':
			d.skipString()
		case '{', '[':
			d.i++
			depth++
			continue
		case '}', ']':
			d.i++
			depth--
		case ',', ':':
			d.i++
			continue
		default:
			d.literal()
		}
		if depth <= 0 {
			return
		}
	}
}

func (d *decoder) push(p pathPart) { d.path = append(d.path, p) }
func (d *decoder) pop()            { d.path = d.path[:len(d.path)-1] }

// wrong records that the value at d.i is not of the type wanted, and moves
// past it.
func (d *decoder) wrong(want string) {
	start := d.i
	d.skip()
	if d.err != nil {
		return
	}
	var path strings.Builder
	for _, p := range d.path {
		switch p.kind {
		case '.':
			if path.Len() > 0 {
				path.WriteByte('.')
			}
			path.WriteString(p.name)
		case '[':
			path.WriteString("[" + strconv.Itoa(p.index) + "]")
		default:
			path.WriteString("[" + strconv.Quote(p.name) + "]")
		}
	}
	got := d.s[start:d.i]
	what := jsonWhat(got[0])
	switch got[0] {
	case '"', 't', 'f', '[', '{':
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		what = "the number " + got
		if len(got) > 40 {
			what = "a number of " + strconv.Itoa(len(got)) + " characters"
		}
	default:
		d.fail(errSyntax)
		return
	}
	d.err = fmt.Errorf("%s: attribute %s holds %s, not %s", d.addr, path.String(), what, want)
}

// value decodes the value at d.i. mark is after_unknown's mark at the same
// place: true for a value unknown until apply, an object or a list of
// marks for a collection with unknowns inside.
func (d *decoder) value(typ tftypes.Type, mark any) tftypes.Value {
	c := d.peek()
	if u, ok := mark.(bool); ok && u {
		d.skip()
		return tftypes.NewValue(typ, tftypes.UnknownValue)
	}
	if c == 'n' {
		if d.literal() != "null" {
			d.fail(errSyntax)
		}
		return tftypes.NewValue(typ, nil)
	}
	switch t := typ.(type) {
	case tftypes.Object:
		if c != '{' {
			d.wrong("an object")
			return tftypes.NewValue(typ, nil)
		}
		return d.object(typ, t, mark)
	case tftypes.List:
		if c != '[' {
			d.wrong("a list")
			return tftypes.NewValue(typ, nil)
		}
		marks, _ := mark.([]any)
		var elems []tftypes.Value
		d.i++
		for n := 0; d.more(']', n); n++ {
			var m any
			if n < len(marks) {
				m = marks[n]
			}
			d.push(pathPart{index: n, kind: '['})
			elems = append(elems, d.value(t.ElementType, m))
			d.pop()
		}
		if elems == nil {
			elems = []tftypes.Value{}
		}
		return tftypes.NewValue(typ, elems)
	case tftypes.Map:
		if c != '{' {
			d.wrong("a map")
			return tftypes.NewValue(typ, nil)
		}
		marks, _ := mark.(map[string]any)
		elems := map[string]tftypes.Value{}
		d.i++
		for n := 0; d.more('}', n); n++ {
			k := d.key()
			d.push(pathPart{name: k, kind: '"'})
			elems[k] = d.value(t.ElementType, marks[k])
			d.pop()
		}
		// Terraform leaves an entry whose value is unknown out of after and
		// marks it in after_unknown: it is an entry all the same (its key
		// is known), so the rules on keys see it, as the provider does.
		for k, m := range marks {
			if u, _ := m.(bool); u {
				if _, ok := elems[k]; !ok {
					elems[k] = tftypes.NewValue(t.ElementType, tftypes.UnknownValue)
				}
			}
		}
		return tftypes.NewValue(typ, elems)
	}
	switch {
	case typ.Is(stringType):
		if c == '"' {
			return d.cache.str(d.str())
		}
		d.wrong("a string")
	case typ.Is(numberType):
		if c == '-' || (c >= '0' && c <= '9') {
			start := d.i
			if v, ok := d.cache.number(d.literal()); ok {
				return v
			}
			d.i = start
		}
		d.wrong("a number")
	case typ.Is(boolType):
		if c == 't' || c == 'f' {
			switch d.literal() {
			case "true":
				return tftypes.NewValue(typ, true)
			case "false":
				return tftypes.NewValue(typ, false)
			}
			d.fail(errSyntax)
			return tftypes.NewValue(typ, nil)
		}
		d.wrong("a boolean")
	default:
		d.wrong(typ.String())
	}
	return tftypes.NewValue(typ, nil)
}

// object decodes the object at d.i into a value of t.
func (d *decoder) object(typ tftypes.Type, t tftypes.Object, mark any) tftypes.Value {
	marks, _ := mark.(map[string]any)
	attrs := make(map[string]tftypes.Value, len(t.AttributeTypes))
	d.i++
	for n := 0; d.more('}', n); n++ {
		k := d.key()
		at, ok := t.AttributeTypes[k]
		if !ok {
			d.skip()
			continue
		}
		d.push(pathPart{name: k, kind: '.'})
		attrs[k] = d.value(at, marks[k])
		d.pop()
	}
	if len(attrs) < len(t.AttributeTypes) {
		for k, at := range t.AttributeTypes {
			if _, ok := attrs[k]; ok {
				continue
			}
			if u, _ := marks[k].(bool); u {
				attrs[k] = tftypes.NewValue(at, tftypes.UnknownValue)
			} else {
				attrs[k] = tftypes.NewValue(at, nil)
			}
		}
	}
	return tftypes.NewValue(typ, attrs)
}

// parseNumber reads a JSON number at Terraform's precision, so that a
// number reads as written. A whole number of up to 18 digits, what plans
// mostly hold, takes a short way to the same value. One beyond
// big.Float's range is no number Terraform writes.
func parseNumber(text string) (*big.Float, bool) {
	if len(text) <= 18 && !strings.HasPrefix(text, "-0") {
		if n, err := strconv.ParseInt(text, 10, 64); err == nil {
			return new(big.Float).SetPrec(512).SetInt64(n), true
		}
	}
	f, _, err := big.ParseFloat(text, 10, 512, big.ToNearestEven)
	if err != nil || f.IsInf() {
		return nil, false
	}
	return f, true
}

// readMask reads after_unknown: nil where nothing is unknown, true where a
// value is unknown until apply, and for an object or a list with unknowns
// inside a map[string]any or []any of the marks inside. Any other mark
// (false, or what Terraform does not write there) is nil. A collection
// nested more than 64 deep is taken as unknown rather than trusted.
func readMask(raw jsonText) (any, error) {
	if raw == "{}" {
		return nil, nil
	}
	d := decoder{s: string(raw), addr: "after_unknown"}
	if d.skipSpace() {
		return nil, nil
	}
	switch c := d.s[d.i]; c {
	case '{', 't', 'f', 'n':
	default:
		return nil, fmt.Errorf("want an object or a boolean, got %s", jsonWhat(c))
	}
	m := d.mask(0)
	if d.err == nil && !d.skipSpace() {
		d.fail(errSyntax)
	}
	return m, d.err
}

func (d *decoder) mask(depth int) any {
	switch d.peek() {
	case '{':
		if depth > 64 {
			d.skip()
			return true
		}
		var m map[string]any
		d.i++
		for n := 0; d.more('}', n); n++ {
			k := d.key()
			if v := d.mask(depth + 1); v != nil && d.err == nil {
				if m == nil {
					m = map[string]any{}
				}
				m[k] = v
			}
		}
		if m == nil {
			return nil
		}
		return m
	case '[':
		if depth > 64 {
			d.skip()
			return true
		}
		var l []any
		found := false
		d.i++
		for n := 0; d.more(']', n); n++ {
			v := d.mask(depth + 1)
			found = found || v != nil
			l = append(l, v)
		}
		if !found {
			return nil
		}
		return l
	case 't':
		if d.literal() == "true" {
			return true
		}
		d.fail(errSyntax)
	case '"':
		d.skipString()
	default:
		d.literal()
	}
	return nil
}

// containsTrue reports whether a mark readMask returned says that
// anything at or inside its place is unknown.
func containsTrue(mark any) bool {
	switch x := mark.(type) {
	case bool:
		return x
	case map[string]any:
		for _, s := range x {
			if containsTrue(s) {
				return true
			}
		}
	case []any:
		for _, s := range x {
			if containsTrue(s) {
				return true
			}
		}
	}
	return false
}
