//go:build linux

package docker

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker/egress"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/testing/netns"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Test hosts of the gateway's lab, in namespaces the test makes
// (internal/testing/netns): nothing else is ever addressed.
var (
	gwAllowed  = netip.MustParseAddr("198.18.1.10") // allowed.test
	gwOther    = netip.MustParseAddr("198.18.1.11") // other.test, unlisted
	gwBlock    = netip.MustParseAddr("198.18.1.20") // listed as 198.18.1.20:9000
	gwDNS      = netip.MustParseAddr("198.18.1.53") // the gateway's resolver
	gwOutDNS   = netip.MustParseAddr("198.18.1.54") // a resolver the sandbox may not ask
	gwNever    = netip.MustParseAddr("198.18.1.99") // must never be reached
	gwNever6   = netip.MustParseAddr("2001:2:0:1::99")
	gwAllowed6 = netip.MustParseAddr("2001:2:0:1::10")
)

type gwLab struct {
	*netns.Lab
	never   *netns.Never
	dns     *netns.DNS
	outDNS  *netns.DNS
	rebound atomic.Bool
}

func newGatewayLab(t *testing.T) *gwLab {
	t.Helper()
	l := &gwLab{Lab: netns.New(t, gwAllowed, gwOther, gwBlock, gwDNS, gwOutDNS, gwNever, gwNever6, gwAllowed6)}
	ca := netns.NewCA(t, "allowed.test", "other.test", "rebind.test")
	l.WebHost(t, "allowed", gwAllowed, ca)
	l.WebHost(t, "other", gwOther, ca)
	l.WebHost(t, "block", gwBlock, ca)
	l.WebHost(t, "allowed6", gwAllowed6, ca)
	l.never = l.NeverHost(t, gwNever, gwNever6)
	l.dns = l.DNSServer(t, gwDNS)
	l.outDNS = l.DNSServer(t, gwOutDNS)
	l.outDNS.Set("other.test", netns.Static(gwOther))
	l.dns.Set("allowed.test", netns.Static(gwAllowed))
	l.dns.Set("other.test", netns.Static(gwOther))
	l.dns.Set("loop.test", netns.Static(netip.MustParseAddr("127.0.0.1")))
	l.dns.Set("meta.test", netns.Static(netip.MustParseAddr("169.254.169.254")))
	l.dns.Set("host.test", netns.Static(netns.Host4))
	l.dns.Set("rebind.test", func() []netip.Addr {
		if l.rebound.Load() {
			return []netip.Addr{netip.MustParseAddr("10.0.0.1")}
		}
		return []netip.Addr{gwAllowed}
	})
	return l
}

// gatewaySpec is a deny sandbox on the gateway with the lab's resolver.
func gatewaySpec(t *testing.T, allow ...string) model.Spec {
	return testSpec(t, func(s *model.Spec) {
		s.Backend = "docker://?egress=gateway&resolver=" + netip.AddrPortFrom(gwDNS, 53).String()
		s.Network = model.NetworkPolicy{Egress: model.EgressDeny, Allow: allow}.Normalized()
	})
}

var gatewayAllow = []string{"allowed.test", "rebind.test", "loop.test", "meta.test", "host.test", "198.18.1.20:9000", "2001:2:0:1::10"}

// probe runs the probe client in sb and returns each step's outcome.
func probe(t *testing.T, sb *sandbox, steps ...probeStep) map[string]string {
	t.Helper()
	args := []string{"/.sandboxio-init", probeProto}
	for _, s := range steps {
		args = append(args, s.String())
	}
	res, err := sb.Run(t.Context(), args, backends.RunOptions{Timeout: 60 * time.Second})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("probe client: %v exit %d: %s", err, res.ExitCode, res.Stderr)
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
		step, outcome, _ := strings.Cut(line, " => ")
		out[step] = outcome
	}
	if len(out) != len(steps) {
		t.Fatalf("probe client printed %d outcomes for %d steps:\n%s", len(out), len(steps), res.Stdout)
	}
	return out
}

