package policycheck

import (
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
