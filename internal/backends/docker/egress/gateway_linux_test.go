package egress

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/testing/netns"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

var (
	allowedHost = netip.MustParseAddr("198.18.1.10")
	otherHost   = netip.MustParseAddr("198.18.1.11")
	privHost    = netip.MustParseAddr("198.18.1.12") // a listed CIDR on one port
	cidrHost    = netip.MustParseAddr("198.18.1.20") // a listed CIDR, any port
	dnsHost     = netip.MustParseAddr("198.18.1.53")
	neverHost   = netip.MustParseAddr("198.18.1.99")
	allowed6    = netip.MustParseAddr("2001:2:0:1::10")
	never6      = netip.MustParseAddr("2001:2:0:1::99")
)

// lab is one gateway with its outside world.
type lab struct {
	*netns.Lab
	gw      *Gateway
	ca      *netns.CA
	dns     *netns.DNS
	never   *netns.Never
	dialed  sync.Map    // every address the gateway dialled, to check none is never-reachable
	rebound atomic.Bool // rebind.test answers neverHost once set
}

func newLab(t *testing.T, rules Rules) *lab {
	t.Helper()
	l := &lab{Lab: netns.New(t, allowedHost, otherHost, privHost, cidrHost, dnsHost, neverHost, allowed6, never6)}
	l.ca = netns.NewCA(t, "allowed.test", "other.test", "a.wild.test", "rebind.test", "loop.test", "meta.test", "host.test")
	l.WebHost(t, "allowed", allowedHost, l.ca)
	l.WebHost(t, "other", otherHost, l.ca)
	l.WebHost(t, "priv", privHost, l.ca)
	l.WebHost(t, "cidr", cidrHost, l.ca)
	l.WebHost(t, "allowed6", allowed6, l.ca)
	l.never = l.NeverHost(t, neverHost, never6)
	l.dns = l.DNSServer(t, dnsHost)
	l.dns.Set("allowed.test", netns.Static(allowedHost))
	l.dns.Set("other.test", netns.Static(otherHost))
	l.dns.Set("a.wild.test", netns.Static(allowedHost))
	l.dns.Set("wild.test", netns.Static(allowedHost))
	l.dns.Set("loop.test", netns.Static(netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")))
	l.dns.Set("meta.test", netns.Static(netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("fd00:ec2::254")))
	l.dns.Set("host.test", netns.Static(netns.Host4))
	l.dns.Set("never.test", netns.Static(neverHost))
	// rebind.test answers otherHost until the test rebinds it (a flag, not
	// a count of queries: a lookup asks for A and AAAA in either order).
	l.dns.Set("rebind.test", func() []netip.Addr {
		if l.rebound.Load() {
			return []netip.Addr{neverHost}
		}
		return []netip.Addr{otherHost}
	})
	d := &net.Dialer{Timeout: 3 * time.Second}
	gw, err := attachGatewayNetns(l.SandboxFD, GatewayConfig{
		Rules:    rules,
		Resolver: netip.AddrPortFrom(dnsHost, 53),
		Never:    []netip.Prefix{netip.PrefixFrom(neverHost, 32), netip.PrefixFrom(never6, 128)},
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			l.dialed.Store(addr, true)
			return d.DialContext(ctx, network, addr)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	l.gw = gw
	t.Cleanup(func() {
		gw.Close()
		if h := l.never.Hits(); h != 0 {
			t.Errorf("the never-listener was reached %d times", h)
		}
		l.dialed.Range(func(k, _ any) bool {
			ap, err := netip.ParseAddrPort(k.(string))
			if err == nil && ap.Addr() != dnsHost && gw.pol.neverReachable(ap.Addr()) {
				t.Errorf("the gateway dialled never-reachable %s", ap)
			}
			return true
		})
	})
	return l
}

var defaultRules = Rules{
	Blocks: []Block{{Prefix: netip.MustParsePrefix("198.18.1.20/32")}, {Prefix: netip.MustParsePrefix("198.18.1.12/32"), Port: 9000}},
	Names:  []string{"allowed.test", "*.wild.test", "rebind.test", "loop.test", "meta.test", "host.test", "never.test"},
}

// dial dials from inside the sandbox.
func (l *lab) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := l.InSandbox(func() (err error) {
		d := net.Dialer{Timeout: 3 * time.Second}
		c, err = d.DialContext(ctx, network, addr)
		return
	})
	return c, err
}

// client is an HTTP client in the sandbox that ignores proxy variables and
// resolves every name to addr (as a client with its own resolver would).
func (l *lab) client(addr string) *http.Client {
	tr := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
			if addr != "" {
				_, port, _ := net.SplitHostPort(a)
				a = net.JoinHostPort(addr, port)
			}
			return l.dial(ctx, network, a)
		},
		TLSClientConfig:   &tls.Config{RootCAs: l.ca.Pool},
		DisableKeepAlives: true,
	}
	return &http.Client{Transport: tr, Timeout: 8 * time.Second}
}

func (l *lab) get(t *testing.T, via, url string) (int, string, error) {
	t.Helper()
	resp, err := l.client(via).Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(b), err
}

// resolve asks the sandbox's DNS (any address: the gateway answers).
func (l *lab) resolve(server, name string) ([]string, error) {
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return l.dial(ctx, "udp", net.JoinHostPort(server, "53"))
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return r.LookupHost(ctx, name)
}

// refused: the request failed, or the gateway answered 403.
func refused(code int, err error) bool { return err != nil || code == 403 }

func blocked(g *Gateway, kind, name string) bool {
	_, list := g.Record().Snapshot()
	for _, d := range list {
		if d.Kind == kind && (name == "" || d.Name == name || d.Address == name) {
			return true
		}
	}
	return false
}

func TestGatewayAllowedNameHTTPSAndHTTP(t *testing.T) {
	l := newLab(t, defaultRules)
	code, body, err := l.get(t, "", "https://allowed.test/")
	if err == nil {
		t.Fatalf("name resolution went outside the sandbox's DNS? %d %s", code, body)
	}
	// The sandbox resolves through the gateway.
	addrs, err := l.resolve("192.0.2.53", "allowed.test")
	if err != nil || len(addrs) != 1 || addrs[0] != allowedHost.String() {
		t.Fatalf("resolve allowed.test: %v %v", addrs, err)
	}
	for _, url := range []string{"https://allowed.test/", "http://allowed.test/", "https://a.wild.test/"} {
		code, body, err := l.get(t, addrs[0], url)
		if err != nil || code != 200 || !strings.HasPrefix(body, "allowed host=") {
			t.Fatalf("%s: %d %q %v", url, code, body, err)
		}
	}
	s := l.gw.Allowed()
	if s.Total < 4 {
		t.Fatalf("allowed counts %+v", s)
	}
}

func TestGatewayCIDRBlocks(t *testing.T) {
	l := newLab(t, defaultRules)
	echo := func(addr string) error {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		c, err := l.dial(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		msg := strings.Repeat("x", 100000)
		go func() { _, _ = io.WriteString(c, msg); _ = c.(*net.TCPConn).CloseWrite() }()
		b, err := io.ReadAll(c)
		if err != nil {
			return err
		}
		if string(b) != msg {
			return fmt.Errorf("echo returned %d bytes", len(b))
		}
		return nil
	}
	if err := echo("198.18.1.20:9000"); err != nil {
		t.Fatalf("CIDR any port: %v", err)
	}
	if code, body, err := l.get(t, "", "http://198.18.1.20/"); err != nil || code != 200 {
		t.Fatalf("CIDR any port, 80: %d %s %v", code, body, err)
	}
	if err := echo("198.18.1.12:9000"); err != nil {
		t.Fatalf("CIDR with port: %v", err)
	}
	// Port 80 there is no block: with names listed it is read as a request
	// for a name, and refused with a 403 since its Host is not listed.
	if code, body, err := l.get(t, "", "http://198.18.1.12/"); err == nil && code != 403 {
		t.Fatalf("CIDR with port 9000 reached port 80: %d %s", code, body)
	}
	if err := echo("198.18.1.10:9000"); err == nil {
		t.Fatal("an unlisted address was reached")
	}
	if !blocked(l.gw, model.EgressKindTCP, "198.18.1.10") {
		t.Fatal("the raw-IP denial is not recorded")
	}
	if s := l.gw.Allowed(); s.Total < 3 {
		t.Fatalf("allowed counts %+v", s)
	}
}

func TestGatewayDeniedHTTPGets403(t *testing.T) {
	l := newLab(t, defaultRules)
	code, body, err := l.get(t, otherHost.String(), "http://other.test/")
	if err != nil || code != 403 || !strings.Contains(body, rules.GatewayNotListed) || !strings.Contains(body, "not on the allow list") || !strings.Contains(body, "other.test:80") {
		t.Fatalf("got %d %q %v", code, body, err)
	}
	code, body, err = l.get(t, otherHost.String(), "http://loop.test/")
	if err != nil || code != 403 || !strings.Contains(body, rules.GatewayNever) || !strings.Contains(body, "never-reachable") || !strings.Contains(body, "loop.test:80") {
		t.Fatalf("got %d %q %v", code, body, err)
	}
	if !blocked(l.gw, model.EgressKindHTTP, "other.test") {
		t.Fatal("not recorded")
	}
}

// Each attempt to get around the rules fails and reaches nothing unlisted
// (newLab's cleanup checks the never-listener and every address dialled).
func TestGatewayBypasses(t *testing.T) {
	l := newLab(t, defaultRules)
	t.Run("raw IP", func(t *testing.T) {
		if _, _, err := l.get(t, "", "https://198.18.1.11/"); err == nil {
			t.Fatal("reached")
		}
		if code, _, err := l.get(t, "", "http://198.18.1.11/"); !refused(code, err) {
			t.Fatal("reached")
		}
		if _, _, err := l.get(t, "", "http://198.18.1.99:9000/"); err == nil {
			t.Fatal("reached")
		}
	})
	t.Run("spoofed SNI, allowed name at an unlisted address", func(t *testing.T) {
		// The gateway dials allowed.test's own resolution, not the address chosen.
		code, body, err := l.get(t, neverHost.String(), "https://allowed.test/")
		if err != nil || code != 200 || !strings.HasPrefix(body, "allowed ") {
			t.Fatalf("got %d %q %v", code, body, err)
		}
		code, body, err = l.get(t, otherHost.String(), "https://allowed.test/")
		if err != nil || !strings.HasPrefix(body, "allowed ") {
			t.Fatalf("got %d %q %v", code, body, err)
		}
	})
	t.Run("spoofed SNI, unlisted name", func(t *testing.T) {
		if _, _, err := l.get(t, otherHost.String(), "https://other.test/"); err == nil {
			t.Fatal("reached")
		}
		if !blocked(l.gw, model.EgressKindTLS, "other.test") {
			t.Fatal("not recorded")
		}
	})
	t.Run("Host differs from SNI", func(t *testing.T) {
		// TLS to allowed.test, then a request for other.test inside: the
		// gateway forwards to allowed.test's address, never to other's.
		req, _ := http.NewRequest("GET", "https://allowed.test/", nil)
		req.Host = "other.test"
		resp, err := l.client(allowedHost.String()).Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.HasPrefix(string(b), "allowed ") {
				t.Fatalf("reached %q", b)
			}
		}
	})
	t.Run("DNS to an outside resolver", func(t *testing.T) {
		if addrs, err := l.resolve(dnsHost.String(), "other.test"); err == nil {
			t.Fatalf("resolved %v", addrs)
		}
		if addrs, err := l.resolve(neverHost.String(), "other.test"); err == nil {
			t.Fatalf("resolved %v", addrs)
		}
		if !blocked(l.gw, model.EgressKindDNS, "other.test") {
			t.Fatal("not recorded")
		}
	})
	t.Run("IPv6 literal", func(t *testing.T) {
		if !l.gw.IPv6 {
			t.Skip("no IPv6 in the sandbox namespace")
		}
		if _, _, err := l.get(t, "", "http://[2001:2:0:1::99]:9000/"); err == nil {
			t.Fatal("reached")
		}
		if code, _, err := l.get(t, "", "http://[2001:2:0:1::10]/"); !refused(code, err) {
			t.Fatal("reached an unlisted IPv6 address")
		}
	})
	t.Run("UDP and QUIC", func(t *testing.T) {
		for _, addr := range []string{"198.18.1.99:443", "198.18.1.11:9001", "198.18.1.99:9001"} {
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
			c, err := l.dial(ctx, "udp", addr)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			// A QUIC Initial's first byte is a long header with the fixed bit.
			_, _ = c.Write(append([]byte{0xc3, 0, 0, 0, 1}, make([]byte, 1200)...))
			_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			if _, err := c.Read(make([]byte, 64)); err == nil {
				t.Fatalf("%s answered", addr)
			}
			c.Close()
		}
		if !blocked(l.gw, model.EgressKindUDP, "198.18.1.99") {
			t.Fatal("not recorded")
		}
	})
	t.Run("rebinding", func(t *testing.T) {
		// The first answer (allowed) is what the sandbox sees; the gateway's
		// own resolution at connect time rebinds to a never address.
		addrs, err := l.resolve("192.0.2.53", "rebind.test")
		if err != nil || len(addrs) != 1 || addrs[0] != otherHost.String() {
			t.Fatalf("resolve: %v %v", addrs, err)
		}
		l.rebound.Store(true)
		code, body, err := l.get(t, otherHost.String(), "http://rebind.test/")
		if err != nil || code != 403 {
			t.Fatalf("got %d %q %v", code, body, err)
		}
	})
	t.Run("allowed name resolving to loopback, metadata or the host", func(t *testing.T) {
		for _, n := range []string{"loop.test", "meta.test", "host.test", "never.test"} {
			if addrs, err := l.resolve("192.0.2.53", n); err == nil {
				t.Fatalf("%s resolved %v", n, addrs)
			}
			if _, _, err := l.get(t, otherHost.String(), "https://"+n+"/"); err == nil {
				t.Fatalf("%s reached", n)
			}
		}
	})
	t.Run("host itself by CIDR", func(t *testing.T) {
		// A block covering the host's own address does not reach it.
		if code, _, err := l.get(t, "", "http://198.18.0.1:9000/"); !refused(code, err) {
			t.Fatal("reached")
		}
	})
}

func TestGatewayHostAndBridgeAreNever(t *testing.T) {
	l := newLab(t, Rules{Blocks: []Block{{Prefix: netip.MustParsePrefix("0.0.0.0/0")}, {Prefix: netip.MustParsePrefix("::/0")}}})
	p := l.gw.pol
	for _, a := range []string{"127.0.0.1", "198.18.0.1", "169.254.169.254", "100.100.100.200", "fd00:ec2::254", "::1", "224.0.0.1", "255.255.255.255", "0.0.0.0", "::ffff:127.0.0.1", "10.1.2.3", "192.168.1.1"} {
		if p.block(netip.MustParseAddr(a), 80) {
			t.Errorf("%s is reachable through 0.0.0.0/0", a)
		}
	}
	if !p.block(otherHost, 80) {
		t.Error("0.0.0.0/0 does not reach a test host")
	}
	p2 := newPolicy(GatewayConfig{Rules: Rules{Blocks: []Block{{Prefix: netip.MustParsePrefix("10.1.0.0/16")}}}})
	if !p2.block(netip.MustParseAddr("10.1.2.3"), 1) || p2.block(netip.MustParseAddr("10.2.0.1"), 1) {
		t.Error("a private block inside 10/8 is not honoured exactly")
	}
}

func TestGatewayFlood(t *testing.T) {
	l := newLab(t, defaultRules)
	base := runtime.NumGoroutine()
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var held []net.Conn
	var mu sync.Mutex
	// Connections that send nothing on 443 hold a flow each until the peek
	// deadline; more than maxFlows of them are refused, not queued.
	for i := 0; i < maxFlows+100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := l.dial(ctx, "tcp", "198.18.1.11:443")
			if err == nil {
				mu.Lock()
				held = append(held, c)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if n := len(l.gw.flows); n > maxFlows {
		t.Fatalf("%d flows", n)
	}
	// The gateway still serves once the flood ends.
	mu.Lock()
	for _, c := range held {
		c.Close()
	}
	mu.Unlock()
	deadline := time.Now().Add(15 * time.Second)
	for len(l.gw.flows) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if n := len(l.gw.flows); n != 0 {
		t.Fatalf("%d flows left after the flood", n)
	}
	if code, _, err := l.get(t, "", "http://198.18.1.20/"); err != nil || code != 200 {
		t.Fatalf("after the flood: %d %v", code, err)
	}
	for i := 0; i < 50 && runtime.NumGoroutine() > base+20; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > base+20 {
		t.Fatalf("goroutines %d, baseline %d", g, base)
	}
}

func TestGatewayCloseRemovesDevice(t *testing.T) {
	l := newLab(t, defaultRules)
	l.gw.Close()
	select {
	case <-l.gw.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("not done")
	}
	err := l.InSandbox(func() error {
		ifs, err := net.Interfaces()
		if err != nil {
			return err
		}
		for _, i := range ifs {
			if i.Name == Interface {
				return errors.New("device still there")
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.get(t, "", "http://198.18.1.20/"); err == nil {
		t.Fatal("reached after Close")
	}
}
