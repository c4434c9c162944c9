package inputs_test

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

var (
	varName     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
	headerToken = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}$")
)

// Any brokered secret, however malformed, builds, renders a spec that
// parses back to the same digest, and is decided without an evaluation
// error or panic. What the bundle accepts keeps the broker's contract
// (one valid header, a format holding the value once on one line), and no
// finding repeats a key that is not a variable name.
func FuzzBrokeredSecret(f *testing.F) {
	eng, err := policy.New(f.Context(), nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add("GITHUB_TOKEN", "api.github.com", "Authorization", "Bearer %s")
	f.Add("sk-proj-Zq3vN8wLk2Xr7tY1pQ9sM4bH6", "198.51.100.7", "Host", "%s%s")
	f.Add("", "*.example.com", "X Key", "a\r\nb %s")
	f.Add("K", "bücher.example", "content-length", "100% %s")
	f.Add("\x00", "", "", "\u00e9\t%s")
	f.Fuzz(func(t *testing.T, name, host, header, format string) {
		// Terraform strings are UTF-8; JSON would replace anything else
		// (as for every string of a spec), so the round trip is moot.
		for _, s := range []string{name, host, header, format} {
			if !utf8.ValidString(s) {
				return
			}
		}
		tmpl := inputs.Template{Name: "t", Backend: "docker://?egress=gateway", Image: "img", Allow: []string{host},
			BrokeredSecrets: map[string]model.BrokeredSecret{name: {Hosts: []string{host, host}, Header: header, Format: format}}}
		spec, in, err := tmpl.Build("")
		if err != nil {
			t.Fatalf("build: %v", err)
		}
		canon, sum, err := spec.Canonical()
		if err != nil {
			t.Fatalf("canonical: %v", err)
		}
		back, err := model.ParseSpec(canon)
		if err != nil {
			t.Fatalf("the canonical spec does not parse back: %v\n%s", err, canon)
		}
		if _, sum2, _ := back.Canonical(); sum2 != sum {
			t.Fatalf("round trip changed the digest")
		}
		d, err := eng.Evaluate(t.Context(), in)
		if err != nil {
			t.Fatalf("evaluate: %v", err)
		}
		if !varName.MatchString(name) && len(name) >= 6 {
			for _, f := range d.Denies {
				if strings.Contains(f.Message, name) || strings.Contains(f.Fix, name) {
					t.Fatalf("%s repeats a key that is not a variable name: %q", f.ID, f.Message)
				}
			}
		}
		if !d.Allowed() {
			return
		}
		b := back.BrokeredSecrets[name]
		forbidden := backends.BrokerForbiddenHeaders()[strings.ToLower(b.Header)]
		if !varName.MatchString(name) || !headerToken.MatchString(b.Header) || forbidden != "" ||
			strings.Count(b.Format, "%") != 1 || !strings.Contains(b.Format, "%s") || strings.ContainsAny(b.Format, "\r\n\x00") {
			t.Fatalf("accepted a brokered secret the broker could not hold to: %q %+v", name, b)
		}
	})
}
