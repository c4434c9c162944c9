package docker

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/network"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker/egress"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/testing/docker/probeimage"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// probeImage is the test image with egressprobe.
func probeImage() (string, error) {
	return probeimage.Image(func(ctx context.Context, tag string, files map[string][]byte) error {
		return EnsureImageWithFiles(ctx, tag, DefaultBusybox, files)
	})
}

// withProbe runs the sandbox on the probe image.
func withProbe(t testing.TB) func(*model.Spec) {
	t.Helper()
	tag, err := probeImage()
	if err != nil {
		t.Fatal(err)
	}
	return func(s *model.Spec) { s.Image = tag }
}

// listener records every connection (TCP) or datagram (UDP) it gets.
type listener struct {
	addr string
	got  atomic.Int64
	stop func()
}

func listenTCP(t *testing.T, host string) *listener {
	t.Helper()
	return listenTCPPort(t, host, "0")
}

// listenTCPPort listens on a given port (0: any free one).
func listenTCPPort(t *testing.T, host, port string) *listener {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		t.Fatalf("a listener on %s:%s: %v", host, port, err)
	}
	r := &listener{addr: l.Addr().String(), stop: func() { l.Close() }}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			r.got.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(r.stop)
	return r
}

func listenUDP(t *testing.T, host string) *listener {
	t.Helper()
	c, err := net.ListenPacket("udp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	r := &listener{addr: c.LocalAddr().String(), stop: func() { c.Close() }}
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := c.ReadFrom(buf); err != nil {
				return
			}
			r.got.Add(1)
		}
	}()
	t.Cleanup(r.stop)
	return r
}

// hostAddr is an address of this host other than loopback and the Docker
// bridge's, which a sandbox could try.
func hostAddr(t *testing.T, not string) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && ip.IP.To4() != nil && !ip.IP.IsLoopback() && ip.IP.String() != not {
			return ip.IP.String()
		}
	}
	t.Fatalf("no host address other than loopback and %s in %v", not, addrs)
	return ""
}

// bridgeGateway is the host's address on the Docker bridge. A daemon that
// created its network store on this start (a fresh install) reports no
// gateway for the default bridge until it restarts, so the address is then
// read from the bridge's interface, which the daemon has set up either way.
func bridgeGateway(t *testing.T, b *dockerBackend) string {
	t.Helper()
	n, err := b.cli.NetworkInspect(t.Context(), "bridge", network.InspectOptions{})
	if err != nil || len(n.IPAM.Config) == 0 {
		t.Fatalf("the Docker bridge: %v %+v", err, n.IPAM)
	}
	if gw := n.IPAM.Config[0].Gateway; gw != "" {
		return gw
	}
	_, subnet, err := net.ParseCIDR(n.IPAM.Config[0].Subnet)
	if err != nil {
		t.Fatalf("the Docker bridge's subnet: %v", err)
	}
	name := n.Options["com.docker.network.bridge.name"]
	if name == "" {
		name = "docker0"
	}
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		t.Fatalf("the Docker bridge's interface %s: %v", name, err)
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		t.Fatalf("the addresses of %s: %v", name, err)
	}
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && subnet.Contains(ip.IP) {
			return ip.IP.String()
		}
	}
	t.Fatalf("the Docker bridge %s has no address in %s: %v", name, subnet, addrs)
	return ""
}

