//go:build linux

package docker

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/testing/netns"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// The broker's lab: test hosts in namespaces the test makes, nothing else.
var (
	bkAPI   = netip.MustParseAddr("198.18.1.130") // api.test: the secret's host
	bkOther = netip.MustParseAddr("198.18.1.131") // other.test: listed, not the secret's
	bkBad   = netip.MustParseAddr("198.18.1.132") // bad.test: the secret's too, with a certificate no root trusts
	bkDNS   = netip.MustParseAddr("198.18.1.153")
)

// bkCanary is the brokered secret's value: it must reach api.test in the
// Authorization header and nothing the sandbox can read.
const bkCanary = "sk-brokered-canary-3c9f1a7e5d2b8046"

type brokerLab struct {
	api, other, bad *netns.Echo
	mu              sync.Mutex
	audit           []model.BrokeredRequest
}

func (l *brokerLab) onBrokered(r model.BrokeredRequest) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.audit = append(l.audit, r)
}

func (l *brokerLab) records() []model.BrokeredRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.audit)
}

// newBrokerLab starts the test hosts and makes the gateways' brokers trust
// the lab's CA upstream (the product trusts the host's store).
func newBrokerLab(t *testing.T) *brokerLab {
	t.Helper()
	lab := netns.New(t, bkAPI, bkOther, bkBad, bkDNS)
	trusted, untrusted := netns.NewCA(t, "api.test", "other.test"), netns.NewCA(t, "bad.test")
	l := &brokerLab{api: lab.EchoHost(t, bkAPI, trusted), other: lab.EchoHost(t, bkOther, trusted), bad: lab.EchoHost(t, bkBad, untrusted)}
	dns := lab.DNSServer(t, bkDNS)
	dns.Set("api.test", netns.Static(bkAPI))
	dns.Set("other.test", netns.Static(bkOther))
	dns.Set("bad.test", netns.Static(bkBad))
	// The host's trust store holds the lab's CA (bad.test's is in none):
	// the broker verifies api.test with it, and the sandbox's bundle,
	// which starts from it, verifies other.test as a public host would.
	store := filepath.Join(t.TempDir(), "roots.pem")
	if err := os.WriteFile(store, trusted.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SSL_CERT_FILE", store)
	return l
}

// brokeredSpec is a probe sandbox on the gateway whose API_KEY is brokered
// to api.test and bad.test.
func brokeredSpec(t *testing.T) model.Spec {
	return testSpec(t, withProbe(t), brokered)
}

func brokered(s *model.Spec) {
	s.Backend = "docker://?egress=gateway&resolver=" + netip.AddrPortFrom(bkDNS, 53).String()
	s.Network = model.NetworkPolicy{Egress: model.EgressDeny, Allow: []string{"api.test", "other.test", "bad.test"}}.Normalized()
	s.BrokeredSecrets = model.NormalizeBrokered(map[string]model.BrokeredSecret{
		"API_KEY": {Hosts: []string{"api.test", "bad.test"}, Header: "Authorization", Format: "Bearer %s"}})
}

func openBrokered(t *testing.T, b *dockerBackend, l *brokerLab) *sandbox {
	t.Helper()
	return openRequest(t, b, backends.CreateRequest{Spec: brokeredSpec(t),
		Brokered: map[string]string{"API_KEY": bkCanary}, OnBrokered: l.onBrokered})
}

// egressprobe runs the test image's client with steps and returns each
// step's line (the step, a space, its outcome).
func egressprobe(t *testing.T, sb *sandbox, steps ...string) map[string]string {
	t.Helper()
	res, err := sb.Run(t.Context(), append([]string{"/bin/egressprobe"}, steps...), backends.RunOptions{Timeout: 90 * time.Second})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("egressprobe: %v exit %d: %s", err, res.ExitCode, res.Stderr)
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
		for _, s := range steps {
			if strings.HasPrefix(line, s+" ") {
				out[s] = strings.TrimPrefix(line, s+" ")
			}
		}
	}
	if len(out) != len(steps) {
		t.Fatalf("egressprobe printed %d outcomes for %d steps:\n%s%s", len(out), len(steps), res.Stdout, res.Stderr)
	}
	if strings.Contains(string(res.Stdout)+string(res.Stderr), bkCanary) {
		t.Fatalf("the value reached the sandbox's output:\n%s", res.Stdout)
	}
	return out
}