// The gateway forwards exactly what the list allows, from inside a real
// sandbox whose code ignores every proxy variable, and each bypass fails
// without reaching the never-listener.
func TestGatewayEnforcesTheAllowList(t *testing.T) {
	needDocker(t)
	forgetGatewayProofs()
	l := newGatewayLab(t)
	b := newTestBackend(t)
	sb := open(t, b, gatewaySpec(t, gatewayAllow...))
	if sb.gw == nil {
		t.Fatal("no gateway on a gateway sandbox with an allow list")
	}
	if got := strings.Fields(sh(t, sb, "ls /sys/class/net")); len(got) != 2 {
		t.Fatalf("interfaces: %q, want lo and the gateway's device only (no veth)", got)
	}
	dns := "192.0.2.53:53" // any address: the gateway answers DNS itself
	a, o, blk := gwAllowed.String(), gwOther.String(), gwBlock.String()
	cases := []struct {
		what string
		step probeStep
		ok   func(string) bool
	}{
		{"allowed name resolves", probeStep{"dns", dns, "allowed.test"}, is("address " + a)},
		{"allowed name over HTTP", probeStep{"http", a + ":80", "allowed.test"}, has("allowed host=allowed.test")},
		{"allowed name over HTTPS", probeStep{"https", a + ":443", "allowed.test"}, has("allowed host=allowed.test")},
		{"listed block and port", probeStep{"http", blk + ":9000", "x"}, has("GET / HTTP/1.1")},
		{"listed IPv6 address", probeStep{"http", "[" + gwAllowed6.String() + "]:80", "allowed6"}, has("allowed6 host=")},
		{"unlisted name does not resolve", probeStep{"dns", dns, "other.test"}, not(has("address"))},
		// On 80 and 443 the gateway accepts the connection to read the
		// name the client sends first, so the request is what is refused.
		{"raw IP of an unlisted host", probeStep{"http", o + ":80", o}, refusedOutcome},
		{"raw IP of an unlisted host, TLS", probeStep{"https", o + ":443", o}, refusedOutcome},
		{"raw IP of an unlisted host, other port", probeStep{"tcp", o + ":9000", ""}, refusedOutcome},
		{"listed block on another port", probeStep{"http", blk + ":80", blk}, refusedOutcome},
		{"spoofed SNI aimed at an unlisted address", probeStep{"https", o + ":443", "allowed.test"}, not(has("other"))},
		{"spoofed Host aimed at an unlisted address", probeStep{"http", o + ":80", "allowed.test"}, not(has("other"))},
		// Inside TLS the Host is not seen: the request goes to the SNI's
		// own address, never to other.test's (fronting: docs/guides).
		{"Host differs from SNI", probeStep{"https", o + ":443", "allowed.test>other.test"}, has("allowed host=other.test")},
		{"unlisted SNI", probeStep{"https", a + ":443", "other.test"}, refusedOutcome},
		{"DNS to an outside resolver", probeStep{"dns", gwOutDNS.String() + ":53", "other.test"}, not(has("address"))},
		{"IPv6 literal of the never host", probeStep{"http", "[" + gwNever6.String() + "]:80", "[" + gwNever6.String() + "]"}, refusedOutcome},
		{"IPv6 literal, other port", probeStep{"tcp", "[" + gwNever6.String() + "]:9000", ""}, refusedOutcome},
		{"UDP and QUIC to a listed name's address", probeStep{"udp", a + ":443", ""}, not(is("answer"))},
		{"UDP to the never host", probeStep{"udp", gwNever.String() + ":9001", ""}, not(is("answer"))},
		{"allowed name resolving to loopback", probeStep{"http", a + ":80", "loop.test"}, refusedOutcome},
		{"allowed name resolving to metadata", probeStep{"http", a + ":80", "meta.test"}, refusedOutcome},
		{"allowed name resolving to the host", probeStep{"http", a + ":80", "host.test"}, refusedOutcome},
		{"raw IP of the never host", probeStep{"https", gwNever.String() + ":443", gwNever.String()}, refusedOutcome},
		{"never host by an unlisted name", probeStep{"https", gwNever.String() + ":443", "never.test"}, refusedOutcome},
		{"the host itself", probeStep{"tcp", netns.Host4.String() + ":22", ""}, refusedOutcome},
	}
	var steps []probeStep
	for _, c := range cases {
		steps = append(steps, c.step)
	}
	out := probe(t, sb, steps...)
	for _, c := range cases {
		if got := out[c.step.String()]; !c.ok(got) {
			t.Errorf("%s: %s gave %q", c.what, c.step, got)
		} else {
			t.Logf("%-45s %s => %s", c.what, c.step, got)
		}
	}
	// Rebinding: the sandbox saw allowed.test's address; the name now
	// resolves to a private address, which the gateway will not dial.
	if got := probe(t, sb, probeStep{"dns", dns, "rebind.test"})["dns|"+dns+"|rebind.test"]; got != "address "+a {
		t.Fatalf("rebind.test first resolves to %q", got)
	}
	l.rebound.Store(true)
	if got := probe(t, sb, probeStep{"http", a + ":80", "rebind.test"})["http|"+a+":80|rebind.test"]; !refusedOutcome(got) {
		t.Errorf("rebinding: %q", got)
	}
	if n := l.never.Hits(); n != 0 {
		t.Errorf("the never-listener was reached %d times", n)
	}
	if q := l.outDNS.Queries(); q != 0 {
		t.Errorf("the outside resolver got %d queries", q)
	}
	// The record an agent reads: denied attempts with their destinations,
	// allowed connections counted.
	in := sb.Info()
	if in.BlockedEgress == nil || *in.BlockedEgress == 0 || in.AllowedEgress == nil || *in.AllowedEgress == 0 {
		t.Fatalf("blocked %v allowed %v", in.BlockedEgress, in.AllowedEgress)
	}
	if !listsDest(in.BlockedEgressDestinations, o) || !listsDest(in.BlockedEgressDestinations, "other.test") {
		t.Errorf("blocked destinations lack other.test or its address: %+v", in.BlockedEgressDestinations)
	}
	if !listsDest(in.AllowedEgressDestinations, "allowed.test") || listsDest(in.AllowedEgressDestinations, "other.test") {
		t.Errorf("allowed destinations: %+v", in.AllowedEgressDestinations)
	}
}

