package egress

import (
	"context"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
	"gvisor.dev/gvisor/pkg/waiter"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker/egress/broker"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Bounds of one gateway, whatever the sandbox sends.
const (
	maxFlows     = 256 // concurrent TCP connections and UDP flows
	maxInFlight  = 64  // half-open TCP connections in the forwarder
	idleTimeout  = 2 * time.Minute
	udpIdle      = 30 * time.Second
	dialTimeout  = 5 * time.Second
	spliceBuffer = 32 << 10
	linkQueue    = 512
)

// The gateway's device carries the largest packets a TUN device takes, as
// slirp4netns does: the cost of the user-space stack is per packet, so a
// download moves in a few dozen times fewer of them than at Ethernet's MTU.
// The stack sends nothing longer; the sandbox cannot raise it (it has no
// CAP_NET_ADMIN), and a longer packet would be cut at gatewayRead and
// refused by the parser's length checks.
const (
	gatewayMTU  = 65520
	gatewayRead = 65536
)

// Gateway terminates one sandbox's traffic in a user-space network stack
// and re-originates from the host what its rules allow.
type Gateway struct {
	f       *os.File
	rc      syscall.RawConn
	ep      *channel.Endpoint
	s       *stack.Stack
	pol     *policy
	res     resolver
	dial    dialFunc
	rec     *Record
	ok      allowed
	brk     *broker.Broker
	roots   *x509.CertPool
	onBrk   func(broker.Request)
	flows   chan struct{}
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{}
	closing sync.Once
	IPv6    bool
}

// AttachGateway attaches a gateway to the network namespace of process
// pid of container id, with the same checks as Attach.
func AttachGateway(pid int, containerID string, cfg GatewayConfig) (*Gateway, error) {
	nsfd, err := sandboxNetns(pid, containerID)
	if err != nil {
		return nil, err
	}
	defer unix.Close(nsfd)
	return attachGatewayNetns(nsfd, cfg)
}

func attachGatewayNetns(nsfd int, cfg GatewayConfig) (*Gateway, error) {
	if !cfg.Resolver.IsValid() || cfg.Resolver.Port() == 0 {
		return nil, errors.New("egress gateway: no resolver configured")
	}
	dial := cfg.Dialer
	if dial == nil {
		d := &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
		dial = d.DialContext
	}
	g := &Gateway{
		pol: newPolicy(cfg), dial: dial, rec: NewRecord(),
		brk: cfg.Broker, roots: cfg.BrokerRoots, onBrk: cfg.OnBrokered,
		flows: make(chan struct{}, maxFlows), done: make(chan struct{}),
	}
	g.res = resolver{server: cfg.Resolver, dial: dial}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	if err := g.newStack(); err != nil {
		return nil, err
	}
	f, v6, err := attachNetns(nsfd, gatewayMTU, true)
	if err != nil {
		g.s.Close()
		return nil, err
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		g.s.Close()
		return nil, err
	}
	g.f, g.rc, g.IPv6 = f, rc, v6
	go g.run()
	return g, nil
}

func (g *Gateway) newStack() error {
	g.s = stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol, ipv6.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol, udp.NewProtocol},
	})
	g.ep = channel.New(linkQueue, gatewayMTU, "")
	// The stack leaves TCP and UDP checksums to the device (see
	// writePacket); the sandbox's kernel sends full ones.
	g.ep.LinkEPCapabilities = stack.CapabilityTXChecksumOffload
	if err := g.s.CreateNIC(1, g.ep); err != nil {
		return fmt.Errorf("egress gateway: netstack: %s", err)
	}
	// Every destination is terminated here: accept packets to any address
	// and answer from it.
	if err := g.s.SetPromiscuousMode(1, true); err != nil {
		return fmt.Errorf("egress gateway: netstack: %s", err)
	}
	if err := g.s.SetSpoofing(1, true); err != nil {
		return fmt.Errorf("egress gateway: netstack: %s", err)
	}
	g.s.SetRouteTable([]tcpip.Route{
		{Destination: header.IPv4EmptySubnet, NIC: 1},
		{Destination: header.IPv6EmptySubnet, NIC: 1},
	})
	tf := tcp.NewForwarder(g.s, 0, maxInFlight, g.tcp)
	g.s.SetTransportProtocolHandler(tcp.ProtocolNumber, tf.HandlePacket)
	uf := udp.NewForwarder(g.s, g.udp)
	g.s.SetTransportProtocolHandler(udp.ProtocolNumber, uf.HandlePacket)
	return nil
}

