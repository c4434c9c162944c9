package egress

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"net"
	"net/netip"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// splitRecords re-frames a ClientHello record into records of at most n
// handshake bytes each, as a client may.
func splitRecords(rec []byte, n int) []byte {
	hs := rec[5:]
	var out []byte
	for len(hs) > 0 {
		k := min(n, len(hs))
		out = append(out, 22, 3, 1, byte(k>>8), byte(k))
		out = append(out, hs[:k]...)
		hs = hs[k:]
	}
	return out
}

// noSNIHello is a ClientHello with no server name (Go sends none for an
// empty ServerName only when verification is off).
func noSNIHello(t testing.TB) []byte {
	t.Helper()
	c, s := net.Pipe()
	go func() { _ = tls.Client(c, &tls.Config{InsecureSkipVerify: true}).Handshake() }() //nolint:gosec // only its first flight is read
	defer c.Close()
	defer s.Close()
	_ = s.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 16384)
	n, err := s.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

func TestReadClientHelloReassembles(t *testing.T) {
	hello := clientHello(t, "allowed.test")
	if len(hello) <= 1460 {
		t.Logf("ClientHello is %d bytes (one MSS)", len(hello))
	}
	for name, in := range map[string][]byte{
		"one record":         hello,
		"records of 100":     splitRecords(hello, 100),
		"records of 1 byte":  splitRecords(hello, 1),
		"one byte at a time": hello,
	} {
		r := iotest.OneByteReader(bytes.NewReader(in))
		raw, got, ok := readClientHello(r)
		if !ok || got != "allowed.test" {
			t.Errorf("%s: %q %v", name, got, ok)
		}
		if !bytes.Equal(raw, in) {
			t.Errorf("%s: the bytes to replay differ", name)
		}
	}
	for name, in := range map[string][]byte{
		"truncated":    hello[:len(hello)-1],
		"not TLS":      []byte("GET / HTTP/1.1\r\n\r\n"),
		"no SNI":       noSNIHello(t),
		"alert record": append([]byte{21, 3, 1, 0, 2}, 2, 40),
		"oversized":    append([]byte{22, 3, 1, 0x40, 0x01}, make([]byte, maxHello)...),
		"huge message": append([]byte{22, 3, 1, 0, 4}, 1, 0xff, 0xff, 0xff),
	} {
		if _, got, ok := readClientHello(bytes.NewReader(in)); ok {
			t.Errorf("%s: read a name %q", name, got)
		}
	}
}

func TestRequestHost(t *testing.T) {
	for in, want := range map[string]string{
		"GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n":             "allowed.test",
		"GET /x?y HTTP/1.1\r\nhost: Allowed.TEST:8080\r\n\r\n":     "allowed.test",
		"OPTIONS * HTTP/1.1\r\nUser-Agent: x\r\nHost: a.b\r\n\r\n": "a.b",
	} {
		if got, ok := requestHost([]byte(in)); !ok || got != want {
			t.Errorf("%q: %q %v", in, got, ok)
		}
	}
	for _, in := range []string{
		"GET / HTTP/1.1\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n\r\n",
		"GET http://other.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
		"CONNECT other.test:443 HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: allowed.test\r\n folded\r\n\r\n",
		"GET / HTTP/1.1\r\nHost : allowed.test\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: user@other.test\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: allowed.test:x\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: allowed.test",
		"get / HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
		"GET / SPDY\r\nHost: allowed.test\r\n\r\n",
		"GET  HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
	} {
		if got, ok := requestHost([]byte(in)); ok {
			t.Errorf("%q: read %q", in, got)
		}
	}
	if _, err := readHead(bytes.NewReader(bytes.Repeat([]byte("a"), 2*maxHead))); err == nil {
		t.Error("an endless head was read")
	}
}

func TestPolicyNames(t *testing.T) {
	p := newPolicy(GatewayConfig{Rules: Rules{Names: []string{"allowed.test", "*.wild.test", "xn--bcher-kva.test"}}})
	for n, want := range map[string]bool{
		"allowed.test": true, "allowed.test.": true, "a.allowed.test": false,
		"wild.test": false, "a.wild.test": true, "a.b.wild.test": true, "awild.test": false,
		"xn--bcher-kva.test": true, "bücher.test": false, "allowed\\046test": false, "": false,
	} {
		if got := p.listed(n); got != want {
			t.Errorf("%q: %v", n, got)
		}
	}
}

