package egress

import (
	"bytes"
	"encoding/binary"
	"net/netip"
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
			pkt := ipPacket(fam.src, fam.dst, protoTCP, tcpSegment(40000, 443, 1000, tcpSYN))
			a, ok, reply := Inspect(pkt, nil)
			if !ok || a.Kind != model.EgressKindTCP || a.Dst != fam.dst || a.Port != 443 {
				t.Fatalf("attempt %+v ok %v", a, ok)
			}
			rst := checkReply(t, reply, fam.dst, fam.src, protoTCP)
			if binary.BigEndian.Uint16(rst[0:2]) != 443 || binary.BigEndian.Uint16(rst[2:4]) != 40000 ||
				rst[13] != tcpRST|tcpACK || binary.BigEndian.Uint32(rst[8:12]) != 1001 {
				t.Fatalf("not a reset acknowledging the SYN: %x", rst)
			}
		})
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
	f.Fuzz(func(t *testing.T, b []byte) {
		a, ok, reply := Inspect(b, nil)
		if !ok {
			if reply != nil {
				t.Fatalf("a reply to no attempt: %x", reply)
			}
			return
		}
		if a.Kind == model.EgressKindDNS {
			for _, c := range []byte(a.Name) {
				if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte(`-_.\`, c) >= 0) {
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