// run moves packets between the device and the stack until either fails;
// then everything ends (fail closed: the device goes with its file).
func (g *Gateway) run() {
	defer close(g.done)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			pkt := g.ep.ReadContext(g.ctx)
			if pkt == nil {
				return
			}
			err := g.writePacket(pkt)
			pkt.DecRef()
			if err != nil && !errors.Is(err, unix.EINTR) && !errors.Is(err, unix.EIO) {
				g.shutdown()
				return
			}
		}
	}()
	buf := make([]byte, vnetHdrLen+gatewayRead)
	for {
		n, err := g.f.Read(buf)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			break
		}
		if n > vnetHdrLen {
			g.inbound(buf[vnetHdrLen:n])
		}
	}
	g.shutdown()
	wg.Wait()
	g.s.Close()
	g.s.Wait()
}

// inbound hands TCP and UDP to the stack; anything else is recorded and
// dropped (ICMP echo would otherwise be answered for every address).
func (g *Gateway) inbound(b []byte) {
	p, ok := parseIP(b)
	if !ok {
		return
	}
	if p.proto != protoTCP && p.proto != protoUDP {
		if a, ok, _ := Inspect(b, nil); ok {
			g.rec.Add(a)
		}
		return
	}
	proto := header.IPv4ProtocolNumber
	if p.v6 {
		proto = header.IPv6ProtocolNumber
	}
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(append([]byte(nil), b...))})
	g.ep.InjectInbound(proto, pkt)
	pkt.DecRef()
}

// vnetHdrLen is the size of struct virtio_net_hdr, which IFF_VNET_HDR puts
// before every packet in both directions; virtioNeedsCsum is its flag
// VIRTIO_NET_HDR_F_NEEDS_CSUM (linux/virtio_net.h).
const (
	vnetHdrLen        = 10
	virtioNeedsCsum   = 1
	udpChecksumOffset = 6
)

// writePacket writes one packet of the stack to the device, without
// copying it. A TCP or UDP packet goes with its pseudo-header sum only and
// the header's NEEDS_CSUM flag: the kernel takes it as CHECKSUM_PARTIAL,
// which a local socket accepts without summing the payload. That spares
// the per-byte checksum on both sides of the device, the largest cost of a
// download left in user space.
func (g *Gateway) writePacket(pkt *stack.PacketBuffer) error {
	var hdr [vnetHdrLen]byte
	nh, th := pkt.NetworkHeader().Slice(), pkt.TransportHeader().Slice()
	var off int
	switch pkt.TransportProtocolNumber {
	case header.TCPProtocolNumber:
		off = header.TCPChecksumOffset
	case header.UDPProtocolNumber:
		off = udpChecksumOffset
	}
	if off != 0 && len(th) >= off+2 && len(nh) > 0 {
		var src, dst tcpip.Address
		if header.IPVersion(nh) == header.IPv4Version {
			ip := header.IPv4(nh)
			src, dst = ip.SourceAddress(), ip.DestinationAddress()
		} else {
			ip := header.IPv6(nh)
			src, dst = ip.SourceAddress(), ip.DestinationAddress()
		}
		l4 := pkt.Size() - len(nh)
		binary.BigEndian.PutUint16(th[off:], header.PseudoHeaderChecksum(pkt.TransportProtocolNumber, src, dst, uint16(l4)))
		hdr[0] = virtioNeedsCsum
		binary.LittleEndian.PutUint16(hdr[6:], uint16(len(nh))) // csum_start
		binary.LittleEndian.PutUint16(hdr[8:], uint16(off))     // csum_offset
	}
	bufs := append([][]byte{hdr[:]}, pkt.AsSlices()...)
	var werr error
	if err := g.rc.Write(func(fd uintptr) bool {
		_, werr = unix.Writev(int(fd), bufs)
		return !errors.Is(werr, unix.EAGAIN)
	}); err != nil {
		return err
	}
	return werr
}

