package egress

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// resolveTimeout bounds one name's resolution (both types, both transports).
const resolveTimeout = 3 * time.Second

// maxAnswers bounds the addresses kept per name.
const maxAnswers = 16

type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// resolver asks one upstream server, never the system's resolver or
// /etc/hosts.
type resolver struct {
	server netip.AddrPort
	dial   dialFunc
}

// lookup returns the A and AAAA addresses of name (bounded).
func (r resolver) lookup(ctx context.Context, name string) ([]netip.Addr, error) {
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	var out []netip.Addr
	var firstErr error
	for _, t := range []dnsmessage.Type{dnsmessage.TypeA, dnsmessage.TypeAAAA} {
		as, err := r.query(ctx, name, t)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		out = append(out, as...)
	}
	if len(out) == 0 && firstErr != nil {
		return nil, firstErr
	}
	return out, nil
}

func (r resolver) query(ctx context.Context, name string, t dnsmessage.Type) ([]netip.Addr, error) {
	n, err := dnsmessage.NewName(name + ".")
	if err != nil {
		return nil, err
	}
	var idb [2]byte
	_, _ = rand.Read(idb[:])
	id := binary.BigEndian.Uint16(idb[:])
	msg := dnsmessage.Message{
		Header:    dnsmessage.Header{ID: id, RecursionDesired: true},
		Questions: []dnsmessage.Question{{Name: n, Type: t, Class: dnsmessage.ClassINET}},
	}
	q, err := msg.Pack()
	if err != nil {
		return nil, err
	}
	resp, err := r.exchange(ctx, "udp", q)
	if err != nil {
		return nil, err
	}
	var m dnsmessage.Message
	if err := m.Unpack(resp); err != nil {
		return nil, err
	}
	if m.Truncated {
		if resp, err = r.exchange(ctx, "tcp", q); err != nil {
			return nil, err
		}
		if err := m.Unpack(resp); err != nil {
			return nil, err
		}
	}
	if m.ID != id || !m.Response || len(m.Questions) != 1 || m.Questions[0].Name.String() != n.String() || m.Questions[0].Type != t {
		return nil, errors.New("dns: answer does not match the query")
	}
	if m.RCode != dnsmessage.RCodeSuccess {
		return nil, errors.New("dns: " + m.RCode.String())
	}
	var out []netip.Addr
	for _, a := range m.Answers {
		if len(out) >= maxAnswers || a.Header.Class != dnsmessage.ClassINET {
			continue
		}
		switch b := a.Body.(type) {
		case *dnsmessage.AResource:
			if t == dnsmessage.TypeA {
				out = append(out, netip.AddrFrom4(b.A))
			}
		case *dnsmessage.AAAAResource:
			if t == dnsmessage.TypeAAAA {
				out = append(out, netip.AddrFrom16(b.AAAA))
			}
		}
	}
	return out, nil
}

func (r resolver) exchange(ctx context.Context, network string, q []byte) ([]byte, error) {
	c, err := r.dial(ctx, network, r.server.String())
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if network == "udp" {
		if _, err := c.Write(q); err != nil {
			return nil, err
		}
		buf := make([]byte, 1232)
		n, err := c.Read(buf)
		if err != nil {
			return nil, err
		}
		return buf[:n], nil
	}
	b := make([]byte, 2+len(q))
	binary.BigEndian.PutUint16(b, uint16(len(q)))
	copy(b[2:], q)
	if _, err := c.Write(b); err != nil {
		return nil, err
	}
	var l [2]byte
	if _, err := io.ReadFull(c, l[:]); err != nil {
		return nil, err
	}
	resp := make([]byte, binary.BigEndian.Uint16(l[:]))
	if _, err := io.ReadFull(c, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// dnsTTL is the TTL of the gateway's answers: short, since the gateway
// resolves again at every connection anyway.
const dnsTTL = 5

// answer builds the gateway's reply to a sandbox's query q: for a listed
// name the usable addresses of the asked type, otherwise REFUSED (rcode
// NXDOMAIN when the listed name has no usable address of any type).
func answer(q query, addrs []netip.Addr, rcode dnsmessage.RCode) []byte {
	var p dnsmessage.Parser
	hdr := make([]byte, 12, 12+len(q.question))
	hdr[5] = 1 // one question
	if _, err := p.Start(append(hdr, q.question...)); err != nil {
		return q.refused()
	}
	qs, err := p.Question()
	if err != nil {
		return q.refused()
	}
	b := dnsmessage.NewBuilder(make([]byte, 0, 512), dnsmessage.Header{
		ID: binary.BigEndian.Uint16(q.id[:]), Response: true, Authoritative: true,
		RecursionDesired: q.flags&1 != 0, RecursionAvailable: true, RCode: rcode,
	})
	b.EnableCompression()
	if b.StartQuestions() != nil || b.Question(qs) != nil || b.StartAnswers() != nil {
		return q.refused()
	}
	rh := dnsmessage.ResourceHeader{Name: qs.Name, Class: dnsmessage.ClassINET, TTL: dnsTTL}
	for _, a := range addrs {
		switch {
		case qs.Type == dnsmessage.TypeA && a.Is4():
			if b.AResource(rh, dnsmessage.AResource{A: a.As4()}) != nil {
				return q.refused()
			}
		case qs.Type == dnsmessage.TypeAAAA && a.Is6() && !a.Is4In6():
			if b.AAAAResource(rh, dnsmessage.AAAAResource{AAAA: a.As16()}) != nil {
				return q.refused()
			}
		}
	}
	out, err := b.Finish()
	if err != nil || len(out) > 512 {
		return q.refused()
	}
	return out
}
