package egress

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/capabilities"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker/egress/broker"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
)

// Block is an allowed CIDR destination of the gateway. Port 0: any port.
type Block struct {
	Prefix netip.Prefix
	Port   uint16
	Entry  string // the allow-list entry, as written, for messages
}

// Rules is what the gateway forwards; everything else is refused.
type Rules struct {
	Blocks []Block
	// Names are canonical lowercase A-label names without a trailing dot;
	// "*.example.com" is any name strictly below example.com (not the apex).
	Names []string
}

// GatewayConfig configures AttachGateway.
type GatewayConfig struct {
	Rules Rules
	// Resolver is the upstream DNS server the gateway asks (UDP, then TCP on
	// truncation); required.
	Resolver netip.AddrPort
	// Never are extra never-reachable prefixes (Docker network subnets).
	Never []netip.Prefix
	// Dialer dials the host side; nil: a net.Dialer with timeouts.
	Dialer func(ctx context.Context, network, addr string) (net.Conn, error)
	// Broker, when set, serves TLS on 443 to the names it intercepts (the
	// hosts of brokered secrets); every other name is spliced untouched.
	Broker *broker.Broker
	// BrokerRoots verify the broker's upstream hosts (nil: the host's
	// trust store).
	BrokerRoots *x509.CertPool
	// OnBrokered gets each brokered request (never a value); may be nil.
	OnBrokered func(broker.Request)
}

// AllowedDestination is one distinct destination the gateway forwarded to.
type AllowedDestination struct {
	Kind     string // tcp, tls, http, udp, dns
	Name     string // tls, http, dns: the name
	Address  string // tcp, udp, tls, http: the address dialled
	Port     int
	Protocol int
	Count    int64
}

// AllowedSnapshot counts the allowed connections (and answered DNS queries)
// and lists the first MaxDestinations distinct destinations.
type AllowedSnapshot struct {
	Total        int64
	Destinations []AllowedDestination
}

type allowed struct {
	mu    sync.Mutex
	total int64
	index map[AllowedDestination]int
	list  []AllowedDestination
}

func (a *allowed) add(d AllowedDestination) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.total++
	if a.index == nil {
		a.index = map[AllowedDestination]int{}
	}
	if i, ok := a.index[d]; ok {
		a.list[i].Count++
		return
	}
	if len(a.list) >= MaxDestinations {
		return
	}
	a.index[d] = len(a.list)
	d.Count = 1
	a.list = append(a.list, d)
}

func (a *allowed) snapshot() AllowedSnapshot {
	a.mu.Lock()
	defer a.mu.Unlock()
	return AllowedSnapshot{Total: a.total, Destinations: slices.Clone(a.list)}
}

// denial is why a connection was refused: its rule and, as the 403 body
// gives it, the reason in a few words.
type denial struct{ rule, reason string }

var (
	denyNotListed = denial{rules.GatewayNotListed, "not on the allow list"}
	denyNever     = denial{rules.GatewayNever, "resolves only to never-reachable addresses"}
	denyNoAddress = denial{rules.GatewayNoAddress, "does not resolve"}
	denyMalformed = denial{rules.GatewayMalformed, "the request names no single host"}
)

var (
	// fixedNever are never reachable whatever the rules say: the capability
	// data's never_egress, which the plan refuses entries inside, and the
	// sandbox's own addresses in the gateway's stack.
	fixedNever = append(slices.Clone(neverData.Blocks),
		netip.MustParsePrefix("192.0.0.8/32"),
		netip.MustParsePrefix("2001:db8::2/128"),
	)
	// neverData is the capability data's never_egress, read once.
	neverData = capabilities.Never()
	// private are reachable only through a Block lying entirely inside one.
	private = []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("172.16.0.0/12"),
		netip.MustParsePrefix("192.168.0.0/16"),
		netip.MustParsePrefix("100.64.0.0/10"),
		netip.MustParsePrefix("fc00::/7"),
	}
)

// hostRefresh bounds how stale the host's own addresses may be.
const hostRefresh = 3 * time.Second

// policy decides what the gateway forwards.
type policy struct {
	rules Rules
	never []netip.Prefix

	mu       sync.Mutex
	hostAt   time.Time
	hostNets []netip.Prefix
}

func newPolicy(cfg GatewayConfig) *policy {
	p := &policy{rules: cfg.Rules}
	for _, b := range cfg.Never {
		p.never = append(p.never, b.Masked())
	}
	for i, b := range p.rules.Blocks {
		p.rules.Blocks[i].Prefix = b.Prefix.Masked()
	}
	return p
}

