package egress

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

var (
	src4 = netip.MustParseAddr("192.0.0.8")
	dst4 = netip.MustParseAddr("203.0.113.7")
	src6 = netip.MustParseAddr("2001:db8::2")
	dst6 = netip.MustParseAddr("2001:db8:ffff::7")
)

// ipPacket builds a packet from src to dst carrying l4 (whose checksum is
// left as given: the observer never checks the sandbox's checksums).
func ipPacket(src, dst netip.Addr, proto uint8, l4 []byte) []byte {
	if src.Is6() {
		h := make([]byte, 40, 40+len(l4))
		h[0] = 6 << 4
		binary.BigEndian.PutUint16(h[4:6], uint16(len(l4)))
		h[6], h[7] = proto, 64
		copy(h[8:24], src.AsSlice())
		copy(h[24:40], dst.AsSlice())
		return append(h, l4...)
	}
	h := make([]byte, 20, 20+len(l4))
	h[0] = 0x45
	binary.BigEndian.PutUint16(h[2:4], uint16(20+len(l4)))
	h[8], h[9] = 64, proto
	copy(h[12:16], src.AsSlice())
	copy(h[16:20], dst.AsSlice())
	return append(h, l4...)
}

func tcpSegment(sport, dport uint16, seq uint32, flags byte) []byte {
	t := make([]byte, 20)
	binary.BigEndian.PutUint16(t[0:2], sport)
	binary.BigEndian.PutUint16(t[2:4], dport)
	binary.BigEndian.PutUint32(t[4:8], seq)
	t[12], t[13] = 5<<4, flags
	return t
}

func dnsQuery(id uint16, name string, qtype uint16) []byte {
	q := make([]byte, 12)
	binary.BigEndian.PutUint16(q[0:2], id)
	q[2] = 0x01 // RD
	q[5] = 1
	for _, l := range strings.Split(name, ".") {
		if l == "" {
			continue
		}
		q = append(q, byte(len(l)))
		q = append(q, l...)
	}
	q = append(q, 0, byte(qtype>>8), byte(qtype), 0, 1)
	return q
}

func udpDatagram(sport, dport uint16, payload []byte) []byte {
	u := make([]byte, 8, 8+len(payload))
	binary.BigEndian.PutUint16(u[0:2], sport)
	binary.BigEndian.PutUint16(u[2:4], dport)
	binary.BigEndian.PutUint16(u[4:6], uint16(8+len(payload)))
	return append(u, payload...)
}

// checkReply checks that a reply is a well-formed packet back to the
// sender: addresses swapped, lengths and checksums right. It returns the
// transport bytes.
func checkReply(t *testing.T, reply []byte, from, to netip.Addr, proto uint8) []byte {
	t.Helper()
	p, ok := parseIP(reply)
	if !ok || p.src != from || p.dst != to || p.proto != proto || !p.first {
		t.Fatalf("reply %x: parsed %v, %+v", reply, ok, p)
	}
	if !p.v6 && fold(sum(0, reply[:20])) != 0xffff {
		t.Fatalf("reply's IPv4 header checksum is wrong: %x", reply[:20])
	}
	acc := sum(sum(0, from.AsSlice()), to.AsSlice()) + uint32(proto) + uint32(len(p.l4))
	if fold(sum(acc, p.l4)) != 0xffff {
		t.Fatalf("reply's transport checksum is wrong: %x", p.l4)
	}
	return p.l4
}

func TestTCPSynIsRecordedAndReset(t *testing.T) {
	for _, fam := range []struct{ src, dst netip.Addr }{{src4, dst4}, {src6, dst6}} {
		t.Run(fam.dst.String(), func(t *testing.T) {
			pkt := ipPacket(fam.src, fam.dst, protoTCP, tcpSegment(40000, 5432, 1000, tcpSYN))
			a, ok, reply := Inspect(pkt, nil)
			if !ok || a.Kind != model.EgressKindTCP || a.Dst != fam.dst || a.Port != 5432 {
				t.Fatalf("attempt %+v ok %v", a, ok)
			}
			rst := checkReply(t, reply, fam.dst, fam.src, protoTCP)
			if binary.BigEndian.Uint16(rst[0:2]) != 5432 || binary.BigEndian.Uint16(rst[2:4]) != 40000 ||
				rst[13] != tcpRST|tcpACK || binary.BigEndian.Uint32(rst[8:12]) != 1001 {
				t.Fatalf("not a reset acknowledging the SYN: %x", rst)
			}
		})
	}
}

