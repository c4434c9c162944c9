//go:build linux

package netns

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// CA is a test certificate authority with one leaf for the given names.
type CA struct {
	Pool *x509.CertPool
	PEM  []byte // the CA's certificate, for a trust store file
	Leaf tls.Certificate
}

// NewCA makes a CA and a leaf certificate for names.
func NewCA(t testing.TB, names ...string) *CA {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sandboxio test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, leafTmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return &CA{Pool: pool, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		Leaf: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}}
}

// WebHost serves, on one outside address, HTTP on 80 and HTTPS on 443
// (answering "<who> host=<Host>"), a TCP echo on 9000 and a UDP echo on 9001.
func (l *Lab) WebHost(t testing.TB, who string, a netip.Addr, ca *CA) {
	t.Helper()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s host=%s", who, r.Host)
	})
	for _, port := range []string{"80", "443"} {
		ln, err := l.ListenOutside("tcp", net.JoinHostPort(a.String(), port))
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
		if port == "443" {
			ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{ca.Leaf}, MinVersion: tls.VersionTLS12})
		}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { srv.Close() })
	}
	ln, err := l.ListenOutside("tcp", net.JoinHostPort(a.String(), "9000"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(30 * time.Second))
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	pc, err := l.ListenPacketOutside("udp", net.JoinHostPort(a.String(), "9001"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(buf[:n], from)
		}
	}()
}

// Never listens on TCP ports 80, 443, 9000 and UDP 53, 443, 9001 of each
// address and counts everything that reaches it.
type Never struct{ hits atomic.Int64 }

// Hits is how many connections or datagrams reached the listener.
func (n *Never) Hits() int64 { return n.hits.Load() }

// NeverHost starts a Never on the outside addresses as.
func (l *Lab) NeverHost(t testing.TB, as ...netip.Addr) *Never {
	t.Helper()
	n := &Never{}
	for _, a := range as {
		for _, port := range []string{"80", "443", "9000"} {
			ln, err := l.ListenOutside("tcp", net.JoinHostPort(a.String(), port))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() })
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					n.hits.Add(1)
					c.Close()
				}
			}()
		}
		for _, port := range []string{"53", "443", "9001"} {
			pc, err := l.ListenPacketOutside("udp", net.JoinHostPort(a.String(), port))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { pc.Close() })
			go func() {
				buf := make([]byte, 2048)
				for {
					if _, _, err := pc.ReadFrom(buf); err != nil {
						return
					}
					n.hits.Add(1)
				}
			}()
		}
	}
	return n
}

// DNS is an authoritative test DNS server: each name answers what its
// function returns at the time of the query.
type DNS struct {
	mu      sync.Mutex
	names   map[string]func() []netip.Addr
	queries atomic.Int64
}

// Set makes name (no trailing dot) answer f().
func (d *DNS) Set(name string, f func() []netip.Addr) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.names[strings.ToLower(name)] = f
}

// Queries is how many queries the server got.
func (d *DNS) Queries() int64 { return d.queries.Load() }

// Static answers as.
func Static(as ...netip.Addr) func() []netip.Addr { return func() []netip.Addr { return as } }

// DNSServer serves DNS on UDP a:53.
func (l *Lab) DNSServer(t testing.TB, a netip.Addr) *DNS {
	t.Helper()
	d := &DNS{names: map[string]func() []netip.Addr{}}
	pc, err := l.ListenPacketOutside("udp", net.JoinHostPort(a.String(), "53"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			d.queries.Add(1)
			if out, err := d.answer(buf[:n]); err == nil {
				_, _ = pc.WriteTo(out, from)
			}
		}
	}()
	return d
}

func (d *DNS) answer(b []byte) ([]byte, error) {
	var m dnsmessage.Message
	if err := m.Unpack(b); err != nil {
		return nil, err
	}
	if len(m.Questions) != 1 {
		return nil, errors.New("one question")
	}
	q := m.Questions[0]
	name := strings.TrimSuffix(strings.ToLower(q.Name.String()), ".")
	d.mu.Lock()
	f := d.names[name]
	d.mu.Unlock()
	resp := dnsmessage.Message{
		Header:    dnsmessage.Header{ID: m.ID, Response: true, Authoritative: true, RecursionDesired: m.RecursionDesired},
		Questions: m.Questions,
	}
	if f == nil {
		resp.RCode = dnsmessage.RCodeNameError
		return resp.Pack()
	}
	rh := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 1}
	for _, a := range f() {
		switch {
		case q.Type == dnsmessage.TypeA && a.Is4():
			rh.Type = dnsmessage.TypeA
			resp.Answers = append(resp.Answers, dnsmessage.Resource{Header: rh, Body: &dnsmessage.AResource{A: a.As4()}})
		case q.Type == dnsmessage.TypeAAAA && a.Is6():
			rh.Type = dnsmessage.TypeAAAA
			resp.Answers = append(resp.Answers, dnsmessage.Resource{Header: rh, Body: &dnsmessage.AAAAResource{AAAA: a.As16()}})
		}
	}
	return resp.Pack()
}