// host is the host's own addresses (single-address prefixes) and the whole
// prefixes of its bridges, re-read at most every hostRefresh.
func (p *policy) host() []netip.Prefix {
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.hostAt) < hostRefresh && p.hostNets != nil {
		return p.hostNets
	}
	nets := []netip.Prefix{}
	ifs, err := net.Interfaces()
	if err != nil {
		// The host's addresses unknown: nothing is reachable (fail closed).
		return []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}
	}
	for _, ifc := range ifs {
		addrs, err := ifc.Addrs()
		if err != nil {
			return []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}
		}
		_, err = os.Stat("/sys/class/net/" + ifc.Name + "/bridge")
		bridge := err == nil
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(ipn.IP)
			if !ok {
				continue
			}
			ip = ip.Unmap()
			bits := ip.BitLen()
			if bridge {
				bits, _ = ipn.Mask.Size()
				if ip.Is4() && len(ipn.Mask) == 16 {
					bits -= 96
				}
			}
			if pf, err := ip.Prefix(bits); err == nil {
				nets = append(nets, pf)
			}
		}
	}
	p.hostNets, p.hostAt = nets, time.Now()
	return nets
}

// never reports whether a is never reachable, whatever the rules say.
func (p *policy) neverReachable(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsValid() || a.Zone() != "" {
		return true
	}
	for _, set := range [][]netip.Prefix{fixedNever, p.never, p.host()} {
		for _, pf := range set {
			if pf.Contains(a) {
				return true
			}
		}
	}
	return false
}

// block reports whether a Block allows a:port (proto tcp or udp).
func (p *policy) block(a netip.Addr, port uint16) bool {
	a = a.Unmap()
	if p.neverReachable(a) {
		return false
	}
	var priv netip.Prefix
	for _, pf := range private {
		if pf.Contains(a) {
			priv = pf
		}
	}
	for _, b := range p.rules.Blocks {
		if !b.Prefix.Contains(a) || (b.Port != 0 && b.Port != port) {
			continue
		}
		if priv.IsValid() && (b.Prefix.Bits() < priv.Bits() || !priv.Contains(b.Prefix.Addr())) {
			continue
		}
		return true
	}
	return false
}

// usable reports whether an address a listed name resolves to may be
// dialled: never the never-reachable, private only where a Block lies
// inside the private range.
func (p *policy) usable(a netip.Addr, port uint16) bool {
	a = a.Unmap()
	if p.neverReachable(a) {
		return false
	}
	for _, pf := range private {
		if pf.Contains(a) {
			return p.block(a, port)
		}
	}
	return true
}

// listed reports whether name (lowercase, as read off the wire) is allowed.
func (p *policy) listed(name string) bool {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	if name == "" || strings.ContainsAny(name, "\\ ") || neverName(name) {
		return false
	}
	for _, n := range p.rules.Names {
		if suffix, ok := strings.CutPrefix(n, "*."); ok {
			if strings.HasSuffix(name, "."+suffix) && len(name) > len(suffix)+1 {
				return true
			}
		} else if name == n {
			return true
		}
	}
	return false
}

// NeverEntry reports whether an allow-list block lies wholly inside a range
// no sandbox may reach (the capability data's never_egress), or a name is
// one: such an entry would never work, so it is refused, not ignored.
func NeverEntry(pf netip.Prefix, name string) bool {
	if name != "" {
		return neverName(strings.ToLower(strings.TrimPrefix(name, "*.")))
	}
	for _, n := range neverData.Blocks {
		if within(pf, n) {
			return true
		}
	}
	return false
}

// within reports whether all of pf lies inside n.
func within(pf, n netip.Prefix) bool {
	return n.Addr().Is4() == pf.Addr().Is4() && n.Bits() <= pf.Bits() && n.Contains(pf.Addr())
}

// neverName: a name no sandbox may reach (never_egress names and suffixes),
// whatever the list says; the plan refuses such entries (SBX-NET-014).
func neverName(name string) bool {
	if slices.Contains(neverData.Names, name) {
		return true
	}
	for _, s := range neverData.Suffixes {
		if name == s || strings.HasSuffix(name, "."+s) {
			return true
		}
	}
	return false
}

// Limits of what the gateway reads before it decides.
const (
	maxHello    = 16 << 10
	maxHead     = 8 << 10
	peekTimeout = 10 * time.Second
)

