package docker

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// The gateway's proof: before a gateway sandbox is accepted on a daemon (at
// apply, and before the first open in a process), a probe sandbox of the
// template's image runs through a gateway whose resolver and dialer are this
// process's own. The probe client inside (the init binary, gwprobe_client.go)
// tries an allowed name and block, an unlisted address and name, a spoofed
// server name, a name that resolves to loopback, and the host's and the
// bridges' addresses listed as blocks; the dialer records every address the
// gateway asked for. The proof holds when each outcome is the expected one
// and the gateway dialled the allowed destinations and nothing else. Nothing
// leaves the host: every dial ends in this process.
// See docs/design/egress-gateway.md.

// Probe addresses, from the benchmarking range; the dialer answers them in
// process, so they are never reached on any network.
var (
	probeNameAddr  = netip.MustParseAddr("198.18.255.1") // allowed.<probeZone>'s address
	probeOther     = netip.MustParseAddr("198.18.255.2") // unlisted
	probeBlockAddr = netip.MustParseAddr("198.18.255.3") // listed as a block
	probeDNSAddr   = netip.MustParseAddr("198.18.255.53")
)

const probeZone = "probe.sandboxio.invalid"

var (
	gwProofMu  sync.Mutex
	gwProofs   = map[string]gwProof{}
	gwProofTTL = 10 * time.Minute
	// A failure is kept shorter: it may be a passing fault.
	gwProofFailTTL = time.Minute
)

type gwProof struct {
	err error
	at  time.Time
}

// gatewayProven returns the cached verdict for this daemon, probing when
// there is none.
func (b *dockerBackend) gatewayProven(ctx context.Context, spec model.Spec, d *daemonFacts) error {
	key := d.id
	gwProofMu.Lock()
	pr, ok := gwProofs[key]
	gwProofMu.Unlock()
	if ok {
		ttl := gwProofTTL
		if pr.err != nil {
			ttl = gwProofFailTTL
		}
		if time.Since(pr.at) < ttl {
			return pr.err
		}
	}
	err := b.proveGateway(ctx, spec)
	if ctx.Err() != nil {
		return err // cut short: proves nothing either way, kept nowhere
	}
	gwProofMu.Lock()
	gwProofs[key] = gwProof{err: err, at: time.Now()}
	gwProofMu.Unlock()
	return err
}

// forgetGatewayProofs empties the cache (tests).
func forgetGatewayProofs() {
	gwProofMu.Lock()
	defer gwProofMu.Unlock()
	gwProofs = map[string]gwProof{}
}

// gatewayProbe is the probe's resolver and dialer.
type gatewayProbe struct {
	resolver netip.AddrPort
	mu       sync.Mutex
	dialled  []string
	serve    map[string]func(net.Conn) // address:port -> in-process server
}

func (g *gatewayProbe) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if addr == g.resolver.String() {
		// The gateway's own resolution, from the probe's DNS server on
		// this process's loopback.
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	g.mu.Lock()
	g.dialled = append(g.dialled, addr)
	srv := g.serve[addr]
	g.mu.Unlock()
	if srv == nil {
		return nil, fmt.Errorf("probe: %s is not a probe destination", addr)
	}
	c, s := net.Pipe()
	go srv(s)
	return c, nil
}