// clientHello is the first flight of Go's own TLS client asking for name.
func clientHello(t testing.TB, name string) []byte {
	t.Helper()
	c, s := net.Pipe()
	go func() {
		_ = tls.Client(c, &tls.Config{ServerName: name}).Handshake()
	}()
	buf := make([]byte, 16384)
	n, err := s.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	c.Close()
	return buf[:n]
}

// On HTTP and HTTPS ports the observer accepts the connection, with no
// state, to read the name the client sends first (TLS server name, HTTP
// Host), then resets it. The SYN is the attempt; the name is listed as a
// tls or http entry for it.
func TestNamedPortsAreAcceptedReadAndReset(t *testing.T) {
	for _, fam := range []struct{ src, dst netip.Addr }{{src4, dst4}, {src6, dst6}} {
		for _, c := range []struct {
			port       uint16
			data       []byte
			kind, name string
		}{
			{443, clientHello(t, "API.OpenAI.com"), model.EgressKindTLS, "api.openai.com"},
			{80, []byte("GET /simple/ HTTP/1.1\r\nUser-Agent: x\r\nhost: Registry.npmjs.org:80\r\n\r\n"), model.EgressKindHTTP, "registry.npmjs.org"},
			{8080, []byte("POST / HTTP/1.1\r\nHost: [2001:db8::9]:8080\r\n\r\n"), model.EgressKindHTTP, `2001\058db8\058\0589`},
		} {
			t.Run(fmt.Sprint(fam.dst, c.port), func(t *testing.T) {
				a, ok, reply := Inspect(ipPacket(fam.src, fam.dst, protoTCP, tcpSegment(40000, c.port, 1000, tcpSYN)), nil)
				if !ok || a.Kind != model.EgressKindTCP || a.Port != c.port {
					t.Fatalf("SYN: attempt %+v ok %v", a, ok)
				}
				synack := checkReply(t, reply, fam.dst, fam.src, protoTCP)
				isn := binary.BigEndian.Uint32(synack[4:8])
				if synack[13] != tcpSYN|tcpACK || binary.BigEndian.Uint32(synack[8:12]) != 1001 || synack[12]>>4 != 6 || synack[20] != 2 {
					t.Fatalf("not a SYN-ACK with an MSS: %x", synack)
				}
				// The handshake's last ACK carries nothing: no attempt, no reply.
				ack := tcpSegment(40000, c.port, 1001, tcpACK)
				binary.BigEndian.PutUint32(ack[8:12], isn+1)
				if _, ok, reply := Inspect(ipPacket(fam.src, fam.dst, protoTCP, ack), nil); ok || reply != nil {
					t.Fatalf("the handshake's ACK: ok %v, reply %x", ok, reply)
				}
				data := append(slices.Clone(ack), c.data...)
				data[13] = tcpACK | 0x08 // PSH
				a, ok, reply = Inspect(ipPacket(fam.src, fam.dst, protoTCP, data), nil)
				if !ok || a.Kind != c.kind || a.Name != c.name || a.Dst != fam.dst || a.Port != c.port {
					t.Fatalf("first data: attempt %+v ok %v, want %s %q", a, ok, c.kind, c.name)
				}
				rst := checkReply(t, reply, fam.dst, fam.src, protoTCP)
				if rst[13] != tcpRST|tcpACK || binary.BigEndian.Uint32(rst[4:8]) != isn+1 || binary.BigEndian.Uint32(rst[8:12]) != 1001+uint32(len(c.data)) {
					t.Fatalf("not a reset in the window: %x", rst)
				}
				// A FIN without data is reset too, and names nothing.
				fin := slices.Clone(ack)
				fin[13] = tcpACK | tcpFIN
				if _, ok, reply := Inspect(ipPacket(fam.src, fam.dst, protoTCP, fin), nil); ok || reply == nil {
					t.Fatalf("FIN: ok %v, reply %x", ok, reply)
				}
			})
		}
	}
	r := NewRecord()
	r.Add(Attempt{Kind: model.EgressKindTCP, Dst: dst4, Port: 443})
	r.Add(Attempt{Kind: model.EgressKindTLS, Dst: dst4, Port: 443, Name: "pypi.org"})
	if n, list := r.Snapshot(); n != 1 || len(list) != 2 || list[1].Name != "pypi.org" || list[1].Address != dst4.String() {
		t.Fatalf("a name counted as a second attempt, or not listed: %d %+v", n, list)
	}
}

