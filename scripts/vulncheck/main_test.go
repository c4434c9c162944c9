package main

import (
	"strings"
	"testing"
)

// A govulncheck -format json stream: one vulnerability the code calls
// (symbol-level trace), one it only imports (package-level trace), and the
// OSV entries for both.
const stream = `{"config":{"go_version":"go1.27.3","db":"file:///db","db_last_modified":"2026-11-05T00:00:00Z"}}
{"osv":{"id":"GO-0000-0001","summary":"called one"}}
{"osv":{"id":"GO-0000-0002","summary":"imported one"}}
{"osv":{"id":"GO-0000-0003","summary":"in the module graph only"}}
{"finding":{"osv":"GO-0000-0001","fixed_version":"v1.2.4","trace":[{"module":"example.com/m","version":"v1.2.3","package":"example.com/m/p","function":"F"},{"module":"ours","package":"ours/x","function":"G"}]}}
{"finding":{"osv":"GO-0000-0002","trace":[{"module":"example.com/n","version":"v0.1.0","package":"example.com/n/q"}]}}
`

func TestVerdict(t *testing.T) {
	rep, err := parse(strings.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	if rep.goVersion != "go1.27.3" || !rep.vulns["GO-0000-0001"].called || rep.vulns["GO-0000-0002"].called || !rep.vulns["GO-0000-0002"].found || rep.vulns["GO-0000-0003"].found {
		t.Fatalf("parse: %+v", rep)
	}
	for _, tc := range []struct {
		name  string
		allow map[string]string
		want  []string // substrings, one per problem; none: clean
	}{
		{"a called vulnerability fails", nil, []string{"GO-0000-0001: called one (example.com/m@v1.2.3; fixed in v1.2.4)"}},
		{"allowed with a reason", map[string]string{"GO-0000-0001": "does not apply"}, nil},
		{"an imported, uncalled one is no reason to allow", map[string]string{"GO-0000-0001": "x", "GO-0000-0002": "y"}, []string{"GO-0000-0002 is in the allowlist but no longer called"}},
		{"a stale entry fails", map[string]string{"GO-0000-0001": "x", "GO-0000-9999": "gone"}, []string{"GO-0000-9999 is in the allowlist but no longer called"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := verdict(rep, tc.allow)
			if len(got) != len(tc.want) {
				t.Fatalf("verdict = %q; want %d problems %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d = %q; want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}

func TestReadAllow(t *testing.T) {
	allow, err := readAllow(strings.NewReader("# comment\n\nGO-1 why it does not apply\n"))
	if err != nil || allow["GO-1"] != "why it does not apply" || len(allow) != 1 {
		t.Fatalf("readAllow = %v, %v", allow, err)
	}
	if _, err := readAllow(strings.NewReader("GO-2\n")); err == nil || !strings.Contains(err.Error(), "no reason") {
		t.Fatalf("an entry without a reason: err = %v", err)
	}
}
