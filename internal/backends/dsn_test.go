package backends_test

import (
	"errors"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	_ "github.com/sandboxio/terraform-provider-sandboxio/internal/backends/all"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// canary stands for a secret. No error may ever repeat it, in any case, nor
// either of its distinctive halves.
const canary = "CANARY-s3cr3t-9f8e7d"

// canaryEncoded is the canary percent-encoded throughout.
const canaryEncoded = "%43%41%4E%41%52%59%2D%73%33%63%72%33%74%2D%39%66%38%65%37%64"

// leaks reports whether an error text repeats the canary or a part of it.
func leaks(text string) bool {
	low := strings.ToLower(text)
	for _, part := range []string{strings.ToLower(canary), "s3cr3t", "9f8e7d", strings.ToLower(canaryEncoded)} {
		if strings.Contains(low, part) {
			return true
		}
	}
	return false
}

// checkDSNError asserts the shape every DSN refusal shares and returns it.
func checkDSNError(t *testing.T, in string, err error, rule string) *model.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("ParseDSN(%q): no error, want %s", in, rule)
	}
	var me *model.Error
	if !errors.As(err, &me) {
		t.Fatalf("ParseDSN(%q): error %T is not a *model.Error", in, err)
	}
	if !errors.Is(err, model.ErrConfiguration) || me.Class != model.ErrConfiguration {
		t.Errorf("ParseDSN(%q): class %s, want ConfigurationError", in, me.Class)
	}
	if me.Rule != rule {
		t.Errorf("ParseDSN(%q): rule %s, want %s (%v)", in, me.Rule, rule, err)
	}
	if me.Attribute != "backend" {
		t.Errorf("ParseDSN(%q): attribute %q, want backend", in, me.Attribute)
	}
	if me.Message == "" || me.Fix == "" {
		t.Errorf("ParseDSN(%q): empty message or fix: %v", in, err)
	}
	if me.Err != nil {
		t.Errorf("ParseDSN(%q): wraps %v; DSN errors must not wrap parser errors that quote the input", in, me.Err)
	}
	if leaks(err.Error()) {
		t.Errorf("ParseDSN(%q): error repeats the secret: %v", in, err)
	}
	return me
}

