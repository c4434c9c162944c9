//go:build linux

package sandbox

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	dockertest "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/docker"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/testing/netns"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Through the Go package: a brokered secret given in Request.Secrets like
// any reaches the secret's host (a test host in a lab namespace) in its
// header, while the sandbox, the run's result and the audit log see only
// the placeholder; the audit has one brokered record for the request.
func TestDocker_BrokeredSecret(t *testing.T) {
	needDocker(t)
	apiAddr, dns := netip.MustParseAddr("198.18.1.145"), netip.MustParseAddr("198.18.1.155")
	lab := netns.New(t, apiAddr, dns)
	ca := netns.NewCA(t, "api.test")
	api := lab.EchoHost(t, apiAddr, ca)
	d := lab.DNSServer(t, dns)
	d.Set("api.test", netns.Static(apiAddr))
	roots := filepath.Join(t.TempDir(), "roots.pem")
	if err := os.WriteFile(roots, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SSL_CERT_FILE", roots) // the host's trust store, for the broker and the sandbox's bundle

	image := dockertest.ProbeImage(t)
	tpl := template(t, func(x *inputs.Template) {
		x.Image = image
		x.Backend = "docker://?egress=gateway&resolver=" + netip.AddrPortFrom(dns, 53).String()
		x.Egress, x.Allow = model.EgressDeny, []string{"api.test"}
		x.BrokeredSecrets = map[string]model.BrokeredSecret{"API_KEY": {Hosts: []string{"api.test"}, Header: "X-Api-Key"}}
	})
	spec, sum := tenantSpec(t, tpl, "acme", "s-brokered")
	c, audit := newClient(t)
	sb, err := c.Open(t.Context(), Request{Spec: spec, SpecSHA256: sum, TenantID: "acme", SessionID: "s-brokered",
		Secrets: NewSecrets(map[string]string{"API_KEY": canary})})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sb.Close(t.Context()) }()
	res, err := sb.Run(t.Context(), []string{"sh", "-c", `/bin/egressprobe "h2:GET|https://api.test/echo|X-Api-Key=$API_KEY|"; echo "API_KEY=$API_KEY"`},
		RunOptions{Timeout: 60 * time.Second})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("run: %+v %v", res, err)
	}
	out := string(res.Stdout)
	placeholder := strings.TrimSpace(out[strings.LastIndex(out, "API_KEY=")+len("API_KEY="):])
	if len(placeholder) < 40 || !strings.Contains(out, "X-Api-Key: "+placeholder) || strings.Contains(out, canary) || strings.Contains(out, Redacted) {
		t.Fatalf("the sandbox printed %s; want the placeholder echoed, never the value (nor a redaction of it)", out)
	}
	seen := api.Requests()
	if len(seen) != 1 || seen[0].Header.Get("X-Api-Key") != canary {
		t.Fatalf("api.test got %+v, want the value in X-Api-Key", seen)
	}
	_ = sb.Close(t.Context())
	text := audit.String()
	if strings.Contains(text, canary) {
		t.Fatalf("the audit log holds the value:\n%s", text)
	}
	var brokered []string
	for _, r := range audit.records(t) {
		if r["event"] == EventBrokered {
			brokered = append(brokered, fmt.Sprint(r["op"], " ", r["sandbox_id"] != nil, " ", r["brokered"], " ", r["secret_names"]))
		}
	}
	if len(brokered) != 1 || brokered[0] != "broker true map[host:api.test method:GET secret:API_KEY status:200] [API_KEY]" {
		t.Fatalf("brokered records %q", brokered)
	}
}