// proveGateway runs the probe and judges it; a failure is a
// CapabilityNotSupported naming the probe that failed.
func (b *dockerBackend) proveGateway(ctx context.Context, spec model.Spec) error {
	hostAddrs, err := b.hostProbeTargets(ctx)
	if err != nil {
		return gatewayProofError("the host's addresses could not be listed", err)
	}
	dns, err := startProbeDNS()
	if err != nil {
		return gatewayProofError("the probe's DNS server did not start", err)
	}
	defer dns.Close()
	cert, err := probeCert()
	if err != nil {
		return gatewayProofError("the probe's certificate could not be made", err)
	}
	probe := &gatewayProbe{
		resolver: netip.MustParseAddrPort(dns.LocalAddr().String()),
		serve: map[string]func(net.Conn){
			netip.AddrPortFrom(probeNameAddr, 80).String():  serveProbeHTTP("name"),
			netip.AddrPortFrom(probeNameAddr, 443).String(): serveProbeTLS(cert, "name"),
			netip.AddrPortFrom(probeBlockAddr, 80).String(): serveProbeHTTP("block"),
		},
	}
	allow := []string{"allowed." + probeZone, "loop." + probeZone, probeBlockAddr.String() + ":80"}
	for _, a := range hostAddrs {
		allow = append(allow, a.String()) // listed, and still never reached
	}
	ps := model.Spec{SpecVersion: model.SpecVersion, Name: "sandboxio-gateway-probe", Backend: spec.Backend, Image: spec.Image, Runtime: spec.Runtime,
		Resources: model.DefaultCaps(), TimeoutSeconds: 60, LifetimeSeconds: 120,
		Network: model.NetworkPolicy{Egress: model.EgressDeny, Allow: allow}}
	p, err := validate(backends.CreateRequest{Spec: ps}, false)
	if err != nil {
		return gatewayProofError("the probe sandbox's plan was refused", err)
	}
	p.gwProbe = probe
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	s, err := b.create(cctx, p)
	if err != nil {
		return gatewayProofError("the probe sandbox did not start with its gateway", err)
	}
	defer func() { _ = s.Close(context.WithoutCancel(ctx)) }()
	steps, want := probePlan(hostAddrs)
	args := []string{initTarget, probeProto}
	for _, st := range steps {
		args = append(args, st.String())
	}
	res, err := s.Run(cctx, args, backends.RunOptions{Timeout: 45 * time.Second})
	if err != nil {
		return gatewayProofError("the probe client did not run", err)
	}
	if err := judgeProbe(string(res.Stdout), steps, want); err != nil {
		return gatewayProofError(err.Error(), nil)
	}
	probe.mu.Lock()
	dialled := slices.Clone(probe.dialled)
	probe.mu.Unlock()
	slices.Sort(dialled)
	dialled = slices.Compact(dialled)
	expected := []string{
		netip.AddrPortFrom(probeNameAddr, 443).String(),
		netip.AddrPortFrom(probeNameAddr, 80).String(),
		netip.AddrPortFrom(probeBlockAddr, 80).String(),
	}
	slices.Sort(expected)
	if !slices.Equal(dialled, expected) {
		return gatewayProofError(fmt.Sprintf("the gateway dialled %s, where only %s were allowed", strings.Join(dialled, ", "), strings.Join(expected, ", ")), nil)
	}
	return nil
}

// probePlan is the probe client's steps and, for each, a test of its
// outcome with the name of what it proves.
func probePlan(hostAddrs []netip.Addr) ([]probeStep, []probeWant) {
	dnsAt := netip.AddrPortFrom(probeDNSAddr, 53).String()
	at := func(a netip.Addr, port uint16) string { return netip.AddrPortFrom(a, port).String() }
	reached := func(marker string) func(string) bool {
		return func(o string) bool { return strings.Contains(o, "sandboxio-probe "+marker) }
	}
	notReached := func(o string) bool { return !strings.Contains(o, "sandboxio-probe") && o != "connected" }
	refusedHTTP := func(o string) bool { return strings.HasPrefix(o, "answer HTTP/1.1 403") }
	steps := []probeStep{
		{"dns", dnsAt, "allowed." + probeZone},
		{"http", at(probeNameAddr, 80), "allowed." + probeZone},
		{"http", at(probeBlockAddr, 80), "block"},
		{"dns", dnsAt, "unlisted." + probeZone},
		{"http", at(probeOther, 80), "unlisted." + probeZone},
		{"tcp", at(probeOther, 22), ""},
		{"tls", at(probeOther, 443), "allowed." + probeZone},
		{"tls", at(probeNameAddr, 443), "unlisted." + probeZone},
		{"http", at(probeNameAddr, 80), "loop." + probeZone},
	}
	want := []probeWant{
		{"an allowed name resolves to its own address", func(o string) bool { return o == "address "+probeNameAddr.String() }},
		{"an allowed name is reached", reached("name")},
		{"an allowed block is reached", reached("block")},
		{"an unlisted name does not resolve", func(o string) bool { return strings.HasPrefix(o, "rcode ") }},
		{"an unlisted destination is refused with a 403", refusedHTTP},
		{"an unlisted address is not reached", notReached},
		{"a spoofed server name reaches the name's own address, not the one the sandbox chose", reached("name")},
		{"an unlisted server name is not reached", notReached},
		{"a name that resolves to loopback is refused", refusedHTTP},
	}
	for _, a := range hostAddrs {
		steps = append(steps, probeStep{"tcp", at(a, 22), ""})
		want = append(want, probeWant{"the host's address " + a.String() + " is not reached", notReached})
	}
	return steps, want
}