func (g *Gateway) shutdown() {
	g.closing.Do(func() {
		g.cancel()
		if g.f != nil {
			_ = g.f.Close()
		}
		g.ep.Close()
	})
}

// Record is the gateway's blocked attempts; it stays readable after Close.
func (g *Gateway) Record() *Record { return g.rec }

// Allowed is the gateway's allowed connections.
func (g *Gateway) Allowed() AllowedSnapshot { return g.ok.snapshot() }

// Close stops the gateway and releases the device (the sandbox then has no
// route at all). Idempotent.
func (g *Gateway) Close() {
	g.shutdown()
	select {
	case <-g.done:
	case <-time.After(closeWait):
	}
}

// Flows is the number of connections and UDP flows the gateway holds now.
func (g *Gateway) Flows() int { return len(g.flows) }

// Done is closed when the gateway has ended.
func (g *Gateway) Done() <-chan struct{} { return g.done }

func addrOf(a tcpip.Address) netip.Addr {
	ip, _ := netip.AddrFromSlice(a.AsSlice())
	return ip.Unmap()
}

func (g *Gateway) acquire() bool {
	select {
	case g.flows <- struct{}{}:
		return true
	default:
		return false
	}
}

func (g *Gateway) release() { <-g.flows }

func (g *Gateway) tcp(r *tcp.ForwarderRequest) {
	id := r.ID()
	dst, port := addrOf(id.LocalAddress), id.LocalPort
	tcpAttempt := Attempt{Kind: model.EgressKindTCP, Dst: dst, Port: port, Proto: protoTCP}
	if !g.acquire() {
		g.rec.Add(tcpAttempt)
		r.Complete(true)
		return
	}
	switch {
	case g.pol.block(dst, port):
		ctx, cancel := context.WithTimeout(g.ctx, dialTimeout)
		up, err := g.dial(ctx, "tcp", netip.AddrPortFrom(dst, port).String())
		cancel()
		if err != nil {
			g.release()
			r.Complete(true)
			return
		}
		c, ok := g.accept(r)
		if !ok {
			up.Close()
			g.release()
			return
		}
		g.ok.add(AllowedDestination{Kind: model.EgressKindTCP, Address: dst.String(), Port: int(port), Protocol: protoTCP})
		go func() { defer g.release(); splice(c, up) }()
	case (port == 443 || port == 80) && len(g.pol.rules.Names) > 0:
		c, ok := g.accept(r)
		if !ok {
			g.release()
			return
		}
		go func() { defer g.release(); g.named(c, dst, port) }()
	default:
		g.release()
		g.rec.Add(tcpAttempt)
		r.Complete(true)
	}
}

// sConn is a connection the stack terminated, with its endpoint (to reset).
type sConn struct {
	*gonet.TCPConn
	ep tcpip.Endpoint
}

func (g *Gateway) accept(r *tcp.ForwarderRequest) (sConn, bool) {
	var wq waiter.Queue
	ep, err := r.CreateEndpoint(&wq)
	if err != nil {
		r.Complete(true)
		return sConn{}, false
	}
	r.Complete(false)
	return sConn{gonet.NewTCPConn(&wq, ep), ep}, true
}