func TestDNSAnswer(t *testing.T) {
	q, ok := parseQuery(dnsQuery(0x1234, "Allowed.Test", 1))
	if !ok {
		t.Fatal("no query")
	}
	a4, a6 := netip.MustParseAddr("198.18.1.10"), netip.MustParseAddr("2001:2:0:1::10")
	var m dnsmessage.Message
	if err := m.Unpack(answer(q, []netip.Addr{a4, a6}, dnsmessage.RCodeSuccess)); err != nil {
		t.Fatal(err)
	}
	if m.ID != 0x1234 || !m.Response || len(m.Answers) != 1 || m.Answers[0].Body.(*dnsmessage.AResource).A != a4.As4() {
		t.Fatalf("%+v", m)
	}
	if err := m.Unpack(answer(q, nil, dnsmessage.RCodeNameError)); err != nil || m.RCode != dnsmessage.RCodeNameError || len(m.Answers) != 0 {
		t.Fatalf("%+v %v", m, err)
	}
}

func FuzzReadClientHello(f *testing.F) {
	h := clientHello(f, "allowed.test")
	f.Add(h)
	f.Add(splitRecords(h, 7))
	f.Add(noSNIHello(f))
	f.Add([]byte{22, 3, 1, 0, 4, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		raw, name, ok := readClientHello(iotest.HalfReader(bytes.NewReader(b)))
		if !bytes.HasPrefix(b, raw) {
			t.Fatal("replay bytes are not a prefix of the input")
		}
		if ok && (name == "" || len(raw) > maxHello+5 || strings.ContainsAny(name, "\x00 \r\n")) {
			t.Fatalf("bad name %q", name)
		}
	})
}

func FuzzRequestHost(f *testing.F) {
	f.Add([]byte("GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n"))
	f.Add([]byte("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"))
	f.Add([]byte("POST /x HTTP/1.0\r\nHOST: [2001:db8::1]:80\r\n\r\nbody"))
	f.Fuzz(func(t *testing.T, b []byte) {
		head, _ := readHead(iotest.OneByteReader(bytes.NewReader(b)))
		if len(head) > maxHead+1024 {
			t.Fatalf("head of %d bytes", len(head))
		}
		if name, ok := requestHost(b); ok {
			if name == "" || strings.ContainsAny(name, " \t\r\n:[]/@") {
				t.Fatalf("bad host %q", name)
			}
		}
	})
}

func FuzzDNSAnswer(f *testing.F) {
	f.Add(dnsQuery(1, "allowed.test", 1))
	f.Add(dnsQuery(2, "allowed.test", 28))
	f.Add(dnsQuery(3, "x", 255))
	f.Fuzz(func(t *testing.T, b []byte) {
		q, ok := parseQuery(b)
		if !ok {
			return
		}
		for _, rc := range []dnsmessage.RCode{dnsmessage.RCodeSuccess, dnsmessage.RCodeNameError} {
			out := answer(q, []netip.Addr{netip.MustParseAddr("198.18.1.10"), netip.MustParseAddr("2001:2::10")}, rc)
			if len(out) < 12 || binary.BigEndian.Uint16(out) != binary.BigEndian.Uint16(b) || out[2]&0x80 == 0 {
				t.Fatalf("answer %x", out)
			}
		}
	})
}

// A never-reachable name is refused at run time even when the list holds
// it (the plan refuses such an entry first, SBX-NET-014).
func TestListedRefusesNeverNames(t *testing.T) {
	p := newPolicy(GatewayConfig{Rules: Rules{Names: []string{"a.localhost", "*.localhost", "metadata.google.internal", "ok.example", "*.ok.example"}}})
	for _, n := range []string{"a.localhost", "b.a.localhost", "localhost", "metadata.google.internal", "METADATA.google.internal.", "x.localhost."} {
		if p.listed(n) {
			t.Errorf("%q listed", n)
		}
	}
	for _, n := range []string{"ok.example", "OK.example.", "a.ok.example"} {
		if !p.listed(n) {
			t.Errorf("%q not listed", n)
		}
	}
	if !p.neverReachable(netip.MustParseAddr("169.254.169.254")) || !p.neverReachable(netip.MustParseAddr("fd00:ec2::254")) {
		t.Error("metadata addresses reachable")
	}
}