// Under deny, code that resolves names and connects to the host, the
// Docker bridge's gateway and an outside address (from 198.18.0.0/15, where
// nothing listens) gets nothing through: listeners on the host and on the
// gateway record no connection and no datagram. Every attempt is answered
// at once by the observer (ECONNREFUSED, a refused lookup), counted, and
// its destination listed.
func TestDenyEgressIsObservedAndNothingLeaves(t *testing.T) {
	needDocker(t)
	t.Parallel()
	b := newTestBackend(t)
	gw := bridgeGateway(t, b)
	host := hostAddr(t, gw)
	onHost, onGateway, udpHost := listenTCP(t, "0.0.0.0"), listenTCP(t, gw), listenUDP(t, "0.0.0.0")
	// On ports where the observer accepts the connection to read the name
	// the client sends first (and then resets it).
	httpsOnGateway, httpOnHost := listenTCPPort(t, gw, "8443"), listenTCPPort(t, host, "8080")
	port := func(l *listener) string { _, p, _ := net.SplitHostPort(l.addr); return p }

	sb := open(t, b, testSpec(t, withProbe(t)))
	if sb.egress == nil {
		t.Fatal("no egress observer under deny")
	}
	if got := strings.Fields(sh(t, sb, "ls /sys/class/net")); strings.Join(got, " ") != egress.Interface+" lo" {
		t.Fatalf("interfaces under egress=deny: %q, want lo and the observer's %s only", got, egress.Interface)
	}
	attempts := []string{
		"tcp:" + net.JoinHostPort(host, port(onHost)),
		"tcp:" + net.JoinHostPort(gw, port(onGateway)),
		"tcp:" + net.JoinHostPort(gw, port(onHost)),
		"tcp:198.18.7.1:443",
		"tcp:[2001:2::7:1]:443",
		"udp:" + net.JoinHostPort(host, port(udpHost)),
		"udp:" + net.JoinHostPort(gw, port(udpHost)),
		"dns:pypi.org",
		"tcp:files.pythonhosted.org:443",
		"dns:Example.COM",
		"tls:" + httpsOnGateway.addr + ":API.openai.com",
		"http:" + httpOnHost.addr + ":registry.npmjs.org",
		"tls:198.18.7.1:443:one.one.one.one",
	}
	out := sh(t, sb, "egressprobe "+strings.Join(attempts, " "))
	t.Logf("probe:\n%s", out)
	for _, a := range attempts {
		var want string
		switch {
		case strings.HasPrefix(a, "udp:"):
			want = a + " ok" // a datagram is sent; it goes nowhere
		case strings.HasPrefix(a, "tls:"), strings.HasPrefix(a, "http:"):
			want = a + " ECONNRESET" // accepted, read, then reset by the observer
		case strings.HasSuffix(a, ":443") && !strings.Contains(a, "pythonhosted"):
			// Accepted by the observer, to read a name that never comes;
			// the probe closes and is reset: nothing is behind it.
			want = a + " ok"
		case strings.HasPrefix(a, "dns:"), strings.Contains(a, "pythonhosted"):
			want = a + " dns-failed" // refused by the observer, not timed out
		case strings.Contains(a, "2001:2:") && !sb.egress.IPv6:
			want = a + " EADDRNOTAVAIL" // no IPv6 on the device: fails in the sandbox's kernel
		default:
			want = a + " ECONNREFUSED" // reset by the observer
		}
		if !strings.Contains(out+"\n", want+"\n") {
			t.Errorf("want %q in the probe's output", want)
		}
	}
	time.Sleep(200 * time.Millisecond) // anything in flight to the listeners
	for name, l := range map[string]*listener{"host": onHost, "gateway": onGateway, "udp on host": udpHost, "gateway's 8443": httpsOnGateway, "host's 8080": httpOnHost} {
		if n := l.got.Load(); n != 0 {
			t.Errorf("the listener on the %s (%s) got %d connections or datagrams from a deny sandbox", name, l.addr, n)
		}
	}

	in := sb.Info()
	if in.BlockedEgress == nil {
		t.Fatal("blocked_egress not reported")
	}
	seen := map[string]int64{}
	for _, d := range in.BlockedEgressDestinations {
		k := strings.Join(slices.DeleteFunc([]string{d.Kind, d.Name, d.Address, fmt.Sprint(d.Port)}, func(s string) bool { return s == "" || s == "0" }), " ")
		seen[k] = d.Count
	}
	t.Logf("blocked_egress %d: %v", *in.BlockedEgress, seen)
	want := []string{
		"tcp " + host + " " + port(onHost), "tcp " + gw + " " + port(onGateway), "tcp 198.18.7.1 443",
		"udp " + host + " " + port(udpHost), "udp " + gw + " " + port(udpHost),
		"dns pypi.org", "dns files.pythonhosted.org", "dns example.com",
		"tcp " + gw + " 8443", "tls api.openai.com " + gw + " 8443",
		"tcp " + host + " 8080", "http registry.npmjs.org " + host + " 8080",
		"tls one.one.one.one 198.18.7.1 443",
	}
	if sb.egress.IPv6 {
		want = append(want, "tcp 2001:2::7:1 443")
	}
	var sum int64
	for _, k := range want {
		if seen[k] == 0 {
			t.Errorf("destination %q not recorded", k)
		}
	}
	for k, n := range seen {
		if !strings.HasPrefix(k, "tls ") && !strings.HasPrefix(k, "http ") { // names of TCP attempts counted
			sum += n
		}
	}
	if *in.BlockedEgress < int64(len(want)) || sum > *in.BlockedEgress {
		t.Errorf("blocked_egress %d for %d destinations listed with %d attempts", *in.BlockedEgress, len(want), sum)
	}
}