// named serves a connection on 443 or 80 to a name: it reads the name the
// client asks for, resolves it itself and dials that, never dst.
func (g *Gateway) named(c sConn, dst netip.Addr, port uint16) {
	_ = c.SetReadDeadline(time.Now().Add(peekTimeout))
	kind := model.EgressKindTLS
	var raw []byte
	var name string
	var ok bool
	if port == 443 {
		raw, name, ok = readClientHello(c)
	} else {
		kind = model.EgressKindHTTP
		var err error
		raw, err = readHead(c)
		if err == nil {
			name, ok = requestHost(raw)
		}
	}
	deny := func(why denial) {
		g.rec.Add(Attempt{Kind: model.EgressKindTCP, Dst: dst, Port: port, Proto: protoTCP})
		if name != "" {
			g.rec.Add(Attempt{Kind: kind, Dst: dst, Port: port, Proto: protoTCP, Name: name})
		}
		if kind == model.EgressKindHTTP {
			what := name
			if what == "" {
				what = dst.String()
			}
			body := "sandboxio egress gateway: refused " + net.JoinHostPort(what, strconv.Itoa(int(port))) + ": " + why.reason + " (" + why.rule + ")\n"
			_ = c.SetWriteDeadline(time.Now().Add(peekTimeout))
			_, _ = io.WriteString(c, "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: "+
				strconv.Itoa(len(body))+"\r\n\r\n"+body)
			_ = c.CloseWrite()
			time.Sleep(50 * time.Millisecond)
			c.Close()
			return
		}
		abort(c)
	}
	if !ok {
		deny(denyMalformed)
		return
	}
	if !g.pol.listed(name) {
		deny(denyNotListed)
		return
	}
	if port == 443 && g.brk != nil && g.brk.Intercepts(name) {
		g.brokered(c, raw, dst, name)
		return
	}
	addrs, err := g.res.lookup(g.ctx, name)
	if err != nil || len(addrs) == 0 {
		deny(denyNoAddress)
		return
	}
	var up net.Conn
	var to netip.Addr
	usable := false
	for _, a := range addrs {
		if !g.pol.usable(a, port) {
			continue
		}
		usable = true
		ctx, cancel := context.WithTimeout(g.ctx, dialTimeout)
		up, err = g.dial(ctx, "tcp", netip.AddrPortFrom(a, port).String())
		cancel()
		if err == nil {
			to = a
			break
		}
	}
	if !usable {
		deny(denyNever)
		return
	}
	if up == nil {
		abort(c)
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	if _, err := up.Write(raw); err != nil {
		up.Close()
		abort(c)
		return
	}
	g.ok.add(AllowedDestination{Kind: kind, Name: name, Address: to.String(), Port: int(port), Protocol: protoTCP})
	splice(c, up)
}

// brokered hands a TLS connection to a secret's host to the broker. Its
// upstream connections go where named's would: the name's own resolution,
// never-reachable and unlisted private addresses left out, looked up again
// for each one.
func (g *Gateway) brokered(c sConn, raw []byte, dst netip.Addr, name string) {
	dial := func(ctx context.Context) (net.Conn, error) {
		addrs, err := g.res.lookup(ctx, name)
		if err != nil {
			return nil, err
		}
		for _, a := range addrs {
			if !g.pol.usable(a, 443) {
				continue
			}
			dctx, cancel := context.WithTimeout(ctx, dialTimeout)
			up, err := g.dial(dctx, "tcp", netip.AddrPortFrom(a, 443).String())
			cancel()
			if err == nil {
				g.ok.add(AllowedDestination{Kind: model.EgressKindTLS, Name: name, Address: a.String(), Port: 443, Protocol: protoTCP})
				return up, nil
			}
		}
		g.rec.Add(Attempt{Kind: model.EgressKindTLS, Dst: dst, Port: 443, Proto: protoTCP, Name: name})
		return nil, errors.New("egress gateway: " + name + " has no address the gateway may dial")
	}
	_ = g.brk.Serve(g.ctx, c, raw, name, dial, g.roots, g.onBrk)
}

// abort resets the connection at once.
func abort(c sConn) {
	c.ep.Abort()
	c.Close()
}

type halfCloser interface {
	net.Conn
	CloseWrite() error
}

// splice copies both ways, closing each direction's write side when its
// reader ends, until both end or a direction is idle for idleTimeout.
func splice(a sConn, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	cp := func(dst, src net.Conn) {
		defer wg.Done()
		buf := make([]byte, spliceBuffer)
		for {
			_ = src.SetReadDeadline(time.Now().Add(idleTimeout))
			n, err := src.Read(buf)
			if n > 0 {
				_ = dst.SetWriteDeadline(time.Now().Add(idleTimeout))
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				if errors.Is(err, os.ErrDeadlineExceeded) {
					a.Close()
					b.Close()
				}
				break
			}
		}
		if h, ok := dst.(halfCloser); ok {
			_ = h.CloseWrite()
		} else {
			dst.Close()
		}
	}
	go cp(b, a)
	go cp(a, b)
	wg.Wait()
	a.Close()
	b.Close()
}

func (g *Gateway) udp(r *udp.ForwarderRequest) {
	id := r.ID()
	dst, port := addrOf(id.LocalAddress), id.LocalPort
	if port == 53 {
		g.dnsFlow(r)
		return
	}
	if !g.pol.block(dst, port) || !g.acquire() {
		g.rec.Add(Attempt{Kind: model.EgressKindUDP, Dst: dst, Port: port, Proto: protoUDP})
		return
	}
	var wq waiter.Queue
	ep, err := r.CreateEndpoint(&wq)
	if err != nil {
		g.release()
		return
	}
	c := gonet.NewUDPConn(&wq, ep)
	ctx, cancel := context.WithTimeout(g.ctx, dialTimeout)
	up, derr := g.dial(ctx, "udp", netip.AddrPortFrom(dst, port).String())
	cancel()
	if derr != nil {
		c.Close()
		g.release()
		return
	}
	g.ok.add(AllowedDestination{Kind: model.EgressKindUDP, Address: dst.String(), Port: int(port), Protocol: protoUDP})
	go func() {
		defer g.release()
		relayUDP(c, up)
	}()
}

func relayUDP(c *gonet.UDPConn, up net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		buf := make([]byte, 65535)
		for {
			_ = src.SetReadDeadline(time.Now().Add(udpIdle))
			n, err := src.Read(buf)
			if err != nil {
				break
			}
			_, _ = dst.Write(buf[:n])
		}
		done <- struct{}{}
	}
	go cp(up, c)
	go cp(c, up)
	<-done
	c.Close()
	up.Close()
	<-done
}