// In a real sandbox: the secret's host gets the value in the declared
// header over HTTP/1.1 and HTTP/2, while the sandbox's environment, /proc,
// files and output hold only the placeholder; an echo of the value comes
// back as the placeholder; every request is in the audit, never the value.
func TestBrokerWritesTheSecretOnlyForItsHost(t *testing.T) {
	needDocker(t)
	l := newBrokerLab(t)
	b := newTestBackend(t)
	sb := openBrokered(t, b, l)

	env := sh(t, sb, `echo "$API_KEY"; echo "$SSL_CERT_FILE $REQUESTS_CA_BUNDLE $NODE_EXTRA_CA_CERTS"`)
	lines := strings.Split(strings.TrimSpace(env), "\n")
	placeholder := lines[0]
	if len(placeholder) < 40 || placeholder == bkCanary || len(lines) != 2 {
		t.Fatalf("API_KEY in the sandbox is %q, want a placeholder", placeholder)
	}
	if lines[1] != caBundleTarget+" "+caBundleTarget+" "+brokerCATarget {
		t.Fatalf("the CA variables are %q", lines[1])
	}
	steps := []string{
		"h1:GET|https://api.test/echo|Authorization=Bearer $API_KEY|",
		"h2:GET|https://api.test/echo|Authorization=Bearer $API_KEY|",
		"h2:GET|https://api.test/sse|Authorization=Bearer $API_KEY|",
	}
	got := egressprobe(t, sb, steps...)
	for _, s := range steps[:2] {
		if !strings.Contains(got[s], "status=200") || !strings.Contains(got[s], `Authorization: Bearer `+placeholder) {
			t.Fatalf("%s: %s, want 200 with the placeholder echoed", s, got[s])
		}
	}
	if !strings.Contains(got[steps[0]], "proto=HTTP/1.1") || !strings.Contains(got[steps[1]], "proto=HTTP/2.0") {
		t.Fatalf("protocols: %s / %s", got[steps[0]], got[steps[1]])
	}
	// The host sends its three events 300 ms apart: passed on as they
	// come, the first arrives that long before the stream ends.
	var first, total int
	_, timing, _ := strings.Cut(got[steps[2]], " first_ms=")
	if _, err := fmt.Sscanf(timing, "%d total_ms=%d", &first, &total); err != nil ||
		!strings.Contains(got[steps[2]], `data: 2 Bearer `+placeholder) || total-first < 500 {
		t.Fatalf("events (first byte after %d ms, last after %d ms, want 500 ms or more apart): %s", first, total, got[steps[2]])
	}
	seen := l.api.Requests()
	if len(seen) != 3 {
		t.Fatalf("api.test got %d requests, want 3", len(seen))
	}
	for _, r := range seen {
		if r.Header.Get("Authorization") != "Bearer "+bkCanary {
			t.Fatalf("api.test got Authorization %q, want the real value", r.Header.Get("Authorization"))
		}
	}

	// Nothing the sandbox can read holds the value: the environment of
	// every process, its files and the CA bundle.
	// The value comes in on standard input and stays in the shell (ash's
	// read, case and printf are builtins), in no process's command line.
	// The environ and cmdline files are NUL-separated, which grep cannot
	// read.
	script := `read -r pat
cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep -c '^API_KEY='
for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do
	c=$(tr '\0' '\n' < "$f" 2>/dev/null)
	case "$c" in *"$pat"*) echo "found in $f";; esac
done
printf '%s\n' "$pat" | grep -rlF -f - /tmp /root /etc /.sandboxio-ca-bundle.pem /.sandboxio-broker-ca.pem 2>/dev/null
grep -l "PRIVATE KEY" /.sandboxio-ca-bundle.pem /.sandboxio-broker-ca.pem && echo "found a key"
grep -c "BEGIN CERTIFICATE" /.sandboxio-ca-bundle.pem /.sandboxio-broker-ca.pem
(echo x > /.sandboxio-ca-bundle.pem) 2>/dev/null && echo writable
true`
	res, err := sb.Run(t.Context(), []string{"sh", "-c", script}, backends.RunOptions{Timeout: 30 * time.Second, Stdin: []byte(bkCanary + "\n")})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("look: %v %+v", err, res)
	}
	look := string(res.Stdout)
	t.Logf("in the sandbox:\n%s", look)
	if strings.Contains(look, bkCanary) || strings.Contains(look, "writable") || strings.Contains(look, "found") {
		t.Fatalf("the sandbox can read the value or change its bundle:\n%s", look)
	}
	if !strings.Contains(look, brokerCATarget+":1") || !strings.Contains(look, caBundleTarget+":2") {
		t.Fatalf("the broker's CA is not bound alone:\n%s", look)
	}
	// Nor what the daemon says of the container.
	ins, err := b.cli.ContainerInspect(t.Context(), sb.id)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(ins)
	if strings.Contains(string(raw), bkCanary) || !strings.Contains(string(raw), placeholder) {
		t.Fatal("the container's configuration holds the value, or not the placeholder")
	}

	recs := l.records()
	if len(recs) != 3 {
		t.Fatalf("audit entries %+v, want 3", recs)
	}
	for _, r := range recs {
		if r.Secret != "API_KEY" || r.Host != "api.test" || r.Method != "GET" || r.Status != 200 {
			t.Fatalf("audit entry %+v", r)
		}
	}
	t.Logf("placeholder %s…; the host got the value %d times; audit %+v", placeholder[:8], len(seen), recs)
}

