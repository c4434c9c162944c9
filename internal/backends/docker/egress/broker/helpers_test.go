package broker

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	testHost  = "api.example.test"
	otherHost = "other.example.test"
	// canary is the real value in every test: it must reach the upstream's
	// declared header and nothing the sandbox, the audit or a log sees.
	canary = "sk-CANARY-0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c"
)

// logs is everything the standard logger printed during the tests.
var logs syncBuffer

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestMain(m *testing.M) {
	log.SetOutput(&logs)
	code := m.Run()
	if strings.Contains(logs.String(), canary) {
		fmt.Fprintln(os.Stderr, "FAIL: the canary value appears in the log")
		code = 1
	}
	os.Exit(code)
}

// testCA is the upstream's own CA, which the broker verifies against.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t testing.TB) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "upstream test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

func (ca *testCA) leaf(t testing.TB, names ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// seen is one request as the upstream received it.
type seen struct {
	Proto, Method, Host, URI string
	Header                   http.Header
	Body                     string
}

func (s seen) String() string {
	var keys []string
	for k := range s.Header {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s host=%s\n", s.Proto, s.Method, s.URI, s.Host)
	for _, k := range keys {
		for _, v := range s.Header[k] {
			fmt.Fprintf(&b, "%s: %s\n", k, v)
		}
	}
	b.WriteString(s.Body)
	return b.String()
}

// upstream is an HTTPS test host on 127.0.0.1 that records what it
// receives and can echo it back.
type upstream struct {
	srv     *httptest.Server
	mu      sync.Mutex
	got     []seen
	release chan struct{} // lets /sse send its second event
}

func newUpstream(t testing.TB, cert tls.Certificate) *upstream {
	t.Helper()
	u := &upstream{release: make(chan struct{})}
	u.srv = httptest.NewUnstartedServer(http.HandlerFunc(u.serve))
	u.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	u.srv.EnableHTTP2 = true
	u.srv.StartTLS()
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstream) requests() []seen {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seen(nil), u.got...)
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	s := seen{Proto: r.Proto, Method: r.Method, Host: r.Host, URI: r.RequestURI, Header: r.Header.Clone(), Body: string(body)}
	u.mu.Lock()
	u.got = append(u.got, s)
	u.mu.Unlock()
	switch r.URL.Path {
	case "/echo":
		// An echoing server: the request's Authorization in a response
		// header and the whole request in the body, with ranges served.
		w.Header().Set("X-Echo-Authorization", r.Header.Get("Authorization"))
		http.ServeContent(w, r, "", time.Time{}, strings.NewReader(s.String()))
	case "/partial":
		// An answer of 206 whatever was asked.
		w.Header().Set("Content-Range", "bytes 0-9/100")
		w.WriteHeader(http.StatusPartialContent)
		_, _ = io.WriteString(w, r.Header.Get("Authorization")[:10])
	case "/cut":
		// An echo cut short inside the value, as a truncating error
		// message would be.
		_, _ = io.WriteString(w, "your key starts "+r.Header.Get("Authorization")[:len("Bearer ")+20])
	case "/abort":
		// An upstream that dies in the middle of echoing the value, after
		// fewer bytes of it than the scrubber masks at a clean end.
		_, _ = io.WriteString(w, "key "+r.Header.Get("Authorization")[:len("Bearer ")+minPartial-2])
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	case "/redirect":
		http.Redirect(w, r, "https://"+otherHost+"/landed", http.StatusFound)
	case "/everywhere":
		// The value in an informational response, a split body write and
		// a trailer: each must reach the sandbox scrubbed.
		auth := r.Header.Get("Authorization")
		w.Header().Set("Link", "</x>; rel=preload; v=\""+auth+"\"")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		w.Header().Set("Trailer", "X-Echo-Trailer")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "start "+auth[:len(auth)/2])
		w.(http.Flusher).Flush()
		time.Sleep(20 * time.Millisecond)
		_, _ = io.WriteString(w, auth[len(auth)/2:]+" end")
		w.Header().Set("X-Echo-Trailer", auth)
	case "/gzip":
		w.Header().Set("Content-Encoding", "gzip")
		_, _ = w.Write([]byte{0x1f, 0x8b})
	case "/sse":
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-u.release:
		case <-time.After(10 * time.Second):
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "data: second "+r.Header.Get("Authorization")+"\n\n")
	case "/slow":
		// A host that takes a millisecond to answer, as any real one
		// across a network does.
		time.Sleep(time.Millisecond)
		_, _ = io.WriteString(w, "ok\n")
	default:
		_, _ = io.WriteString(w, "ok\n")
	}
}

// front is the broker as the gateway would run it: a 127.0.0.1 listener
// whose connections go to Serve for one host, with the first bytes of the
// ClientHello already read, as the gateway reads them.
type front struct {
	ln   net.Listener
	mu   sync.Mutex
	recs []Request
	errs []error
}