// dnsFlow answers the sandbox's DNS queries on one flow, whatever address
// they were sent to.
func (g *Gateway) dnsFlow(r *udp.ForwarderRequest) {
	if !g.acquire() {
		return
	}
	var wq waiter.Queue
	ep, err := r.CreateEndpoint(&wq)
	if err != nil {
		g.release()
		return
	}
	c := gonet.NewUDPConn(&wq, ep)
	go func() {
		defer g.release()
		defer c.Close()
		buf := make([]byte, 1500)
		for i := 0; i < 64; i++ {
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			out := g.dnsAnswer(buf[:n])
			if out != nil {
				_, _ = c.Write(out)
			}
		}
	}()
}

// dnsAnswer is the reply to one query datagram (nil: none).
func (g *Gateway) dnsAnswer(b []byte) []byte {
	q, ok := parseQuery(b)
	if !ok {
		return nil
	}
	if !g.pol.listed(q.name) {
		g.rec.Add(Attempt{Kind: model.EgressKindDNS, Name: q.name})
		return q.refused()
	}
	addrs, err := g.res.lookup(g.ctx, q.name)
	var use []netip.Addr
	for _, a := range addrs {
		if g.pol.usable(a, 443) || g.pol.usable(a, 80) {
			use = append(use, a)
		}
	}
	if err != nil || len(use) == 0 {
		g.rec.Add(Attempt{Kind: model.EgressKindDNS, Name: q.name})
		return answer(q, nil, dnsmessage.RCodeNameError)
	}
	g.ok.add(AllowedDestination{Kind: model.EgressKindDNS, Name: q.name})
	return answer(q, use, dnsmessage.RCodeSuccess)
}
