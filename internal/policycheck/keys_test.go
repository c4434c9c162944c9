package policycheck

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// Duplicate keys are found at every depth, compared as decoded, and named
// by their path; keys that only look alike (case, other objects) are not.
func TestCheckKeys(t *testing.T) {
	many := `{"m":{`
	for i := range 40 {
		many += `"k` + strings.Repeat("x", i) + `":1,`
	}
	for name, tc := range map[string]struct{ json, want string }{
		"top level":        {`{"a":1,"a":2}`, `"a" appears twice at the top level`},
		"nested":           {`{"r":[{"c":{"after":{"x":1}}},{"c":{"after":{"x":1,"x":2}}}]}`, `in r[1].c.after (at r[1].c.after.x,`},
		"escaped":          {`{"o":{"egress":"deny","\u0065gress":"allow"}}`, `"egress" appears twice in o`},
		"quoted path":      {`{"labels":{"a.b":{"k":1,"k":2}}}`, `labels["a.b"].k`},
		"large object":     {many + `"kxx":2}}`, `"kxx" appears twice in m`},
		"case differs":     {`{"a":{"A":1,"a":2}}`, ``},
		"same key, others": {`{"a":{"x":1},"b":{"x":1},"c":[{"x":1},{"x":2}]}`, ``},
		"invalid JSON":     {`{"a":1,"a":`, ``},
	} {
		err := checkKeys([]byte(tc.json))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want %q", name, err, tc.want)
		}
	}
}

// FuzzCheckKeys: checkKeys finds a duplicate key exactly when JSON's own
// tokens show one, and says nothing about what is not JSON (the decoder
// reports that), although it no longer validates before it scans.
func FuzzCheckKeys(f *testing.F) {
	for _, s := range []string{`{"a":1,"a":2}`, `{"r":[{"c":{"x":1}},{"c":{"x":1,"x":2}}]}`, `{"o":{"egress":"d","\u0065gress":"a"}}`,
		`{"a":{"A":1,"a":2}}`, `{"a":1,"a":`, `}{"a":1,"a":2}`, `{"a":"\`, `[{"a":[],"b":{},"a":"x"}]`, `"a"`, `{"a\"":1,"a\\":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := checkKeys(data)
		if !json.Valid(data) {
			if err != nil {
				t.Fatalf("invalid JSON refused for a duplicate key: %v", err)
			}
			return
		}
		if want := duplicateByTokens(data); (err != nil) != want {
			t.Fatalf("checkKeys: %v; tokens show a duplicate: %v", err, want)
		}
	})
}

// duplicateByTokens finds a duplicate key with encoding/json's tokens.
func duplicateByTokens(data []byte) bool {
	type frame struct {
		keys      map[string]bool // nil for an array
		expectKey bool
	}
	var stack []*frame
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				stack = append(stack, &frame{keys: map[string]bool{}, expectKey: true})
				continue
			case '[':
				stack = append(stack, &frame{})
				continue
			}
			stack = stack[:len(stack)-1]
		case string:
			if n := len(stack); n > 0 && stack[n-1].keys != nil && stack[n-1].expectKey {
				top := stack[n-1]
				if top.keys[v] {
					return true
				}
				top.keys[v], top.expectKey = true, false
				continue
			}
		}
		if n := len(stack); n > 0 && stack[n-1].keys != nil {
			stack[n-1].expectKey = true
		}
	}
}
