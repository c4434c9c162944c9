//go:build linux

package main

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/testing/netns"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// TestRunCLI_EgressGateway: `sandboxio run` on docker://?egress=gateway
// reaches the listed test host by name (a client that sets no proxy: the
// probe client sandboxio's init carries), not the unlisted one by name or
// by address, and the audit record lists both.
func TestRunCLI_EgressGateway(t *testing.T) {
	needDocker(t)
	allowed, other, dns := netip.MustParseAddr("198.18.1.10"), netip.MustParseAddr("198.18.1.11"), netip.MustParseAddr("198.18.1.53")
	lab := netns.New(t, allowed, other, dns)
	ca := netns.NewCA(t, "allowed.test", "other.test")
	lab.WebHost(t, "allowed", allowed, ca)
	lab.WebHost(t, "other", other, ca)
	d := lab.DNSServer(t, dns)
	d.Set("allowed.test", netns.Static(allowed))
	d.Set("other.test", netns.Static(other))

	session := "gateway-cli"
	spec, sum := specFile(t, "acme", session, func(x *inputs.Template) {
		x.Backend = "docker://?egress=gateway&resolver=" + netip.AddrPortFrom(dns, 53).String()
		x.Egress, x.Allow = model.EgressDeny, []string{"allowed.test"}
	})
	audit := t.TempDir() + "/audit.jsonl"
	code, out, errOut := cli(t, "", "run", "--quiet", "--spec", spec, "--spec-sha256", sum, "--tenant", "acme", "--session", session, "--audit", audit,
		"--", "/.sandboxio-init", "sandboxio-egress-probe-v1",
		"dns|192.0.2.53:53|allowed.test", "http|198.18.1.10:80|allowed.test",
		"dns|192.0.2.53:53|other.test", "http|198.18.1.11:80|198.18.1.11", "http|198.18.1.10:80|other.test")
	want := []string{
		"dns|192.0.2.53:53|allowed.test => address 198.18.1.10",
		"http|198.18.1.10:80|allowed.test => answer HTTP/1.1 200 OK / allowed host=allowed.test",
		"dns|192.0.2.53:53|other.test => rcode",
		"http|198.18.1.11:80|198.18.1.11 => answer HTTP/1.1 403",
		"http|198.18.1.10:80|other.test => answer HTTP/1.1 403",
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != len(want) {
		t.Fatalf("exit %d\nstdout %q\nstderr %q", code, out, errOut)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("step %d: %q, want %q...", i, lines[i], w)
		}
	}
	var blocked, allowedSeen bool
	for _, r := range auditLines(t, audit) {
		if s := fmt.Sprint(r["blocked_egress_destinations"]); strings.Contains(s, "other.test") {
			blocked = true
		}
		if s := fmt.Sprint(r["allowed_egress_destinations"]); strings.Contains(s, "allowed.test") {
			allowedSeen = true
		}
	}
	if !blocked || !allowedSeen {
		t.Fatalf("audit: other.test blocked %v, allowed.test allowed %v", blocked, allowedSeen)
	}
}