func startFront(t testing.TB, b *Broker, upAddr string, roots *x509.CertPool) *front {
	t.Helper()
	return startFrontWith(t, b, upAddr, roots, func(c net.Conn) net.Conn { return c })
}

// userSpaceConn is a connection as the gateway's netstack hands it over:
// no file descriptor behind it.
type userSpaceConn struct{ net.Conn }

// startUserSpaceFront is startFront with the sandbox's connections as the
// gateway gives them to Serve.
func startUserSpaceFront(t testing.TB, b *Broker, upAddr string, roots *x509.CertPool) *front {
	t.Helper()
	return startFrontWith(t, b, upAddr, roots, func(c net.Conn) net.Conn { return userSpaceConn{c} })
}

func startFrontWith(t testing.TB, b *Broker, upAddr string, roots *x509.CertPool, wrap func(net.Conn) net.Conn) *front {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &front{ln: ln}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); ln.Close(); wg.Wait() })
	dial := func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", upAddr)
	}
	record := func(r Request) {
		f.mu.Lock()
		f.recs = append(f.recs, r)
		f.mu.Unlock()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				prefix := make([]byte, 5)
				_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
				if _, err := io.ReadFull(c, prefix); err != nil {
					c.Close()
					return
				}
				_ = c.SetReadDeadline(time.Time{})
				err := b.Serve(ctx, wrap(c), prefix, testHost, dial, roots, record)
				if err != nil {
					f.mu.Lock()
					f.errs = append(f.errs, err)
					f.mu.Unlock()
				}
			}()
		}
	}()
	return f
}

func (f *front) addr() string { return f.ln.Addr().String() }

func (f *front) records() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.recs...)
}

// noCanary fails when the value shows in the broker's records or errors.
func (f *front) noCanary(t testing.TB) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.recs {
		if strings.Contains(fmt.Sprintf("%+v", r), canary) {
			t.Errorf("canary in a record: %+v", r)
		}
	}
	for _, e := range f.errs {
		if strings.Contains(e.Error(), canary) {
			t.Errorf("canary in an error")
		}
	}
}

// sandboxClient is the code in the sandbox: it trusts only the broker's
// CA and every connection it makes goes to the front.
// trusting is the pool of a sandbox that trusts b's CA, as its bundle does.
func trusting(b *Broker) *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b.CACertPEM())
	return pool
}

func sandboxClient(b *Broker, addr string, h2 bool) *http.Client {
	pool := trusting(b)
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		},
		TLSClientConfig:   &tls.Config{RootCAs: pool},
		ForceAttemptHTTP2: h2,
	}
	tr.Protocols = new(http.Protocols)
	if h2 {
		tr.Protocols.SetHTTP2(true)
	} else {
		tr.Protocols.SetHTTP1(true)
	}
	return &http.Client{
		Transport:     tr,
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// rawWait bounds a raw exchange: the broker keeps an HTTP/1.1 connection
// open for the next request unless told to close.
var rawWait = 5 * time.Second

// rawExchange sends raw HTTP/1.1 bytes over TLS to the front and returns
// the first response's status line and everything read (bounded).
func rawExchange(t testing.TB, b *Broker, addr, raw string) (string, string) {
	t.Helper()
	pool := trusting(b)
	d := &net.Dialer{Timeout: 5 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{RootCAs: pool, ServerName: testHost, NextProtos: []string{"http/1.1"}})
	if err != nil {
		return "handshake refused", err.Error()
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(rawWait))
	if _, err := io.WriteString(c, raw); err != nil {
		return "write failed", err.Error()
	}
	all, _ := io.ReadAll(io.LimitReader(c, 1<<20))
	line, _, _ := bufio.NewReader(bytes.NewReader(all)).ReadLine()
	if len(line) == 0 {
		return "connection closed", string(all)
	}
	return string(line), string(all)
}

// newBroker is a broker with one secret, the canary, for testHost.
func newBroker(t testing.TB) *Broker {
	t.Helper()
	b, err := New([]Secret{{
		Name: "OPENAI_API_KEY", Hosts: []string{testHost}, Header: "Authorization",
		Format: "Bearer %s", Value: []byte(canary),
	}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// splice is the gateway's path for a host the broker does not intercept:
// a plain TCP relay to addr, copying through a buffer as the gateway's
// splice does (the gateway's side is a netstack connection, which the
// kernel's splice(2) cannot take).
func splice(t testing.TB, addr string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var cmu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		cmu.Lock()
		for _, c := range conns {
			c.Close()
		}
		cmu.Unlock()
		wg.Wait()
	})
	cp := func(dst, src net.Conn) {
		defer wg.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		dst.Close()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			cmu.Lock()
			conns = append(conns, c, up)
			cmu.Unlock()
			wg.Add(2)
			go cp(up, c)
			go cp(c, up)
		}
	}()
	return ln.Addr().String()
}
