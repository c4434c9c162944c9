package backends_test

import (
	"errors"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	_ "github.com/sandboxio/terraform-provider-sandboxio/internal/backends/all"
	"reflect"
	"strings"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// FuzzParseDSN checks, for any input, that ParseDSN does not panic, that a
// refusal has the documented shape and never repeats the canary secret, and
// that an accepted DSN holds no '@' nor a credential-named option and
// round-trips through String.
//
// Besides the input itself it parses copies with the canary (plain and
// percent-encoded) spliced in at a few positions, so every mutation also
// tests the canary in whatever part of the DSN those positions fall.
func FuzzParseDSN(f *testing.F) {
	for _, seed := range []string{
		"", "docker://", "DOCKER://?runtime=runsc&disk_strategy=tmpfs", "e2b://?domain=e2b.app&request_timeout=30",
		"modal://app?environment=prod&region=us-east", "vercel://acme/web?region=iad1",
		"daytona://?target=us&api_url=https%3A%2F%2Fapp.daytona.io%2Fapi",
		"modal://user:" + canary + "@app", "modal://" + canary + "@app", "vercel://:" + canaryEncoded + "@acme/web",
		"docker://?token=" + canary, "e2b://?x-api-key=" + canaryEncoded, "modal://app?apiKey=" + canary,
		"daytona://?api_url=https%3A%2F%2Fu%3A" + canary + "%40h.io", "daytona://?api_url=https://h.io/?access_token=" + canary,
		"docker://#token=" + canary, "modal:u:" + canary + "@app", canary + "://x", "redis://u:" + canary + "@h",
		"docker://?" + canary, "modal://" + canary, "modal://app?environment=" + canary,
		"modal://sk-proj-Ab3dEf6hIj9kLm2nOp5q", "docker://?runtime=%zz", "docker://?a=1;b=2", " docker:// ",
		"modal://app/extra#frag", "vercel://acme/web/x", "docker://host:2375", "e2b://?domain=E2B.App",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkParse(t, s)
		if len(s) > 512 {
			return
		}
		step := len(s)/4 + 1
		for i := 0; i <= len(s); i += step {
			checkParse(t, s[:i]+canary+s[i:])
			checkParse(t, s[:i]+canaryEncoded+s[i:])
		}
	})
}

func checkParse(t *testing.T, s string) {
	d, err := backends.ParseDSN(s)
	if err != nil {
		var me *model.Error
		if !errors.As(err, &me) || me.Class != model.ErrConfiguration || me.Attribute != "backend" ||
			me.Message == "" || me.Fix == "" || me.Err != nil {
			t.Fatalf("ParseDSN(%q): malformed error %#v", s, err)
		}
		switch me.Rule {
		case rules.DSNUnknown, rules.DSNMalformed, rules.DSNCredential, rules.DSNOption:
		default:
			t.Fatalf("ParseDSN(%q): unknown rule %q", s, me.Rule)
		}
		if leaks(err.Error()) {
			t.Fatalf("ParseDSN(%q): error repeats the secret: %v", s, err)
		}
		return
	}
	if strings.Contains(s, "@") {
		t.Fatalf("ParseDSN(%q) accepted user-info", s)
	}
	for k, v := range d.Options {
		if backends.CredentialWord(k) != "" || backends.Secretish(v) || v == "" {
			t.Fatalf("ParseDSN(%q) accepted option %q", s, k)
		}
	}
	out := d.String()
	again, err := backends.ParseDSN(out)
	if err != nil {
		t.Fatalf("ParseDSN(%q) = %q, which does not parse: %v", s, out, err)
	}
	if !reflect.DeepEqual(again, d) || again.String() != out {
		t.Fatalf("ParseDSN(%q) = %#v, round trip %q gives %#v", s, d, out, again)
	}
}