func TestParseDSNValid(t *testing.T) {
	tests := []struct {
		in   string
		want backends.DSN
		norm string
	}{
		{"docker://", backends.DSN{Scheme: "docker"}, "docker://"},
		{"DOCKER://", backends.DSN{Scheme: "docker"}, "docker://"},
		{"docker://?", backends.DSN{Scheme: "docker"}, "docker://"},
		{"Docker://?runtime=runsc", backends.DSN{Scheme: "docker", Options: map[string]string{"runtime": "runsc"}}, "docker://?runtime=runsc"},
		{"docker://?runtime=kata&disk_strategy=tmpfs", backends.DSN{Scheme: "docker", Options: map[string]string{"runtime": "kata", "disk_strategy": "tmpfs"}},
			"docker://?disk_strategy=tmpfs&runtime=kata"},
		{"docker://?&runtime=runc&&disk_strategy=storage-opt&", backends.DSN{Scheme: "docker", Options: map[string]string{"runtime": "runc", "disk_strategy": "storage-opt"}},
			"docker://?disk_strategy=storage-opt&runtime=runc"},
		{"docker://?disk_strategy=auto", backends.DSN{Scheme: "docker", Options: map[string]string{"disk_strategy": "auto"}}, "docker://?disk_strategy=auto"},
		{"e2b://", backends.DSN{Scheme: "e2b"}, "e2b://"},
		{"E2B://?domain=E2B.app&request_timeout=030", backends.DSN{Scheme: "e2b", Options: map[string]string{"domain": "e2b.app", "request_timeout": "30"}},
			"e2b://?domain=e2b.app&request_timeout=30"},
		{"e2b://?domain=cn-hangzhou.sandbox.example.com", backends.DSN{Scheme: "e2b", Options: map[string]string{"domain": "cn-hangzhou.sandbox.example.com"}},
			"e2b://?domain=cn-hangzhou.sandbox.example.com"},
		{"modal://my-app", backends.DSN{Scheme: "modal", App: "my-app"}, "modal://my-app"},
		{"modal://My_App.v2?region=us-east&environment=prod", backends.DSN{Scheme: "modal", App: "My_App.v2", Options: map[string]string{"environment": "prod", "region": "us-east"}},
			"modal://My_App.v2?environment=prod&region=us-east"},
		{"modal://ak-my-long-application-name", backends.DSN{Scheme: "modal", App: "ak-my-long-application-name"}, "modal://ak-my-long-application-name"},
		{"vercel://acme/web", backends.DSN{Scheme: "vercel", Team: "acme", Project: "web"}, "vercel://acme/web"},
		{"vercel://team_4fQ2xR8kLm3NpZ7yWv1Bc9Dt/prj_Xk29aLm4Pq7RtY1zWn3Bv8Cd5Ef?region=iad1",
			backends.DSN{Scheme: "vercel", Team: "team_4fQ2xR8kLm3NpZ7yWv1Bc9Dt", Project: "prj_Xk29aLm4Pq7RtY1zWn3Bv8Cd5Ef", Options: map[string]string{"region": "iad1"}},
			"vercel://team_4fQ2xR8kLm3NpZ7yWv1Bc9Dt/prj_Xk29aLm4Pq7RtY1zWn3Bv8Cd5Ef?region=iad1"},
		{"kubernetes://prod/sandboxes", backends.DSN{Scheme: "kubernetes", Context: "prod", Namespace: "sandboxes"}, "kubernetes://prod/sandboxes"},
		// Context names come from kubeconfigs: an EKS ARN.
		{"kubernetes://arn:aws:eks:us-east-1:123456789012:cluster%2Fprod/sbx-1?runtime_class=gvisor",
			backends.DSN{Scheme: "kubernetes", Context: "arn:aws:eks:us-east-1:123456789012:cluster/prod", Namespace: "sbx-1", Options: map[string]string{"runtime_class": "gvisor"}},
			"kubernetes://arn:aws:eks:us-east-1:123456789012:cluster%2Fprod/sbx-1?runtime_class=gvisor"},
		{"kubernetes://in-cluster/sandboxes", backends.DSN{Scheme: "kubernetes", Context: "in-cluster", Namespace: "sandboxes"}, "kubernetes://in-cluster/sandboxes"},
		{"daytona://", backends.DSN{Scheme: "daytona"}, "daytona://"},
		{"daytona://?target=us&api_url=https://app.daytona.io/api", backends.DSN{Scheme: "daytona", Options: map[string]string{"target": "us", "api_url": "https://app.daytona.io/api"}},
			"daytona://?api_url=https%3A%2F%2Fapp.daytona.io%2Fapi&target=us"},
		{"daytona://?api_url=https%3A%2F%2Fapp.daytona.io%2Fapi", backends.DSN{Scheme: "daytona", Options: map[string]string{"api_url": "https://app.daytona.io/api"}},
			"daytona://?api_url=https%3A%2F%2Fapp.daytona.io%2Fapi"},
		{"daytona://?api_url=http://localhost:3000/api", backends.DSN{Scheme: "daytona", Options: map[string]string{"api_url": "http://localhost:3000/api"}},
			"daytona://?api_url=http%3A%2F%2Flocalhost%3A3000%2Fapi"},
		// The canary outside a credential position is an ordinary name.
		{"modal://" + canary, backends.DSN{Scheme: "modal", App: canary}, "modal://" + canary},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := backends.ParseDSN(tt.in)
			if err != nil {
				t.Fatalf("ParseDSN(%q): %v", tt.in, err)
			}
			if tt.want.Options == nil {
				tt.want.Options = map[string]string{}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseDSN(%q) = %#v, want %#v", tt.in, got, tt.want)
			}
			if got.String() != tt.norm {
				t.Errorf("String() = %q, want %q", got.String(), tt.norm)
			}
			again, err := backends.ParseDSN(got.String())
			if err != nil || !reflect.DeepEqual(again, got) {
				t.Errorf("round trip of %q: %#v, %v", got.String(), again, err)
			}
		})
	}
}