// A flood of 10,000 connection attempts is answered and counted with
// bounded memory, and does not hold up the sandbox's teardown: Close,
// called while a second flood runs, returns within the grace, and the
// observer's reader, device and file are gone with the sandbox.
func TestEgressFloodNeitherGrowsNorBlocksTeardown(t *testing.T) {
	needDocker(t)
	b := newTestBackend(t)
	sbi, err := b.Create(t.Context(), backends.CreateRequest{Spec: testSpec(t, withProbe(t))})
	if err != nil {
		t.Fatal(err)
	}
	sb := sbi.(*sandbox)
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = sb.Close(context.WithoutCancel(t.Context()))
		}
	})
	if sb.egress == nil {
		t.Fatal("no egress observer under deny")
	}
	tunsBefore := tunFiles(t)
	out := sh(t, sb, "egressprobe flood:10000")
	if out != "flood ECONNREFUSED 10000" {
		t.Fatalf("flood: %q, want every attempt refused at once", out)
	}
	in := sb.Info()
	if in.BlockedEgress == nil || *in.BlockedEgress < 10000 || len(in.BlockedEgressDestinations) != egress.MaxDestinations {
		t.Fatalf("after the flood: blocked_egress %d, %d destinations listed (want ≥ 10000, %d)", deref(in.BlockedEgress), len(in.BlockedEgressDestinations), egress.MaxDestinations)
	}

	// Close in the middle of a second flood.
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	defer cancel()
	running := make(chan struct{})
	go func() {
		close(running)
		_, _ = sb.Run(ctx, []string{"egressprobe", "flood:100000"}, backends.RunOptions{Timeout: 60 * time.Second})
	}()
	<-running
	// Close once the second flood is under way (the exec may take a while
	// to start on a loaded host).
	for deadline := time.Now().Add(30 * time.Second); *sb.Info().BlockedEgress <= 10000; {
		if time.Now().After(deadline) {
			t.Fatal("the second flood did not start within 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	err = sb.Close(t.Context())
	closed = true
	took := time.Since(start)
	if err != nil || took > model.TeardownGrace {
		t.Fatalf("close during a flood: %v after %s", err, took)
	}
	select {
	case <-sb.egress.Done():
	case <-time.After(time.Second):
		t.Fatal("the observer's reader still runs after Close")
	}
	if after := tunFiles(t); after >= tunsBefore {
		t.Fatalf("this process holds %d TUN files after Close, %d before", after, tunsBefore)
	}
	if n := *sb.Info().BlockedEgress; n <= 10000 {
		t.Errorf("blocked_egress %d after the second flood, want more than 10000", n)
	}
	waitGone(t, b, map[string]string{"test": labelSafe(t.Name())}, 10*time.Second)
}

// tunFiles counts this process's open /dev/net/tun files.
func tunFiles(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && l == "/dev/net/tun" {
			n++
		}
	}
	return n
}

// A sandbox whose observer is never closed by its owner (its lifetime ends
// first) does not keep the observer: the namespace goes with the container,
// the device with it, and the reader ends.
func TestObserverEndsWithTheContainer(t *testing.T) {
	needDocker(t)
	t.Parallel()
	b := newTestBackend(t)
	sb := open(t, b, testSpec(t))
	if sb.egress == nil {
		t.Fatal("no egress observer under deny")
	}
	if err := b.cli.ContainerKill(t.Context(), sb.id, "KILL"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sb.egress.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the observer's reader still runs 10 s after its container was killed")
	}
}

// gVisor answers the sandbox's packets in its own network stack: under
// --network=none it has loopback only, and nothing reaches the namespace an
// observer would watch. So runsc sandboxes are not observed (blocked_egress
// null), and learn is refused there.
func TestRunscIsNotObserved(t *testing.T) {
	needRuntime(t, "runsc")
	t.Parallel()
	b := newTestBackend(t)
	sb := open(t, b, testSpec(t, withRuntime("runsc")))
	if sb.egress != nil || sb.Info().BlockedEgress != nil {
		t.Fatal("a runsc sandbox claims an egress observer")
	}
	if got := sh(t, sb, "ls /sys/class/net"); got != "lo" {
		t.Fatalf("interfaces under runsc: %q", got)
	}
	// Shown, not assumed: an observer attached by hand to the namespace of
	// the runsc container sees nothing of what the sandbox sends, and the
	// sandbox does not see its device.
	ins, err := b.cli.ContainerInspect(t.Context(), sb.id)
	if err != nil {
		t.Fatal(err)
	}
	if o, err := egress.Attach(ins.State.Pid, sb.id); err != nil {
		t.Logf("the observer cannot even attach under runsc: %v", err)
	} else {
		defer o.Close()
		out := sh(t, sb, "ls /sys/class/net; nslookup pypi.org >/dev/null 2>&1; nc -w 2 198.18.7.1 443 </dev/null; echo tried")
		if n, _ := o.Record().Snapshot(); n != 0 || strings.Contains(out, egress.Interface) {
			t.Fatalf("under runsc the observer saw %d attempts; the sandbox lists: %q", n, out)
		}
		t.Logf("runsc sandbox with an observer attached to its container's namespace: %q, 0 attempts seen", out)
	}
	_, err = b.Create(t.Context(), backends.CreateRequest{Spec: testSpec(t, withRuntime("runsc"), func(s *model.Spec) {
		s.Network = model.NetworkPolicy{Egress: model.EgressLearn}
		s.Labels["case"] = "runsc-learn"
	})})
	wantClass(t, err, model.ErrCapabilityNotSupported, "")
	waitGone(t, b, map[string]string{"case": "runsc-learn"}, 0)
}

// The observer gives the sandboxed code nothing: the same capabilities as
// a deny sandbox without it (none), no interface but loopback and the
// observer's point-to-point device, and no way to change that device, its
// addresses or its routes.
func TestObserverGivesTheSandboxNothing(t *testing.T) {
	needDocker(t)
	t.Parallel()
	b := newTestBackend(t)
	bare := newTestBackend(t, WithoutEgressObserver())
	caps := "grep ^Cap /proc/self/status"
	observed, unobserved := open(t, b, testSpec(t)), open(t, bare, testSpec(t))
	if observed.egress == nil || unobserved.egress != nil {
		t.Fatalf("observers: %v %v", observed.egress, unobserved.egress)
	}
	with, without := sh(t, observed, caps), sh(t, unobserved, caps)
	t.Logf("capabilities with the observer:\n%s", with)
	if with != without || !strings.Contains(with, "CapEff:\t0000000000000000") {
		t.Fatalf("capabilities with the observer:\n%s\nwithout:\n%s", with, without)
	}
	// Nothing was added outside the sandbox: the container is on no network
	// but none, and no device of the observer's stayed in this namespace.
	ins, err := b.cli.ContainerInspect(t.Context(), observed.id)
	if err != nil {
		t.Fatal(err)
	}
	if nets := slices.Collect(maps.Keys(ins.NetworkSettings.Networks)); len(nets) != 1 || nets[0] != "none" {
		t.Fatalf("the observed container's networks: %v", nets)
	}
	// A device is made on the host and moved into its sandbox a moment
	// later, so one of a sandbox opening in a parallel test may be seen in
	// passing (this test's failure under load): only one still there after
	// a while has stayed.
	observerDevices := func() []string {
		ifs, err := net.Interfaces()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, i := range ifs {
			if strings.HasPrefix(i.Name, "sbxe") || i.Name == egress.Interface {
				out = append(out, i.Name)
			}
		}
		return out
	}
	if seen := observerDevices(); len(seen) > 0 {
		time.Sleep(time.Second)
		for _, n := range observerDevices() {
			if slices.Contains(seen, n) {
				t.Fatalf("an observer's device stayed on the host: %s", n)
			}
		}
	}
	if got := sh(t, unobserved, "ls /sys/class/net"); got != "lo" {
		t.Fatalf("interfaces without the observer: %q", got)
	}
	if got := strings.Fields(sh(t, observed, "ls /sys/class/net")); strings.Join(got, " ") != egress.Interface+" lo" {
		t.Fatalf("interfaces with the observer: %q", got)
	}
	// A point-to-point device with no link-layer address: nothing to bridge.
	if got := sh(t, observed, "cat /sys/class/net/"+egress.Interface+"/flags /sys/class/net/"+egress.Interface+"/type"); got != "0x1091\n65534" {
		t.Fatalf("the device's flags and type: %q, want a TUN (0x1091 up, point-to-point, noarp, multicast; type 65534)", got)
	}
	for _, cmd := range []string{
		"ip link set " + egress.Interface + " down",
		"ip addr add 172.17.0.99/16 dev " + egress.Interface,
		"ip route del default",
		"ip route add 172.17.0.0/16 dev lo",
		"ip link add x type dummy",
		"echo 1 >/proc/sys/net/ipv4/ip_forward",
	} {
		res, err := observed.Run(t.Context(), []string{"sh", "-c", cmd}, backends.RunOptions{Timeout: 10 * time.Second})
		if err != nil || res.ExitCode == 0 {
			t.Errorf("%q in the sandbox: exit %d, %v (want refused)", cmd, res.ExitCode, err)
		}
	}
	if got := sh(t, observed, "ip route; ip -6 route | grep default"); strings.Count(got, "default dev "+egress.Interface) != 2 || strings.Count(got, "\n") != 1 {
		t.Fatalf("routes after the attempts: %q, want the IPv4 and IPv6 default routes into the observer only", got)
	}
}

func deref(p *int64) int64 {
	if p == nil {
		return -1
	}
	return *p
}

// A pooled sandbox is observed like a cold one: the observer attached when
// the warm sandbox was created goes with the claim, so the tenant's
// attempts are counted (a claim that dropped it reported null: seen), and a
// warm sandbox discarded unclaimed leaves no observer running (removing the
// container ends its namespace, so this holds even without the close).
func TestWarmSandboxKeepsItsEgressObserver(t *testing.T) {
	needDocker(t)
	b := newTestBackend(t)
	spec := testSpec(t, withProbe(t))
	w := newWarm(t, b, spec, time.Minute)
	if w.s.egress == nil {
		t.Fatal("a warm sandbox under deny has no egress observer")
	}
	sb := claimOf(t, w, spec)
	if out := sh(t, sb, "egressprobe tcp:198.18.7.1:22"); out != "tcp:198.18.7.1:22 ECONNREFUSED" {
		t.Fatalf("probe: %q", out)
	}
	in := sb.Info()
	if in.BlockedEgress == nil || *in.BlockedEgress < 1 {
		t.Fatalf("claimed sandbox: blocked_egress %v, want at least 1", in.BlockedEgress)
	}
	found := false
	for _, d := range in.BlockedEgressDestinations {
		found = found || (d.Address == "198.18.7.1" && d.Port == 22)
	}
	if !found {
		t.Fatalf("claimed sandbox's destinations %+v lack 198.18.7.1:22", in.BlockedEgressDestinations)
	}

	w2 := newWarm(t, b, spec, time.Minute)
	if err := w2.Discard(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w2.s.egress.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a discarded warm sandbox's observer still runs")
	}
}