func TestDNSQueryIsRecordedAndRefused(t *testing.T) {
	for _, fam := range []struct{ src, dst netip.Addr }{{src4, dst4}, {src6, dst6}} {
		t.Run(fam.dst.String(), func(t *testing.T) {
			q := dnsQuery(0xbeef, "Files.PyPI.org", 28)
			a, ok, reply := Inspect(ipPacket(fam.src, fam.dst, protoUDP, udpDatagram(5353, 53, q)), nil)
			if !ok || a.Kind != model.EgressKindDNS || a.Name != "files.pypi.org" {
				t.Fatalf("attempt %+v ok %v", a, ok)
			}
			u := checkReply(t, reply, fam.dst, fam.src, protoUDP)
			if binary.BigEndian.Uint16(u[0:2]) != 53 || binary.BigEndian.Uint16(u[2:4]) != 5353 || int(binary.BigEndian.Uint16(u[4:6])) != len(u) {
				t.Fatalf("UDP header %x", u[:8])
			}
			m := u[8:]
			if binary.BigEndian.Uint16(m[0:2]) != 0xbeef || m[2]&0x80 == 0 || m[3]&0x0f != 5 || !bytes.Equal(m[12:], q[12:]) {
				t.Fatalf("not a REFUSED answer to the query: %x", m)
			}
		})
	}
}

func TestOtherAttempts(t *testing.T) {
	udp := ipPacket(src4, dst4, protoUDP, udpDatagram(1000, 123, []byte("ntp")))
	if a, ok, reply := Inspect(udp, nil); !ok || a.Kind != model.EgressKindUDP || a.Port != 123 || reply != nil {
		t.Errorf("udp: %+v %v %x", a, ok, reply)
	}
	ping := ipPacket(src6, dst6, protoICMPv6, []byte{128, 0, 0, 0})
	if a, ok, _ := Inspect(ping, nil); !ok || a.Kind != model.EgressKindICMP || a.Dst != dst6 {
		t.Errorf("ping: %+v %v", a, ok)
	}
	sctp := ipPacket(src4, dst4, 132, []byte{1, 2, 3, 4})
	if a, ok, _ := Inspect(sctp, nil); !ok || a.Kind != model.EgressKindIP || a.Proto != 132 {
		t.Errorf("sctp: %+v %v", a, ok)
	}
	// A name with bytes that could break out of a quoted string or a
	// terminal is escaped.
	q := dnsQuery(1, "a\"b${x}\x1b[0m.example", 1)
	if a, ok, _ := Inspect(ipPacket(src4, dst4, protoUDP, udpDatagram(1, 53, q)), nil); !ok || a.Name != `a\034b\036\123x\125\027\0910m.example` {
		t.Errorf("escaped name: %+v %v", a, ok)
	}
}

func TestNoiseAndGarbageAreNoAttempts(t *testing.T) {
	for name, pkt := range map[string][]byte{
		"empty":            nil,
		"short":            {0x45, 0},
		"version 5":        append([]byte{0x55}, make([]byte, 40)...),
		"router solicit":   ipPacket(src6, netip.MustParseAddr("ff02::2"), protoICMPv6, []byte{133, 0, 0, 0}),
		"MLD report":       ipPacket(src6, netip.MustParseAddr("ff02::16"), protoICMPv6, []byte{143, 0, 0, 0}),
		"IGMP":             ipPacket(src4, netip.MustParseAddr("224.0.0.22"), protoIGMP, []byte{0x22, 0, 0, 0}),
		"TCP ACK":          ipPacket(src4, dst4, protoTCP, tcpSegment(1, 2, 3, tcpACK)),
		"TCP SYN-ACK":      ipPacket(src4, dst4, protoTCP, tcpSegment(1, 2, 3, tcpSYN|tcpACK)),
		"truncated TCP":    ipPacket(src4, dst4, protoTCP, []byte{1, 2, 3}),
		"ICMP unreachable": ipPacket(src4, dst4, protoICMP, []byte{3, 3, 0, 0}),
		"IPv4 longer than sent": func() []byte {
			p := ipPacket(src4, dst4, protoTCP, tcpSegment(1, 2, 3, tcpSYN))
			binary.BigEndian.PutUint16(p[2:4], 1400)
			return p
		}(),
	} {
		if a, ok, reply := Inspect(pkt, nil); ok || reply != nil {
			t.Errorf("%s: recorded %+v, reply %x", name, a, reply)
		}
	}
}

func TestRecordIsBounded(t *testing.T) {
	r := NewRecord()
	for i := range 10000 {
		r.Add(Attempt{Kind: model.EgressKindTCP, Dst: netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), Port: 80})
	}
	r.Add(Attempt{Kind: model.EgressKindTCP, Dst: netip.AddrFrom4([4]byte{10, 0, 0, 0}), Port: 80})
	n, list := r.Snapshot()
	if n != 10001 || len(list) != MaxDestinations || list[0].Address != "10.0.0.0" || list[0].Count != 2 || list[0].Port != 80 {
		t.Fatalf("total %d, %d listed, first %+v", n, len(list), list[0])
	}
}