func listsDest(ds []model.BlockedDestination, what string) bool {
	for _, d := range ds {
		if d.Name == what || d.Address == what {
			return true
		}
	}
	return false
}

func is(want string) func(string) bool { return func(s string) bool { return s == want } }
func has(want string) func(string) bool {
	return func(s string) bool { return strings.Contains(s, want) }
}
func not(f func(string) bool) func(string) bool {
	return func(s string) bool { return !f(s) }
}

// refusedOutcome: the connection failed, or a plain-HTTP request got the
// gateway's 403.
func refusedOutcome(s string) bool {
	switch {
	case s == "refused", s == "reset", s == "unreachable", s == "closed", strings.HasPrefix(s, "rcode"):
		return true
	case strings.HasPrefix(s, "answer HTTP/1.1 403"):
		return true
	}
	return false
}

// A denied plain-HTTP request gets a 403 naming the rule and destination.
func TestGatewayDeniedHTTPIsA403(t *testing.T) {
	needDocker(t)
	newGatewayLab(t)
	b := newTestBackend(t)
	sb := open(t, b, gatewaySpec(t, "allowed.test"))
	a := gwAllowed.String()
	got := probe(t, sb, probeStep{"http", a + ":80", "other.test"})["http|"+a+":80|other.test"]
	if !strings.HasPrefix(got, "answer HTTP/1.1 403") || !strings.Contains(got, "other.test:80") || !strings.Contains(got, rules.GatewayNotListed) {
		t.Fatalf("denied HTTP: %q", got)
	}
	t.Log(got)
}