// Each way code could move the value to where it can read it fails, in a
// real sandbox. The table is the issue's: another listed host, the body or
// URL of the secret's host, a redirect, header and request-line tricks, a
// host whose certificate is not trusted.
func TestBrokerExfiltrationFromASandbox(t *testing.T) {
	needDocker(t)
	l := newBrokerLab(t)
	b := newTestBackend(t)
	sb := openBrokered(t, b, l)
	api := bkAPI.String() + ":443"
	type row struct {
		step, want, why string
	}
	rows := []row{
		{"h2:GET|https://other.test/echo|Authorization=Bearer $API_KEY|", "Authorization: Bearer $API_KEY", "another listed host gets the placeholder as sent"},
		{"h2:POST|https://api.test/echo?k=$API_KEY|X-Copy=$API_KEY|$API_KEY", "status=200", "placeholder in URL, body, other header: left as it is"},
		{"h1:GET|https://api.test/redirect?to=https://other.test/echo|Authorization=Bearer $API_KEY|", `location="https://other.test/echo"`, "a redirect comes back to the sandbox, not followed by the broker"},
		{"h1:GET|https://api.test/echo|Authorization=Bearer $API_KEY;Authorization=Bearer $API_KEY|", "status=400", "the header twice"},
		{"h1:GET|https://api.test/echo|Authorization=Basic $API_KEY|", "status=400", "the placeholder in another format of the header"},
		{"h1:GET|https://bad.test/echo|Authorization=Bearer $API_KEY|", "status=502", "the secret's host with an untrusted certificate"},
		{"h1:GET|http://api.test/echo|Authorization=Bearer $API_KEY|", "Authorization: Bearer $API_KEY", "plain HTTP to the secret's host: the placeholder, not brokered"},
		{`raw:` + bkOther.String() + `:443|api.test|GET /echo HTTP/1.1\r\nHost: api.test\r\nX-Row: misaim\r\nAuthorization: Bearer $API_KEY\r\nConnection: close\r\n\r\n`, "Authorization: Bearer $API_KEY", "the secret's TLS name aimed at another host's address: the broker dials the secret's host"},
		{`raw:` + api + `|api.test|GET /echo HTTP/1.1\r\nHost: other.test\r\nAuthorization: Bearer $API_KEY\r\nConnection: close\r\n\r\n`, "HTTP/1.1 421", "Host differs from the TLS name"},
		{`raw:` + api + `|api.test|GET https://other.test/echo HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer $API_KEY\r\nConnection: close\r\n\r\n`, "HTTP/1.1 4", "absolute URL to another host"},
		{`raw:` + api + `|api.test|GET /echo HTTP/1.1\r\nHost: api.test\r\nX-A: 1\r\n Authorization: Bearer $API_KEY\r\nConnection: close\r\n\r\n`, "HTTP/1.1 ", "obs-fold: a folded line is part of X-A, never a header of its own"},
		{`raw:` + api + `|api.test|POST /echo HTTP/1.1\r\nHost: api.test\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /echo HTTP/1.1\r\nHost: other.test\r\nAuthorization: Bearer $API_KEY\r\nConnection: close\r\n\r\n`, "HTTP/1.1 421", "CL and TE: a second request smuggled to another host"},
	}
	steps := make([]string, len(rows))
	for i, r := range rows {
		steps[i] = r.step
	}
	got := egressprobe(t, sb, steps...)
	placeholder := strings.TrimSpace(sh(t, sb, `echo "$API_KEY"`))
	for _, r := range rows {
		want := strings.ReplaceAll(r.want, "$API_KEY", placeholder)
		t.Logf("%-70s → %.90s", r.why, got[r.step])
		if !strings.Contains(got[r.step], want) {
			t.Errorf("%s:\n  %s\n  want %q", r.why, got[r.step], want)
		}
	}
	// The value reached api.test only in Authorization, where the
	// placeholder was sent in the declared format, and nowhere else.
	for _, s := range l.api.Requests() {
		for k, vs := range s.Header {
			if k != "Authorization" && strings.Contains(strings.Join(vs, " "), bkCanary) {
				t.Errorf("api.test got the value in %s", k)
			}
		}
		if strings.Contains(s.URI+s.Body, bkCanary) {
			t.Errorf("api.test got the value in the URL or body: %s %q", s.URI, s.Body)
		}
		if !s.TLS && strings.Contains(s.Header.Get("Authorization"), bkCanary) {
			t.Error("api.test got the value over plain HTTP")
		}
	}
	if all := l.other.All() + l.bad.All(); strings.Contains(all, bkCanary) {
		t.Fatalf("another host got the value:\n%s", all)
	}
	misaimed := func(e *netns.Echo) (n int) {
		for _, s := range e.Requests() {
			if s.Header.Get("X-Row") == "misaim" {
				n++
			}
		}
		return n
	}
	if misaimed(l.api) != 1 || misaimed(l.other) != 0 {
		t.Errorf("the misaimed request reached api.test %d times and other.test %d times, want 1 and 0", misaimed(l.api), misaimed(l.other))
	}
	if len(l.bad.Requests()) != 0 {
		t.Fatal("bad.test was sent a request over a connection whose certificate the broker could not verify")
	}
}