var errTooLong = errors.New("too long")

// readClientHello reads one TLS ClientHello from r, reassembled across
// records and segments, bounded by maxHello. It returns the bytes read (to
// replay) and the server name (escaped lowercase); ok false when r does not
// start with a ClientHello naming a host.
func readClientHello(r interface{ Read([]byte) (int, error) }) (raw []byte, name string, ok bool) {
	var hs []byte // handshake bytes
	need := -1    // handshake message length, once known
	for {
		hdr, err := readN(r, &raw, 5)
		if err != nil || hdr[0] != 22 || hdr[1] != 3 {
			return raw, "", false
		}
		n := int(hdr[3])<<8 | int(hdr[4])
		if n == 0 || len(raw)+n > maxHello {
			return raw, "", false
		}
		body, err := readN(r, &raw, n)
		if err != nil {
			return raw, "", false
		}
		hs = append(hs, body...)
		if need < 0 && len(hs) >= 4 {
			if hs[0] != 1 {
				return raw, "", false
			}
			need = 4 + (int(hs[1])<<16 | int(hs[2])<<8 | int(hs[3]))
			if need > maxHello {
				return raw, "", false
			}
		}
		if need >= 0 && len(hs) >= need {
			break
		}
	}
	name, ok = helloName(hs[:need])
	return raw, name, ok
}

// helloName is the server name of a ClientHello handshake message hs
// (header included).
func helloName(hs []byte) (string, bool) {
	rec := make([]byte, 5, 5+len(hs))
	rec[0] = 22
	return serverName(append(rec, hs...))
}

func readN(r interface{ Read([]byte) (int, error) }, raw *[]byte, n int) ([]byte, error) {
	start := len(*raw)
	*raw = slices.Grow(*raw, n)
	for len(*raw)-start < n {
		m, err := r.Read((*raw)[len(*raw) : start+n])
		*raw = (*raw)[:len(*raw)+m]
		if err != nil && len(*raw)-start < n {
			return nil, err
		}
	}
	return (*raw)[start : start+n], nil
}

// readHead reads an HTTP/1 request head (up to the blank line), bounded by
// maxHead.
func readHead(r interface{ Read([]byte) (int, error) }) ([]byte, error) {
	buf := make([]byte, 0, 1024)
	for !bytes.Contains(buf, []byte("\r\n\r\n")) {
		if len(buf) >= maxHead {
			return buf, errTooLong
		}
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, 1024)
		}
		n, err := r.Read(buf[len(buf):min(cap(buf), maxHead)])
		buf = buf[:len(buf)+n]
		if err != nil && !bytes.Contains(buf, []byte("\r\n\r\n")) {
			return buf, err
		}
	}
	return buf, nil
}

// requestHost is the host an HTTP/1 request head names: its one Host
// header, without a port, escaped lowercase. The request line must be
// origin-form (or OPTIONS *), so that the upstream server sees no other
// host in an absolute URI; CONNECT is no request the gateway forwards.
func requestHost(head []byte) (string, bool) {
	end := bytes.Index(head, []byte("\r\n\r\n"))
	if end < 0 {
		return "", false
	}
	lines := bytes.Split(head[:end], []byte("\r\n"))
	parts := bytes.Split(lines[0], []byte(" "))
	if len(parts) != 3 || !bytes.HasPrefix(parts[2], []byte("HTTP/1.")) || len(parts[0]) == 0 {
		return "", false
	}
	for _, c := range parts[0] {
		if c < 'A' || c > 'Z' {
			return "", false
		}
	}
	if string(parts[0]) == "CONNECT" || (!bytes.HasPrefix(parts[1], []byte("/")) && string(parts[1]) != "*") {
		return "", false
	}
	host, found := "", false
	for _, line := range lines[1:] {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok || len(k) == 0 || bytes.ContainsAny(k, " \t") {
			return "", false // also refuses obsolete line folding
		}
		if !strings.EqualFold(string(k), "host") {
			continue
		}
		if found {
			return "", false
		}
		found = true
		host = strings.TrimSpace(string(v))
	}
	if !found {
		return "", false
	}
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.HasSuffix(host, "]") {
		for _, c := range host[i+1:] {
			if c < '0' || c > '9' {
				return "", false
			}
		}
		host = host[:i]
	}
	if host == "" || len(host) > maxName || strings.ContainsAny(host, "[]@/ \t") {
		return "", false
	}
	return EscapeName(host), true
}