type probeWant struct {
	what string
	ok   func(outcome string) bool
}

// judgeProbe matches the client's lines to the steps, in order.
func judgeProbe(out string, steps []probeStep, want []probeWant) error {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(steps) {
		return fmt.Errorf("the probe client printed %d outcomes for %d steps", len(lines), len(steps))
	}
	for i, st := range steps {
		step, outcome, ok := strings.Cut(lines[i], " => ")
		if !ok || step != st.String() {
			return fmt.Errorf("the probe client's outcome %d is not of step %s", i, st)
		}
		if !want[i].ok(outcome) {
			return fmt.Errorf("probe %q failed: %s gave %q", want[i].what, st, outcome)
		}
	}
	return nil
}

func gatewayProofError(why string, err error) error {
	return &model.Error{Class: model.ErrCapabilityNotSupported, Rule: rules.GatewayNotProven, Attribute: "network.allow",
		Message: "the egress gateway is not proven on this Docker daemon: " + why + ", so an allow list there would not be known to hold",
		Fix:     "run the sandbox as root on a Linux daemon host with /dev/net/tun and the runc runtime (the gateway's device lives in the container's namespace), or remove allow and keep egress denied",
		Err:     err}
}

// hostProbeTargets are addresses the sandbox must never reach: one address
// of each of the host's interfaces that is not loopback, and the gateway
// address of each Docker network.
func (b *dockerBackend) hostProbeTargets(ctx context.Context) ([]netip.Addr, error) {
	ifs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, a := range ifs {
		pf, err := netip.ParsePrefix(a.String())
		if err != nil || pf.Addr().IsLoopback() || pf.Addr().IsLinkLocalUnicast() || !pf.Addr().Is4() {
			continue
		}
		out = append(out, pf.Addr())
	}
	nets, err := b.networkSubnets(ctx)
	if err != nil {
		return nil, err
	}
	for _, n := range nets {
		if n.Addr().Is4() && n.Bits() < 31 {
			out = append(out, n.Addr().Next()) // Docker's bridge gateway is the first address
		}
	}
	slices.SortFunc(out, func(x, y netip.Addr) int { return x.Compare(y) })
	out = slices.Compact(out)
	if len(out) > 8 {
		out = out[:8]
	}
	return out, nil
}

// startProbeDNS answers the gateway's questions about the probe's names on
// a loopback port of this process.
func startProbeDNS() (net.PacketConn, error) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if ans := probeAnswer(buf[:n]); ans != nil {
				_, _ = pc.WriteTo(ans, from)
			}
		}
	}()
	return pc, nil
}

func probeAnswer(q []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(q)
	if err != nil {
		return nil
	}
	question, err := p.Question()
	if err != nil {
		return nil
	}
	addr := map[string]netip.Addr{
		"allowed." + probeZone + ".": probeNameAddr,
		"loop." + probeZone + ".":    netip.MustParseAddr("127.0.0.1"),
	}[strings.ToLower(question.Name.String())]
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true}
	if !addr.IsValid() {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	_ = b.StartQuestions()
	_ = b.Question(question)
	if addr.IsValid() && question.Type == dnsmessage.TypeA {
		_ = b.StartAnswers()
		_ = b.AResource(dnsmessage.ResourceHeader{Name: question.Name, Class: dnsmessage.ClassINET, TTL: 30}, dnsmessage.AResource{A: addr.As4()})
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}

func serveProbeHTTP(marker string) func(net.Conn) {
	return func(c net.Conn) {
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 4096)
		_, _ = c.Read(buf)
		body := "sandboxio-probe " + marker + "\n"
		_, _ = fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
	}
}

func serveProbeTLS(cert tls.Certificate, marker string) func(net.Conn) {
	return func(c net.Conn) {
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		t := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
		if err := t.Handshake(); err != nil {
			return
		}
		_, _ = fmt.Fprintf(t, "sandboxio-probe %s\n", marker)
		_ = t.Close()
	}
}

// probeCert is a throwaway self-signed certificate for the probe's TLS
// server (the client does not verify it).
func probeCert() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "allowed." + probeZone},
		DNSNames: []string{"allowed." + probeZone}, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