// With the gateway gone, the sandbox reaches nothing and the next call
// fails with a typed error; nothing falls back to a bridge.
func TestGatewayDownFailsClosed(t *testing.T) {
	needDocker(t)
	newGatewayLab(t)
	b := newTestBackend(t)
	sb := open(t, b, gatewaySpec(t, "allowed.test"))
	a := gwAllowed.String()
	if got := probe(t, sb, probeStep{"http", a + ":80", "allowed.test"})["http|"+a+":80|allowed.test"]; !strings.Contains(got, "allowed host=") {
		t.Fatalf("before: %q", got)
	}
	sb.gw.Close()
	<-sb.gw.Done()
	_, err := sb.Run(t.Context(), []string{"/.sandboxio-init", probeProto, "http|" + a + ":80|allowed.test"}, backends.RunOptions{Timeout: 30 * time.Second})
	wantClass(t, err, model.ErrSandboxGone, "")
	if !errors.Is(err, ErrGatewayDown) {
		t.Fatalf("error %v does not wrap ErrGatewayDown", err)
	}
	// Had the call run, there would be no route: the device went with the
	// gateway. Shown from the container's namespace directly.
	ins, err := b.cli.ContainerInspect(t.Context(), sb.id)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), "nsenter", "-t", fmt.Sprint(ins.State.Pid), "-n", "ip", "-o", "link").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "lo:") {
		t.Fatalf("links of the sandbox's namespace not read: %v\n%s", err, out)
	}
	if strings.Contains(string(out), egress.Interface) {
		t.Fatalf("the gateway's device outlived it:\n%s", out)
	}
}

// Under gVisor the gateway never sees the traffic: an allow list there is
// refused, never accepted unenforced.
func TestGatewayRefusedOnRunsc(t *testing.T) {
	spec := gatewaySpec(t, "allowed.test")
	spec.Runtime = "runsc"
	_, err := validate(backends.CreateRequest{Spec: spec}, false)
	wantClass(t, err, model.ErrCapabilityNotSupported, "")
}

// The proof can fail: a gateway that forwards an address the probe did not
// list (as a gateway failing open would) is caught, and the template is
// refused with the rule and the probe's finding.
func TestGatewayProofRefusesAGatewayThatForwardsTooMuch(t *testing.T) {
	needDocker(t)
	newGatewayLab(t)
	forgetGatewayProofs()
	editGatewayConfig = func(c *egress.GatewayConfig) {
		c.Rules.Blocks = append(c.Rules.Blocks, egress.Block{Prefix: netip.PrefixFrom(probeOther, 32)})
	}
	t.Cleanup(func() {
		editGatewayConfig = nil
		forgetGatewayProofs()
	})
	b := newTestBackend(t)
	_, err := b.Preflight(t.Context(), gatewaySpec(t, "allowed.test"))
	e := classError(t, err, model.ErrCapabilityNotSupported, "")
	if e.Rule != rules.GatewayNotProven || !strings.Contains(e.Message, "198.18.255.2") {
		t.Fatalf("refusal %q (rule %s) names neither the rule nor the unlisted address", e.Message, e.Rule)
	}
	t.Log(e.Message)
}

// The gateway's device carries 64 KiB packets (the throughput depends on
// it), read from the sandbox's own /sys.
func TestGatewayDeviceMTU(t *testing.T) {
	needDocker(t)
	newGatewayLab(t)
	b := newTestBackend(t)
	sb := open(t, b, gatewaySpec(t, "allowed.test"))
	res, err := sb.Run(t.Context(), []string{"cat", "/sys/class/net/" + egress.Interface + "/mtu"}, backends.RunOptions{Timeout: 30 * time.Second})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("cat mtu: %v %+v", err, res)
	}
	if got := strings.TrimSpace(string(res.Stdout)); got != "65520" {
		t.Fatalf("the gateway's device has MTU %s in the sandbox", got)
	}
}

