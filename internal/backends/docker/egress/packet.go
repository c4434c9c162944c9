// Package egress is the observer of a Docker sandbox's denied egress: a TUN
// device in the sandbox's own network namespace takes the default routes,
// and this package reads what the sandbox sends there, records each attempt
// (bounded), answers so that the sandboxed code fails at once (a TCP reset,
// a DNS REFUSED) and forwards nothing, ever. See docs/design/docker-backend.md
// for why this shape.
//
// Everything read from the device is untrusted: every length is checked
// against the packet before use, and the parsers are fuzzed.
package egress

import (
	"encoding/binary"
	"net/netip"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// IP protocol numbers the observer looks at.
const (
	protoICMP   = 1
	protoIGMP   = 2
	protoTCP    = 6
	protoUDP    = 17
	protoICMPv6 = 58
)

// Attempt is one egress attempt seen in a packet.
type Attempt struct {
	Kind  string // model.EgressKind*
	Dst   netip.Addr
	Port  uint16 // tcp, udp
	Proto uint8  // ip
	Name  string // dns: the first question's name, escaped (see model.BlockedDestination)
}

// packet is a parsed IP packet: the addresses, the transport protocol and
// its bytes (bounded by the IP header's own length).
type packet struct {
	v6       bool
	src, dst netip.Addr
	proto    uint8
	l4       []byte
	first    bool // the first (or only) fragment: l4 starts with the transport header
}

// parseIP parses an IPv4 or IPv6 header. ok is false for anything malformed.
func parseIP(b []byte) (p packet, ok bool) {
	if len(b) < 1 {
		return p, false
	}
	switch b[0] >> 4 {
	case 4:
		return parseIPv4(b)
	case 6:
		return parseIPv6(b)
	}
	return p, false
}

func parseIPv4(b []byte) (p packet, ok bool) {
	if len(b) < 20 {
		return p, false
	}
	ihl := int(b[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(b[2:4]))
	if ihl < 20 || total < ihl || total > len(b) {
		return p, false
	}
	b = b[:total]
	p.src = netip.AddrFrom4([4]byte(b[12:16]))
	p.dst = netip.AddrFrom4([4]byte(b[16:20]))
	p.proto = b[9]
	p.l4 = b[ihl:]
	p.first = binary.BigEndian.Uint16(b[6:8])&0x1fff == 0
	return p, true
}

// maxExtHeaders bounds the walk over IPv6 extension headers.
const maxExtHeaders = 8

func parseIPv6(b []byte) (p packet, ok bool) {
	if len(b) < 40 {
		return p, false
	}
	plen := int(binary.BigEndian.Uint16(b[4:6]))
	if 40+plen > len(b) {
		return p, false
	}
	p.v6 = true
	p.src = netip.AddrFrom16([16]byte(b[8:24]))
	p.dst = netip.AddrFrom16([16]byte(b[24:40]))
	nh, rest := b[6], b[40:40+plen]
	p.first = true
	for range maxExtHeaders {
		switch nh {
		case 0, 43, 60: // hop-by-hop, routing, destination options
			if len(rest) < 2 {
				return p, false
			}
			n := (int(rest[1]) + 1) * 8
			if n > len(rest) {
				return p, false
			}
			nh, rest = rest[0], rest[n:]
			continue
		case 44: // fragment
			if len(rest) < 8 {
				return p, false
			}
			if binary.BigEndian.Uint16(rest[2:4])>>3 != 0 {
				p.first = false
			}
			nh, rest = rest[0], rest[8:]
			continue
		}
		p.proto, p.l4 = nh, rest
		return p, true
	}
	return p, false
}

// Inspect parses one packet the sandbox sent. ok is false for what is no
// egress attempt: malformed packets, later fragments, TCP segments other than
// a connection's first SYN (or, on a named port, its first data naming a
// host: then the attempt is of kind tls or http, a name for a connection
// already counted), and the kernel's own neighbour discovery and multicast
// membership reports. reply is a packet to write back (a TCP reset or
// SYN-ACK, or a DNS REFUSED answer), appended to buf, or nil.
func Inspect(b []byte, buf []byte) (a Attempt, ok bool, reply []byte) {
	p, ok := parseIP(b)
	if !ok || !p.first {
		return a, false, nil
	}
	a.Dst = p.dst
	switch p.proto {
	case protoTCP:
		return inspectTCP(p, a, buf)
	case protoUDP:
		return inspectUDP(p, a, buf)
	case protoICMP, protoICMPv6:
		// Echo requests only: the rest is the kernel's own (neighbour
		// discovery, MLD) or errors about packets it received.
		if len(p.l4) < 1 || (p.proto == protoICMP && p.l4[0] != 8) || (p.proto == protoICMPv6 && p.l4[0] != 128) {
			return a, false, nil
		}
		a.Kind = model.EgressKindICMP
		return a, true, nil
	case protoIGMP:
		return a, false, nil
	}
	a.Kind, a.Proto = model.EgressKindIP, p.proto
	return a, true, nil
}

const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpACK = 0x10
)

func inspectTCP(p packet, a Attempt, buf []byte) (Attempt, bool, []byte) {
	t := p.l4
	if len(t) < 20 {
		return a, false, nil
	}
	off := int(t[12]>>4) * 4
	flags := t[13]
	if off < 20 || off > len(t) || flags&tcpRST != 0 {
		return a, false, nil
	}
	a.Port = binary.BigEndian.Uint16(t[2:4])
	seq, data := binary.BigEndian.Uint32(t[4:8]), uint32(len(t)-off)
	if flags&tcpSYN == 0 {
		// A later segment: only on a named port, where the observer
		// accepted the connection. The reset takes its sequence number from
		// the segment's acknowledgement (RFC 9293 3.10.7.1).
		if !namedPort(a.Port) || flags&tcpACK == 0 || (data == 0 && flags&tcpFIN == 0) {
			return a, false, nil
		}
		reply := tcpReply(buf, p, t, binary.BigEndian.Uint32(t[8:12]), seq+data+uint32(flags&tcpFIN), tcpRST|tcpACK)
		kind, name, named := connName(t[off:])
		if !named {
			return a, false, reply
		}
		a.Kind, a.Name = kind, name
		return a, true, reply
	}
	if flags&tcpACK != 0 {
		return a, false, nil
	}
	a.Kind = model.EgressKindTCP
	if namedPort(a.Port) {
		// Accept, keeping no state: the sequence number is derived from the
		// SYN's, and the segment that follows carries it back. Data on the
		// SYN itself (TCP Fast Open) is not acknowledged.
		return a, true, tcpReply(buf, p, t, seq^0x5eed0bad, seq+1, tcpSYN|tcpACK)
	}
	// The reset acknowledges the SYN (and any data or FIN with it), so the
	// connecting side takes it at once: connect fails with ECONNREFUSED.
	ack := seq + 1 + data
	if flags&tcpFIN != 0 {
		ack++
	}
	return a, true, tcpReply(buf, p, t, 0, ack, tcpRST|tcpACK)
}

// tcpReply appends to buf a segment answering t (ports swapped) with seq,
// ack and flags. A SYN-ACK carries an MSS option for the device's MTU, so
// that a client's first segment (a TLS ClientHello) is as long as it can be.
func tcpReply(buf []byte, p packet, t []byte, seq, ack uint32, flags byte) []byte {
	var h [24]byte
	copy(h[0:2], t[2:4])
	copy(h[2:4], t[0:2])
	binary.BigEndian.PutUint32(h[4:8], seq)
	binary.BigEndian.PutUint32(h[8:12], ack)
	h[13] = flags
	n := 20
	if flags&tcpSYN != 0 {
		mss := uint16(1500 - 40)
		if p.v6 {
			mss = 1500 - 60
		}
		h[20], h[21] = 2, 4
		binary.BigEndian.PutUint16(h[22:24], mss)
		binary.BigEndian.PutUint16(h[14:16], 65535) // window
		n = 24
	}
	h[12] = byte(n/4) << 4
	return buildIP(buf, p, protoTCP, h[:n], nil, 16)
}

func inspectUDP(p packet, a Attempt, buf []byte) (Attempt, bool, []byte) {
	u := p.l4
	if len(u) < 8 {
		return a, false, nil
	}
	a.Port = binary.BigEndian.Uint16(u[2:4])
	a.Kind = model.EgressKindUDP
	if a.Port != 53 {
		return a, true, nil
	}
	q, ok := parseQuery(u[8:])
	if !ok {
		return a, true, nil // counted as UDP to port 53
	}
	a.Kind, a.Name, a.Port = model.EgressKindDNS, q.name, 0
	var h [8]byte
	copy(h[0:2], u[2:4])
	copy(h[2:4], u[0:2])
	return a, true, buildIP(buf, p, protoUDP, h[:], q.refused(), 6)
}

// buildIP appends to buf an IP packet from p's destination back to its
// source carrying the transport header l4 (its checksum at csumAt computed
// here, and for UDP its length) followed by payload.
func buildIP(buf []byte, p packet, proto uint8, l4, payload []byte, csumAt int) []byte {
	n := len(l4) + len(payload)
	if p.v6 {
		var h [40]byte
		h[0] = 6 << 4
		binary.BigEndian.PutUint16(h[4:6], uint16(n))
		h[6], h[7] = proto, 64
		s, d := p.dst.As16(), p.src.As16()
		copy(h[8:24], s[:])
		copy(h[24:40], d[:])
		buf = append(buf, h[:]...)
	} else {
		var h [20]byte
		h[0] = 0x45
		binary.BigEndian.PutUint16(h[2:4], uint16(20+n))
		h[6] = 0x40 // don't fragment
		h[8], h[9] = 64, proto
		s, d := p.dst.As4(), p.src.As4()
		copy(h[12:16], s[:])
		copy(h[16:20], d[:])
		binary.BigEndian.PutUint16(h[10:12], ^fold(sum(0, h[:])))
		buf = append(buf, h[:]...)
	}
	hdr := len(buf)
	buf = append(buf, l4...)
	buf = append(buf, payload...)
	t := buf[hdr:]
	if proto == protoUDP {
		binary.BigEndian.PutUint16(t[4:6], uint16(n))
	}
	// Pseudo-header: addresses, protocol and transport length.
	var acc uint32
	src, dst := p.dst, p.src
	acc = sum(acc, src.AsSlice())
	acc = sum(acc, dst.AsSlice())
	acc += uint32(proto) + uint32(n)
	c := ^fold(sum(acc, t))
	if c == 0 && proto == protoUDP {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(t[csumAt:csumAt+2], c)
	return buf
}

// sum adds b as big-endian 16-bit words to acc (the Internet checksum).
func sum(acc uint32, b []byte) uint32 {
	for len(b) >= 2 {
		acc += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		acc += uint32(b[0]) << 8
	}
	return acc
}

func fold(acc uint32) uint16 {
	for acc > 0xffff {
		acc = acc>>16 + acc&0xffff
	}
	return uint16(acc)
}