// Every Docker runtime of the capability data is a valid runtime option.
func TestParseDSNDockerRuntimesFromCapabilities(t *testing.T) {
	n := 0
	for _, key := range backends.Keys() {
		rt, ok := strings.CutPrefix(key, "docker/")
		if !ok {
			continue
		}
		n++
		dsn := "docker://?runtime=" + rt
		if r, variant, ok := strings.Cut(rt, "+"); ok {
			dsn = "docker://?egress=" + variant + "&runtime=" + r
		}
		d, err := backends.ParseDSN(dsn)
		if err != nil {
			t.Fatalf("runtime %s: %v", rt, err)
		}
		if got := d.CapabilityKey(""); got != key {
			t.Errorf("runtime %s: CapabilityKey = %s, want %s", rt, got, key)
		}
	}
	if n == 0 {
		t.Fatal("capability data has no docker runtime")
	}
}

func TestParseDSNErrors(t *testing.T) {
	tests := []struct {
		in   string
		rule string
		want []string // substrings of the error text
	}{
		// SBX-DSN-001: not a DSN, or an unknown scheme.
		{"", rules.DSNUnknown, []string{"empty", "docker://", "e2b://", "modal://APP", "vercel://TEAM/PROJECT", "daytona://"}},
		{"   ", rules.DSNUnknown, []string{"empty"}},
		{"not a dsn", rules.DSNUnknown, []string{"modal://APP"}},
		{"redis://localhost", rules.DSNUnknown, []string{`"redis"`, "vercel://TEAM/PROJECT"}},
		{"http://example.com/", rules.DSNUnknown, []string{`"http"`}},
		{"://", rules.DSNUnknown, []string{"unknown scheme"}},
		{"k8s://cluster", rules.DSNUnknown, []string{"unknown scheme"}},
		{"fly.io:app", rules.DSNUnknown, []string{"SCHEME://"}},

		// SBX-DSN-002: malformed for its scheme.
		{"docker", rules.DSNMalformed, []string{"lacks ://", "docker://"}},
		{"docker:", rules.DSNMalformed, []string{"lacks ://"}},
		{"modal:app", rules.DSNMalformed, []string{"modal://APP"}},
		{"vercel:/acme/web", rules.DSNMalformed, []string{"vercel://TEAM/PROJECT"}},
		{" docker://", rules.DSNMalformed, []string{"whitespace"}},
		{"docker://\n", rules.DSNMalformed, []string{"whitespace"}},
		{"docker://?runtime=runc\t", rules.DSNMalformed, []string{"whitespace"}},
		{"modal://my app", rules.DSNMalformed, []string{"space"}},
		{"modal://app\x00", rules.DSNMalformed, []string{"control"}},
		{"modal://äpp", rules.DSNMalformed, []string{"non-ASCII"}},
		{"docker://localhost:2375", rules.DSNMalformed, []string{"host", "DOCKER_HOST"}},
		{"docker://unix", rules.DSNMalformed, []string{"host", "DOCKER_HOST"}},
		{"docker://:2375", rules.DSNMalformed, []string{"host"}},
		{"docker:///", rules.DSNMalformed, []string{"path"}},
		{"docker:///var/run/docker.sock", rules.DSNMalformed, []string{"path"}},
		{"docker://#", rules.DSNMalformed, []string{"fragment"}},
		{"docker://?runtime=runsc#x", rules.DSNMalformed, []string{"fragment"}},
		{"e2b://api.e2b.dev", rules.DSNMalformed, []string{"host", "domain"}},
		{"e2b:///", rules.DSNMalformed, []string{"path"}},
		{"daytona://app.daytona.io", rules.DSNMalformed, []string{"host", "api_url"}},
		{"modal://", rules.DSNMalformed, []string{"lacks the Modal app name", "modal://APP"}},
		{"modal://?environment=prod", rules.DSNMalformed, []string{"lacks the Modal app name"}},
		{"modal:///app", rules.DSNMalformed, []string{"lacks the Modal app name"}},
		{"modal://app/", rules.DSNMalformed, []string{"path", "modal://APP"}},
		{"modal://app/extra", rules.DSNMalformed, []string{"path"}},
		{"modal://app:8080", rules.DSNMalformed, []string{"invalid app name"}},
		{"modal://.hidden", rules.DSNMalformed, []string{"invalid app name"}},
		{"modal://a%2Fb", rules.DSNMalformed, []string{"invalid app name"}},
		{"modal://" + strings.Repeat("a", 65), rules.DSNMalformed, []string{"invalid app name"}},
		{"kubernetes://", rules.DSNMalformed, []string{"lacks the kubeconfig context", "kubernetes://CONTEXT/NAMESPACE"}},
		{"kubernetes://prod", rules.DSNMalformed, []string{"lacks the namespace"}},
		{"kubernetes://prod/", rules.DSNMalformed, []string{"lacks the namespace"}},
		{"kubernetes:///sandboxes", rules.DSNMalformed, []string{"lacks the kubeconfig context"}},
		{"kubernetes://prod/sbx/extra", rules.DSNMalformed, []string{"path parts after the namespace"}},
		{"kubernetes://prod/Sandboxes", rules.DSNMalformed, []string{"invalid namespace", "lower-case"}},
		{"kubernetes://prod/-sbx", rules.DSNMalformed, []string{"invalid namespace"}},
		{"kubernetes://prod/" + strings.Repeat("a", 64), rules.DSNMalformed, []string{"invalid namespace"}},
		{"kubernetes://bad%zz/sbx", rules.DSNMalformed, []string{"invalid context", "percent-encoding"}},
		{"kubernetes://ctl%0A/sbx", rules.DSNMalformed, []string{"invalid context"}},
		{"vercel://", rules.DSNMalformed, []string{"lacks the team", "vercel://TEAM/PROJECT"}},
		{"vercel://acme", rules.DSNMalformed, []string{"lacks the project"}},
		{"vercel://acme/", rules.DSNMalformed, []string{"lacks the project"}},
		{"vercel:///web", rules.DSNMalformed, []string{"lacks the team"}},
		{"vercel://acme/web/extra", rules.DSNMalformed, []string{"path parts after the project"}},
		{"vercel://acme/web/", rules.DSNMalformed, []string{"path parts after the project"}},
		{"vercel://ac me/web", rules.DSNMalformed, []string{"space"}},
		{"vercel://acme/w*b", rules.DSNMalformed, []string{"invalid team or project"}},
		{"docker://?runtime", rules.DSNMalformed, []string{"no value for option runtime"}},
		{"docker://?runtime=", rules.DSNMalformed, []string{"no value for option runtime"}},
		{"docker://?runtime=gvisor", rules.DSNMalformed, []string{"invalid value for option runtime", "kata", "runc", "runsc"}},
		{"docker://?disk_strategy=xfs", rules.DSNMalformed, []string{"auto", "storage-opt", "tmpfs"}},
		{"docker://?runtime=runc&runtime=runsc", rules.DSNMalformed, []string{"twice"}},
		{"docker://?runtime=runc;disk_strategy=auto", rules.DSNMalformed, []string{"';'", "'&'"}},
		{"docker://?runtime=%zz", rules.DSNMalformed, []string{"%-escape"}},
		{"docker://?%zz=1", rules.DSNMalformed, []string{"%-escape"}},
		{"docker://?runtime=run%0Ac", rules.DSNMalformed, []string{"invalid value"}},
		{"docker://?runtime=run+c", rules.DSNMalformed, []string{"invalid value"}},
		{"e2b://?request_timeout=0", rules.DSNMalformed, []string{"request_timeout", "seconds"}},
		{"e2b://?request_timeout=3601", rules.DSNMalformed, []string{"request_timeout"}},
		{"e2b://?request_timeout=30s", rules.DSNMalformed, []string{"request_timeout"}},
		{"e2b://?domain=localhost", rules.DSNMalformed, []string{"domain", "DNS name"}},
		{"e2b://?domain=-bad.example", rules.DSNMalformed, []string{"domain"}},
		{"e2b://?domain=e2b.app:443", rules.DSNMalformed, []string{"domain"}},
		{"modal://app?region=US", rules.DSNMalformed, []string{"region"}},
		{"modal://app?environment=-x", rules.DSNMalformed, []string{"environment"}},
		{"vercel://acme/web?region=us-east-1", rules.DSNMalformed, []string{"region", "iad1"}},
		{"daytona://?target=US", rules.DSNMalformed, []string{"target"}},
		{"daytona://?api_url=http://example.com/api", rules.DSNMalformed, []string{"api_url", "https"}},
		{"daytona://?api_url=ftp://example.com", rules.DSNMalformed, []string{"api_url"}},
		{"daytona://?api_url=https:opaque", rules.DSNMalformed, []string{"api_url"}},
		{"daytona://?api_url=/relative", rules.DSNMalformed, []string{"api_url"}},
		{"daytona://?api_url=https://example.com/api?x=1", rules.DSNMalformed, []string{"api_url"}},
		{"daytona://?api_url=https%3A%2F%2Fexample.com%2Fapi%23frag", rules.DSNMalformed, []string{"api_url"}},

		// SBX-DSN-004: unknown option, with the allowed ones listed.
		{"docker://?network=none", rules.DSNOption, []string{`"network"`, "runtime (one of kata, runc, runsc)", "disk_strategy"}},
		{"docker://?Runtime=runsc", rules.DSNOption, []string{"does not know", "lower case"}},
		{"e2b://?template=base", rules.DSNOption, []string{`"template"`, "domain", "request_timeout"}},
		{"modal://app?regoin=us", rules.DSNOption, []string{`"regoin"`, "environment", "region"}},
		{"vercel://acme/web?team=acme", rules.DSNOption, []string{`"team"`, "region"}},
		{"daytona://?server_url=https://x.io", rules.DSNOption, []string{`"server_url"`, "api_url", "target"}},
		{"docker://?" + canary + "=1", rules.DSNOption, []string{"does not know"}},
		{"docker://?" + canary, rules.DSNOption, []string{"does not know"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := backends.ParseDSN(tt.in)
			_ = checkDSNError(t, tt.in, err, tt.rule)
			if err == nil {
				return
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("ParseDSN(%q): error %q lacks %q", tt.in, err, w)
				}
			}
		})
	}
}