// A flood of connections from inside a real sandbox is held to the
// gateway's flow bound, costs the gateway bounded memory, and leaves it
// serving once the held connections end.
func TestGatewayFloodFromASandbox(t *testing.T) {
	needDocker(t)
	newGatewayLab(t)
	b := newTestBackend(t)
	sb := open(t, b, gatewaySpec(t, "allowed.test"))
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse
	}
	before, goroutines := heap(), runtime.NumGoroutine()
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if n := int64(sb.gw.Flows()); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	// Connections that send nothing on 443 each hold a flow until the
	// gateway's wait for a ClientHello ends; past the bound they are reset.
	const flood = 600
	out := probe(t, sb, probeStep{"flood", gwAllowed.String() + ":443", fmt.Sprint(flood)})["flood|"+gwAllowed.String()+":443|"+fmt.Sprint(flood)]
	during := heap()
	close(stop)
	<-sampled
	var opened, failed int
	if _, err := fmt.Sscanf(out, "opened=%d failed=%d", &opened, &failed); err != nil {
		t.Fatalf("flood: %q", out)
	}
	t.Logf("flood of %d: %s, peak %d flows, heap %d -> %d KiB", flood, out, peak.Load(), before>>10, during>>10)
	if peak.Load() > 256 || opened > 256+16 || failed == 0 {
		t.Fatalf("the flow bound did not hold: %s, peak %d", out, peak.Load())
	}
	if during > before+64<<20 {
		t.Fatalf("the flood grew the heap by %d MiB", (during-before)>>20)
	}
	deadline := time.Now().Add(20 * time.Second)
	for sb.gw.Flows() > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if n := sb.gw.Flows(); n != 0 {
		t.Fatalf("%d flows left after the flood", n)
	}
	a := gwAllowed.String()
	if got := probe(t, sb, probeStep{"http", a + ":80", "allowed.test"})["http|"+a+":80|allowed.test"]; !strings.Contains(got, "allowed host=") {
		t.Fatalf("after the flood: %q", got)
	}
	for i := 0; i < 50 && runtime.NumGoroutine() > goroutines+20; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > goroutines+20 {
		t.Fatalf("goroutines %d after the flood, %d before", g, goroutines)
	}
}

// Other sandboxes are never reached through the gateway, even when the
// list names one: a spec written by hand that lists an open-egress
// sandbox's bridge address (apply would refuse it) gets nothing there,
// while the host itself reaches that sandbox's listener.
func TestGatewayNeverReachesOtherSandboxes(t *testing.T) {
	needDocker(t)
	newGatewayLab(t)
	b := newTestBackend(t)
	other := open(t, b, testSpec(t, func(s *model.Spec) { s.Network = model.NetworkPolicy{Egress: model.EgressAllow}.Normalized() }))
	if res, err := other.Run(t.Context(), []string{"httpd", "-p", "8080", "-h", "/tmp"}, backends.RunOptions{Timeout: 30 * time.Second}); err != nil || res.ExitCode != 0 {
		t.Fatalf("httpd in the other sandbox: %v %+v", err, res)
	}
	ins, err := b.cli.ContainerInspect(t.Context(), other.id)
	if err != nil {
		t.Fatal(err)
	}
	var ip string
	for _, n := range ins.NetworkSettings.Networks {
		ip = n.IPAddress
	}
	if ip == "" {
		t.Fatal("the open-egress sandbox has no bridge address")
	}
	target := net.JoinHostPort(ip, "8080")
	c, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		t.Fatalf("the host does not reach the other sandbox's listener (the test shows nothing): %v", err)
	}
	c.Close()
	sb := open(t, b, gatewaySpec(t, ip+":8080", ip))
	got := probe(t, sb, probeStep{"tcp", target, ""}, probeStep{"http", target, ip})
	for step, outcome := range got {
		t.Logf("%s => %s", step, outcome)
		if !refusedOutcome(outcome) {
			t.Fatalf("%s reached the other sandbox: %s", step, outcome)
		}
	}
}