// With the gateway gone, a brokered sandbox reaches nothing: the next
// call fails closed and nothing is sent anywhere.
func TestBrokerGatewayDownFailsClosed(t *testing.T) {
	needDocker(t)
	l := newBrokerLab(t)
	b := newTestBackend(t)
	sb := openBrokered(t, b, l)
	egressprobe(t, sb, "h1:GET|https://api.test/echo|Authorization=Bearer $API_KEY|")
	before := len(l.api.Requests())
	sb.gw.Close()
	<-sb.gw.Done()
	_, err := sb.Run(t.Context(), []string{"/bin/egressprobe", "h1:GET|https://api.test/echo|Authorization=Bearer $API_KEY|"}, backends.RunOptions{Timeout: 30 * time.Second})
	wantClass(t, err, model.ErrSandboxGone, "")
	if n := len(l.api.Requests()); n != before {
		t.Fatalf("api.test got %d more requests after the gateway went", n-before)
	}
}

// A brokered secret's value is never given to a warm sandbox: a pool of
// such a template is refused, and nothing is created.
func TestBrokeredSecretsRefusedInAWarmSandbox(t *testing.T) {
	_, err := unreachableBackend(t).CreateWarm(t.Context(), backends.WarmRequest{Spec: testSpec(t, brokered, func(s *model.Spec) { s.TenantID, s.SessionID = "", "" }), MaxIdle: time.Minute, SpecSHA256: "x"})
	e := classError(t, err, model.ErrCapabilityNotSupported, "")
	if e.Attribute != "warm_pool" || strings.Contains(err.Error(), "nonexistent") {
		t.Fatalf("warm: %v", err)
	}
}