// credentialKeys are option names that must be refused as credentials.
var credentialKeys = []string{
	"key", "api_key", "apikey", "API_KEY", "Api-Key", "api-key", "apiKey", "x-api-key", "X-API-KEY",
	"token", "Token", "access_token", "accessToken", "auth_token", "id_token", "refresh_token",
	"session_token", "x-auth-token", "secret", "client_secret", "clientSecret", "secret_key",
	"password", "Password", "passwd", "pass", "pwd", "auth", "Authorization", "basic_auth",
	"credential", "credentials", "creds", "access_key", "accessKey", "access_key_id",
	"aws_secret_access_key", "private_key", "privateKey", "bearer", "sig", "signature", "jwt",
	"cookie", "modal_token_secret", "e2b.api.key", "api%5Fkey", "%74oken", "api%2Dkey",
}

// dsnBases is one valid DSN of every scheme, the env vars its credentials
// come from, and how to append a query.
var dsnBases = []struct {
	dsn string
	env []string
}{
	{"docker://", []string{"DOCKER_HOST", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH"}},
	{"e2b://", []string{"E2B_API_KEY"}},
	{"modal://app", []string{"MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET"}},
	{"vercel://acme/web", []string{"VERCEL_OIDC_TOKEN", "VERCEL_TOKEN"}},
	{"daytona://", []string{"DAYTONA_API_KEY"}},
	{"kubernetes://prod/sbx", []string{"KUBECONFIG"}},
}

// kubeadm names its context kubernetes-admin@kubernetes: refused like any
// '@', with a fix that says how to get a name a DSN can hold.
func TestParseDSNKubernetesContextWithAt(t *testing.T) {
	for _, in := range []string{"kubernetes://kubernetes-admin@kubernetes/sbx", "kubernetes://kubernetes-admin%40kubernetes/sbx"} {
		_, err := backends.ParseDSN(in)
		me := checkDSNError(t, in, err, rules.DSNCredential)
		if me != nil && !strings.Contains(me.Fix, "kubectl config rename-context") {
			t.Errorf("ParseDSN(%q): fix %q does not say how to rename the context", in, me.Fix)
		}
	}
}

// checkCredentialError asserts a credential refusal that names the env vars.
func checkCredentialError(t *testing.T, in string, err error, env []string) {
	t.Helper()
	me := checkDSNError(t, in, err, rules.DSNCredential)
	if me == nil {
		return
	}
	for _, v := range env {
		if !strings.Contains(me.Fix, v) {
			t.Errorf("ParseDSN(%q): fix %q does not name %s", in, me.Fix, v)
		}
	}
}

func TestParseDSNCredentialOptions(t *testing.T) {
	values := []string{canary, canaryEncoded, "x", ""}
	n := 0
	for _, b := range dsnBases {
		for _, k := range credentialKeys {
			for _, v := range values {
				for _, form := range []string{"?%s=%s", "?runtime=runc&%s=%s", "?%s=%s&region=us"} {
					q := strings.Replace(strings.Replace(form, "%s", k, 1), "%s", v, 1)
					in := b.dsn + q
					_, err := backends.ParseDSN(in)
					checkCredentialError(t, in, err, b.env)
					n++
				}
			}
		}
	}
	t.Logf("%d credential option cases", n)
}

func TestParseDSNCredentialUserinfo(t *testing.T) {
	for _, b := range dsnBases {
		scheme, target, _ := strings.Cut(b.dsn, "://")
		host := target
		if host == "" {
			host = "host:2376"
		}
		for _, in := range []string{
			scheme + "://user:" + canary + "@" + host,
			scheme + "://" + canary + ":pw@" + host,
			scheme + "://" + canary + "@" + host,
			scheme + "://:" + canary + "@" + host,
			scheme + "://user:" + canaryEncoded + "@" + host,
			scheme + "://user:CANARY%40s3cr3t-9f8e7d@" + host,
			scheme + "://user:CANARY/s3cr3t-9f8e7d@" + host,
			scheme + "://user:CANARY?s3cr3t-9f8e7d@" + host,
			scheme + "://user:CANARY#s3cr3t-9f8e7d@" + host,
			scheme + "://user%3A" + canary + "%40" + host,
			scheme + "://user%3A" + canary + "%zz%40" + host,
			scheme + "://user%3A" + canary + "%40" + host + "?bad=%zz",
			scheme + "://@" + host,
			scheme + "://" + canary + "@",
			strings.ToUpper(scheme) + "://u:" + canary + "@" + host + "/extra?bogus=1#frag",
			" " + scheme + "://u:" + canary + "@" + host + " ",
			scheme + ":u:" + canary + "@" + host,
			scheme + "://?domain=" + canary + "@evil.example",
		} {
			_, err := backends.ParseDSN(in)
			checkCredentialError(t, in, err, b.env)
		}
	}
}

func TestParseDSNCredentialValues(t *testing.T) {
	tokens := []string{
		"sk-proj-Ab3dEf6hIj9kLm2nOp5q",
		"sk_e2b_4f8a9c2d1e3b5a7c9d0e",
		"e2b_4f8a9c2d1e3b5a7c9d0e1f2a3b4c",
		"ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
		"github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
		"AKIAIOSFODNN7EXAMPLE",
		"ak-1aB2cD3eF4gH5iJ6kL7mN8",
		"as-1aB2cD3eF4gH5iJ6kL7mN8",
		"dtn_0a1b2c3d4e5f6a7b8c9d0e1f",
		"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl",
		"0123456789abcdef0123456789abcdef01234567", // a hex digest
		"Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZmdo", // base64 text
	}
	for _, tok := range tokens {
		for _, in := range []string{
			"docker://?runtime=" + tok,
			"e2b://?domain=" + tok + ".example.com",
			"modal://" + tok,
			"modal://app?environment=" + tok,
			"vercel://" + tok + "/web",
			"vercel://acme/" + tok,
			"daytona://?api_url=https://app.daytona.io/" + tok,
			"daytona://?" + tok,
			"daytona://#" + tok,
		} {
			_, err := backends.ParseDSN(in)
			var me *model.Error
			if !errors.As(err, &me) || me.Rule != rules.DSNCredential {
				t.Errorf("ParseDSN(%q) = %v, want %s", in, err, rules.DSNCredential)
			}
		}
	}
	// Credentials nested in an option value that is itself a URL.
	for _, in := range []string{
		"daytona://?api_url=https%3A%2F%2Fu%3A" + canary + "%40app.daytona.io",
		"daytona://?api_url=https%3A%2F%2Fapp.daytona.io%2Fapi%3Ftoken%3D" + canary,
		"daytona://?api_url=https%3A%2F%2Fapp.daytona.io%2Fapi%23access_token%3D" + canary,
		"daytona://?api_url=https://app.daytona.io/api?token=" + canary,
		"daytona://#access_token=" + canary,
		"daytona://?target=us#api_key=" + canary,
	} {
		_, err := backends.ParseDSN(in)
		checkCredentialError(t, in, err, []string{"DAYTONA_API_KEY"})
	}
}

// A credential in a DSN of an unknown scheme is still never repeated, and
// the fix says where credentials go.
func TestParseDSNUnknownSchemeWithCredential(t *testing.T) {
	tests := []struct {
		in       string
		pointEnv bool // the fix must point at environment variables
	}{
		{"redis://user:" + canary + "@localhost", true},
		{"https://api.example.com/?token=" + canary, true},
		{"https://api.example.com/?x=" + canaryEncoded + "@", true},
		{canary, true},
		{"token=" + canary, true},
		{canary + "://x", false},
		{strings.ToLower(canary) + "://x", false},
	}
	for _, tt := range tests {
		_, err := backends.ParseDSN(tt.in)
		me := checkDSNError(t, tt.in, err, rules.DSNUnknown)
		if me != nil && tt.pointEnv && !strings.Contains(me.Fix, "environment variables") {
			t.Errorf("ParseDSN(%q): fix %q does not point at environment variables", tt.in, me.Fix)
		}
	}
}

// No allowed option may look like a credential, or it could never be set.
func TestDSNOptionsAreNotCredentialNames(t *testing.T) {
	for _, name := range backends.Schemes() {
		opts := backends.DSNOptionNames(name)
		if len(opts) == 0 {
			t.Errorf("%s: no options", name)
		}
		for _, k := range opts {
			if w := backends.CredentialWord(k); w != "" {
				t.Errorf("%s option %s matches credential word %q", name, k, w)
			}
			if !backends.SafeEcho(k, 32) {
				t.Errorf("%s option %s would not be echoed", name, k)
			}
		}
	}
}

func TestDSNCredentialEnv(t *testing.T) {
	for _, b := range dsnBases {
		d, err := backends.ParseDSN(b.dsn)
		if err != nil {
			t.Fatal(err)
		}
		got := d.CredentialEnv()
		if !slices.Equal(got, b.env) {
			t.Errorf("%s: CredentialEnv = %v, want %v", b.dsn, got, b.env)
		}
		got[0] = "CHANGED"
		if d.CredentialEnv()[0] == "CHANGED" {
			t.Errorf("%s: CredentialEnv returns shared storage", b.dsn)
		}
	}
	if env := (backends.DSN{Scheme: "nope"}).CredentialEnv(); env != nil {
		t.Errorf("unknown scheme: CredentialEnv = %v, want nil", env)
	}
}

func TestDSNCapabilityKey(t *testing.T) {
	tests := []struct {
		dsn, runtime, want string
	}{
		{"docker://", "", "docker/runc"},
		{"docker://?runtime=runsc", "", "docker/runsc"},
		{"docker://?runtime=runsc", "kata", "docker/kata"},
		{"e2b://", "", "e2b"},
		{"modal://app", "", "modal"},
		{"vercel://acme/web", "", "vercel"},
		{"daytona://", "", "daytona"},
	}
	for _, tt := range tests {
		d, err := backends.ParseDSN(tt.dsn)
		if err != nil {
			t.Fatal(err)
		}
		got := d.CapabilityKey(tt.runtime)
		if got != tt.want {
			t.Errorf("%s runtime %q: CapabilityKey = %s, want %s", tt.dsn, tt.runtime, got, tt.want)
		}
		if _, ok := backends.Lookup(got); !ok {
			t.Errorf("%s: capability key %s is not in the capability data", tt.dsn, got)
		}
	}
}

func TestSecretish(t *testing.T) {
	for _, s := range []string{"my-app", "ak-my-long-application-name", "prod", "us-east", "app.daytona.io",
		"team_4fQ2xR8kLm3NpZ7yWv1Bc9Dt", "prj_Xk29aLm4Pq7RtY1zWn3Bv8Cd5Ef", "https://app.daytona.io/api", canary,
		"my-service-2024-production-deployment-v2"} {
		if backends.Secretish(s) {
			t.Errorf("Secretish(%q) = true, want false", s)
		}
	}
	for _, s := range []string{"sk-proj-Ab3dEf6hIj9kLm2nOp5q", "AKIAIOSFODNN7EXAMPLE", "x/0123456789abcdef0123456789abcdef", "sk%2Dproj%2DAb3dEf6hIj9kLm2nOp5q"} {
		if !backends.Secretish(s) {
			t.Errorf("Secretish(%q) = false, want true", s)
		}
	}
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		"":             "",
		"plain":        "plain",
		"a%40b":        "a@b",
		"a+b":          "a b",
		"%zz%40":       "%zz@",
		"%4":           "%4",
		"%":            "%",
		"%2a%2A":       "**",
		"api%5Fkey%25": "api_key%",
	} {
		if got := backends.Unescape(in); got != want {
			t.Errorf("Unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTargetKeepsEndpointOptionsOnly(t *testing.T) {
	backends.Register(backends.Registration{Scheme: "targettest", DSN: backends.DSNSyntax{Form: "targettest://APP", Target: backends.TargetApp,
		Options: map[string]backends.DSNOption{"zone": backends.OneOf("a", "b"), "size": backends.OneOf("s", "l")}},
		EndpointOptions: []string{"zone"}})
	d, err := backends.ParseDSN("targettest://app1?zone=a&size=l")
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Target().String(); got != "targettest://app1?zone=a" {
		t.Fatalf("Target() = %q, want the app and the endpoint option only", got)
	}
}