// FuzzInspect feeds the parser what untrusted code could send: it must not
// panic, and a reply it builds must be a well-formed packet back to the
// sender, no longer than what it answers plus fixed headers.
func FuzzInspect(f *testing.F) {
	f.Add(ipPacket(src4, dst4, protoTCP, tcpSegment(40000, 443, 7, tcpSYN)))
	f.Add(ipPacket(src6, dst6, protoTCP, tcpSegment(40000, 443, 7, tcpSYN|tcpFIN)))
	f.Add(ipPacket(src4, dst4, protoUDP, udpDatagram(1, 53, dnsQuery(1, "pypi.org", 1))))
	f.Add(ipPacket(src6, dst6, protoUDP, udpDatagram(1, 53, dnsQuery(2, "x.example", 28))))
	f.Add(ipPacket(src6, dst6, 0, []byte{44, 0, 0, 0, 0, 0, 0, 0, 17, 0, 0, 0, 0, 0, 0, 0}))
	f.Add([]byte{0x46, 0, 0, 24, 0, 0, 0x20, 0, 64, 6})
	hello := tcpSegment(40000, 443, 7, tcpACK)
	f.Add(ipPacket(src4, dst4, protoTCP, append(hello, clientHello(f, "pypi.org")...)))
	f.Add(ipPacket(src6, dst6, protoTCP, append(tcpSegment(40000, 80, 7, tcpACK), "GET / HTTP/1.1\r\nHost: x\r\n\r\n"...)))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, ok, reply := Inspect(b, nil)
		if !ok {
			// Only a connection the observer accepted is answered without
			// an attempt: reset, on a named port.
			if p, _ := parseIP(b); reply != nil && (p.proto != protoTCP || len(p.l4) < 4 || !namedPort(binary.BigEndian.Uint16(p.l4[2:4]))) {
				t.Fatalf("a reply to no attempt: %x", reply)
			}
			if reply != nil {
				if p, _ := parseIP(b); checkReply(t, reply, p.dst, p.src, protoTCP)[13] != tcpRST|tcpACK {
					t.Fatalf("not a reset: %x", reply)
				}
			}
			return
		}
		if a.Kind == model.EgressKindDNS || a.Kind == model.EgressKindTLS || a.Kind == model.EgressKindHTTP {
			for _, c := range []byte(a.Name) {
				if !escapedByte(c) {
					t.Fatalf("name %q holds %q", a.Name, c)
				}
			}
		}
		if reply == nil {
			return
		}
		p, _ := parseIP(b)
		proto := uint8(protoTCP)
		if a.Kind == model.EgressKindDNS {
			proto = protoUDP
		}
		checkReply(t, reply, p.dst, p.src, proto)
		if len(reply) > 40+20+len(b) {
			t.Fatalf("reply of %d bytes to a packet of %d", len(reply), len(b))
		}
	})
}

// FuzzConnName: no panic; a name is bounded and escaped.
func FuzzConnName(f *testing.F) {
	f.Add(clientHello(f, "pypi.org"))
	f.Add([]byte("GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n"))
	f.Add([]byte{22, 3, 1, 0, 5, 1, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		kind, name, ok := connName(b)
		if !ok {
			return
		}
		if kind != model.EgressKindTLS && kind != model.EgressKindHTTP || name == "" || len(name) > 4*maxName {
			t.Fatalf("%s %q", kind, name)
		}
		for _, c := range []byte(name) {
			if !escapedByte(c) {
				t.Fatalf("name %q holds %q", name, c)
			}
		}
	})
}

// FuzzParseQuery: no panic; a name of at most 255 wire bytes, escaped.
func FuzzParseQuery(f *testing.F) {
	f.Add(dnsQuery(1, "pypi.org", 1))
	f.Add(dnsQuery(1, strings.Repeat("a.", 120)+"b", 1))
	f.Add([]byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		q, ok := parseQuery(b)
		if !ok {
			return
		}
		if len(q.name) > 4*maxName || len(q.question) > maxName+4 {
			t.Fatalf("name of %d bytes, question of %d", len(q.name), len(q.question))
		}
		if r := q.refused(); len(r) != 12+len(q.question) || r[3] != 5 {
			t.Fatalf("answer %x", r)
		}
	})
}

// escapedByte says whether c may appear in a recorded name: lower-case
// letters, digits, '-', '_', '.' and the escape's backslash.
func escapedByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte(`-_.\`, c) >= 0
}