// openBroker gives the plan's environment the placeholder and the CA
// variables, replacing any of the same name, writes certificates only, and
// keeps the value out of everything the sandbox gets.
func TestOpenBrokerGivesThePlaceholderAndTheBundle(t *testing.T) {
	store := filepath.Join(t.TempDir(), "roots.pem")
	root := netns.NewCA(t, "api.test")
	if err := os.WriteFile(store, root.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SSL_CERT_FILE", store)
	p, err := validate(backends.CreateRequest{Spec: testSpec(t, brokered, func(s *model.Spec) { s.Env = map[string]string{"SSL_CERT_FILE": "/mine.pem", "LANG": "C"} }),
		Brokered: map[string]string{"API_KEY": bkCanary}}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.openBroker(); err != nil {
		t.Fatal(err)
	}
	defer p.brokerFiles.remove()
	env := strings.Join(p.env, "\n")
	ph := p.broker.Placeholder("API_KEY")
	for _, want := range []string{"API_KEY=" + ph, "LANG=C", "SSL_CERT_FILE=" + caBundleTarget, "REQUESTS_CA_BUNDLE=" + caBundleTarget,
		"CURL_CA_BUNDLE=" + caBundleTarget, "GIT_SSL_CAINFO=" + caBundleTarget, "NODE_EXTRA_CA_CERTS=" + brokerCATarget} {
		if !slices.Contains(p.env, want) {
			t.Errorf("env lacks %s:\n%s", want, env)
		}
	}
	if strings.Contains(env, "/mine.pem") || strings.Contains(env, bkCanary) || len(p.brokered[0].Value) != 0 {
		t.Fatalf("env %s, plan's copy of the value %q", env, p.brokered[0].Value)
	}
	bundle, err := os.ReadFile(p.brokerFiles.bundle)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := os.ReadFile(p.brokerFiles.caOnly)
	if string(bundle) != strings.TrimRight(string(root.PEM), "\n")+"\n"+string(ca) || strings.Count(string(ca), "BEGIN CERTIFICATE") != 1 ||
		strings.Contains(string(bundle), "PRIVATE KEY") || strings.Contains(string(bundle), bkCanary) {
		t.Fatalf("bundle:\n%s\nCA:\n%s", bundle, ca)
	}
	if p.brokerRoots == nil || !p.brokerRoots.Equal(root.Pool) {
		t.Fatal("the broker does not verify upstream with the host's store")
	}
	p.brokerFiles.remove()
	if _, err := os.Stat(p.brokerFiles.dir); !os.IsNotExist(err) {
		t.Fatalf("the CA directory is left: %v", err)
	}
}

// A plan made without the values (as Preflight's is) creates nothing for a
// spec with brokered secrets: openBroker refuses it before the container.
func TestOpenBrokerRefusesAPlanWithoutValues(t *testing.T) {
	p, err := validate(backends.CreateRequest{Spec: testSpec(t, brokered)}, false)
	if err != nil {
		t.Fatal(err)
	}
	err = p.openBroker()
	if me := classError(t, err, model.ErrConfiguration, ""); me.Attribute != "brokered_secrets" || p.broker != nil || p.brokerFiles != nil {
		t.Fatalf("openBroker on a plan without values: %v", err)
	}
}
