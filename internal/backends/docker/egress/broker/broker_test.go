package broker

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/http/httputil"
	"net/textproto"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestNewRefuses(t *testing.T) {
	good := Secret{Name: "K", Hosts: []string{testHost}, Header: "Authorization", Format: "Bearer %s", Value: []byte(canary)}
	for name, mod := range map[string]func(*Secret){
		"no name":             func(s *Secret) { s.Name = "" },
		"no hosts":            func(s *Secret) { s.Hosts = nil },
		"upper-case host":     func(s *Secret) { s.Hosts = []string{"API.example.test"} },
		"IP host":             func(s *Secret) { s.Hosts = []string{"127.0.0.1"} },
		"bare wildcard":       func(s *Secret) { s.Hosts = []string{"*"} },
		"inner wildcard":      func(s *Secret) { s.Hosts = []string{"a.*.test"} },
		"Host header":         func(s *Secret) { s.Header = "Host" },
		"hop-by-hop header":   func(s *Secret) { s.Header = "Connection" },
		"pseudo-header":       func(s *Secret) { s.Header = ":authority" },
		"header with space":   func(s *Secret) { s.Header = "Authorization x" },
		"no %s":               func(s *Secret) { s.Format = "Bearer" },
		"two %s":              func(s *Secret) { s.Format = "%s %s" },
		"other verb":          func(s *Secret) { s.Format = "%d %s" },
		"short value":         func(s *Secret) { s.Value = []byte("abc") },
		"value with CRLF":     func(s *Secret) { s.Value = []byte("sk-aaaaaaaa\r\nX-Evil: 1") },
		"value with NUL":      func(s *Secret) { s.Value = []byte("sk-aaaaaaaa\x00") },
		"value with trailing": func(s *Secret) { s.Format = "%s " },
	} {
		s := good
		mod(&s)
		_, err := New([]Secret{s})
		if err == nil {
			t.Errorf("%s: accepted", name)
		} else if strings.Contains(err.Error(), canary) {
			t.Errorf("%s: the error holds the value", name)
		}
	}
	if _, err := New([]Secret{good, good}); err == nil {
		t.Error("a repeated name was accepted")
	}
	if _, err := New([]Secret{good}); err != nil {
		t.Fatal(err)
	}
}

func TestPlaceholderAndIntercepts(t *testing.T) {
	b1, b2 := newBroker(t), newBroker(t)
	p1, p2 := b1.Placeholder("OPENAI_API_KEY"), b2.Placeholder("OPENAI_API_KEY")
	if len(p1) < 40 || p1 == p2 || strings.Contains(p1, canary) || strings.Contains(canary, p1) {
		t.Errorf("placeholders %q and %q: want random, per broker, at least 40 characters", p1, p2)
	}
	if b1.Placeholder("NOPE") != "" {
		t.Error("a placeholder for an unknown name")
	}
	b, err := New([]Secret{{Name: "W", Hosts: []string{"*.example.org", testHost}, Header: "X-Api-Key", Format: "%s", Value: []byte(canary)}})
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]bool{
		testHost: true, "API.Example.Test.": true, "a.example.org": true, "a.b.example.org": true,
		"example.org": false, otherHost: false, "xexample.org": false, "": false, "127.0.0.1": false,
	} {
		if got := b.Intercepts(host); got != want {
			t.Errorf("Intercepts(%q) = %v, want %v", host, got, want)
		}
	}
	// The CA vouches for the secret's hosts only.
	blk := b1.CACertPEM()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(blk) {
		t.Fatal("CACertPEM is not a PEM certificate")
	}
	if !strings.Contains(string(blk), "BEGIN CERTIFICATE") || strings.Contains(string(blk), "PRIVATE") {
		t.Error("CACertPEM must be the certificate alone")
	}
}

// TestBrokered is the contract on both protocols: the upstream gets the
// real value in the declared header; the sandbox sees only the placeholder,
// also where the upstream echoes the value back; each request is recorded.
func TestBrokered(t *testing.T) {
	for _, k := range connKinds {
		h2 := k.h2
		t.Run(k.name, func(t *testing.T) {
			r := newRigWith(t, k.userSpace)
			up, b, f, ph := r.up, r.b, r.f, r.ph
			c := sandboxClient(b, f.addr(), h2)
			req, _ := http.NewRequest("GET", "https://"+testHost+"/echo", nil)
			req.Header.Set("Authorization", "Bearer "+ph)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			dump, _ := httputil.DumpResponse(resp, true)
			resp.Body.Close()
			if resp.StatusCode != 200 || resp.ProtoMajor != map[bool]int{false: 1, true: 2}[h2] {
				t.Fatalf("status %d over %s", resp.StatusCode, resp.Proto)
			}
			got := up.requests()
			if len(got) != 1 || got[0].Header.Get("Authorization") != "Bearer "+canary || len(got[0].Header["Authorization"]) != 1 {
				t.Fatalf("upstream got %v, want the value in Authorization once", got)
			}
			if want := map[bool]string{false: "HTTP/1.1", true: "HTTP/2.0"}[h2]; got[0].Proto != want {
				t.Errorf("upstream spoken to in %s, want %s as the sandbox chose", got[0].Proto, want)
			}
			if strings.Contains(string(dump), canary) {
				t.Errorf("the sandbox saw the value:\n%s", dump)
			}
			if resp.Header.Get("X-Echo-Authorization") != "Bearer "+ph || !strings.Contains(string(dump), "Authorization: Bearer "+ph) {
				t.Errorf("the echo is not scrubbed back to the placeholder:\n%s", dump)
			}
			recs := f.records()
			if len(recs) != 1 || recs[0] != (Request{Secret: "OPENAI_API_KEY", Host: testHost, Method: "GET", Status: 200}) {
				t.Errorf("records %+v", recs)
			}
			f.noCanary(t)
		})
	}
}

// TestSSE: the first event reaches the sandbox while the upstream still
// holds the stream open, so nothing waits for the end of the response.
func TestSSE(t *testing.T) {
	for _, k := range connKinds {
		h2 := k.h2
		t.Run(k.name, func(t *testing.T) {
			r := newRigWith(t, k.userSpace)
			up, b, f, ph := r.up, r.b, r.f, r.ph
			c := sandboxClient(b, f.addr(), h2)
			req, _ := http.NewRequest("GET", "https://"+testHost+"/sse", nil)
			req.Header.Set("Authorization", "Bearer "+ph)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body := resp.Body
			lines := make(chan string, 8)
			go func() {
				sc := bufio.NewScanner(body)
				for sc.Scan() {
					if sc.Text() != "" {
						lines <- sc.Text()
					}
				}
				close(lines)
			}()
			select {
			case l := <-lines:
				if l != "data: first" {
					t.Fatalf("first event %q", l)
				}
			case <-time.After(2 * time.Second):
				t.Fatal("the first event was held back until the stream ends")
			}
			close(up.release)
			select {
			case l := <-lines:
				if l != "data: second Bearer "+ph {
					t.Errorf("second event %q: want the echoed value scrubbed to the placeholder", strings.ReplaceAll(l, canary, "<VALUE>"))
				}
			case <-time.After(5 * time.Second):
				t.Fatal("no second event")
			}
			f.noCanary(t)
		})
	}
}

// TestServeEndsWithContext: a cancelled context ends Serve and its
// connection, so a sandbox's end takes its brokered connections with it.
func TestServeEndsWithContext(t *testing.T) {
	b := newBroker(t)
	a, z := net.Pipe()
	defer z.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- b.Serve(ctx, a, nil, testHost, func(context.Context) (net.Conn, error) { return nil, io.EOF }, nil, nil)
	}()
	go func() { _, _ = io.Copy(io.Discard, z) }()
	cancel()
	select {
	case err := <-done:
		t.Logf("Serve ended: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("Serve outlived its context")
	}
	// A host the broker does not intercept is refused before any TLS.
	a2, z2 := net.Pipe()
	defer z2.Close()
	if err := b.Serve(t.Context(), a2, nil, otherHost, nil, nil, nil); err == nil {
		t.Error("Serve took a host it does not intercept")
	}
}

// TestResponseScrubbedEverywhere: the value echoed in a 103's header, split
// across two body writes, and in a trailer reaches the sandbox as the
// placeholder on both protocols.
func TestResponseScrubbedEverywhere(t *testing.T) {
	for _, k := range connKinds {
		h2 := k.h2
		t.Run(k.name, func(t *testing.T) {
			r := newRigWith(t, k.userSpace)
			b, f, ph := r.b, r.f, r.ph
			var early []string
			trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
				early = append(early, fmt.Sprint(code, " ", h.Get("Link")))
				return nil
			}}
			req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), "GET", "https://"+testHost+"/everywhere", nil)
			req.Header.Set("Authorization", "Bearer "+ph)
			resp, err := sandboxClient(b, f.addr(), h2).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			all := fmt.Sprint(early, resp.Header, string(body), resp.Trailer)
			if strings.Contains(all, canary) {
				t.Fatalf("the sandbox saw the value: %s", strings.ReplaceAll(all, canary, "<VALUE>"))
			}
			if string(body) != "start Bearer "+ph+" end" || resp.Trailer.Get("X-Echo-Trailer") != "Bearer "+ph {
				t.Errorf("body %q trailer %q", body, resp.Trailer.Get("X-Echo-Trailer"))
			}
			if len(early) != 1 || !strings.Contains(early[0], ph) {
				t.Errorf("103 seen as %q", early)
			}
			f.noCanary(t)
		})
	}
}

// TestLeafCacheBounded: a wildcard host admits any number of names, and the
// leaves made for them do not pile up.
func TestLeafCacheBounded(t *testing.T) {
	b, err := New([]Secret{{Name: "W", Hosts: []string{"*.example.org"}, Header: "X-Api-Key", Format: "%s", Value: []byte(canary)}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2*maxLeafs+3; i++ {
		if _, err := b.leaf(fmt.Sprintf("h%d.example.org", i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(b.leafs); n > maxLeafs {
		t.Errorf("%d leaves cached, want at most %d", n, maxLeafs)
	}
	l, _ := b.leaf("h1.example.org")
	leaf, _ := x509.ParseCertificate(l.Certificate[0])
	pool := trusting(b)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "h1.example.org"}); err != nil {
		t.Errorf("a leaf does not verify against the CA: %v", err)
	}
}

// TestCAConstrained: even a leaf the CA's key signed for another name does
// not verify, so the CA the sandbox trusts vouches for the secrets' hosts
// only.
func TestCAConstrained(t *testing.T) {
	b := newBroker(t)
	pool := trusting(b)
	for name, want := range map[string]bool{testHost: true, "sub." + testHost: true, otherHost: false, "example.test": false} {
		l, err := b.leaf(name)
		if err != nil {
			t.Fatal(err)
		}
		leaf, _ := x509.ParseCertificate(l.Certificate[0])
		_, err = leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: name})
		if (err == nil) != want {
			t.Errorf("%s: verify error %v, want ok=%v", name, err, want)
		}
	}
}

// TestShortValueLength: a value shorter than its placeholder changes a
// scrubbed body's length, so the Content-Length the upstream sent must not
// reach the sandbox; the body arrives whole on both protocols.
func TestShortValueLength(t *testing.T) {
	const short = "sk-short-0123456789"
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "HTTP/1.1", true: "HTTP/2"}[h2], func(t *testing.T) {
			ca := newTestCA(t)
			up := newUpstream(t, ca.leaf(t, testHost))
			b, err := New([]Secret{{Name: "K", Hosts: []string{testHost}, Header: "Authorization", Format: "Bearer %s", Value: []byte(short)}})
			if err != nil {
				t.Fatal(err)
			}
			ph := b.Placeholder("K")
			if len(ph) == len(short) {
				t.Fatal("the placeholder should be longer than this value")
			}
			f := startFront(t, b, up.srv.Listener.Addr().String(), ca.pool)
			req, _ := http.NewRequest("GET", "https://"+testHost+"/echo", nil)
			req.Header.Set("Authorization", "Bearer "+ph)
			resp, err := sandboxClient(b, f.addr(), h2).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || strings.Contains(string(body), short) || !strings.Contains(string(body), "Authorization: Bearer "+ph+"\n") ||
				!strings.HasSuffix(string(body), "\nUser-Agent: Go-http-client/"+map[bool]string{false: "1.1", true: "2.0"}[h2]+"\n") {
				t.Errorf("body %q (err %v): want it whole, scrubbed", body, err)
			}
		})
	}
}

// TestUpstreamUnreachable: when the gateway cannot dial the host, the
// sandbox gets a 502 and the record says so; nothing falls back.
func TestUpstreamUnreachable(t *testing.T) {
	b := newBroker(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	f := startFront(t, b, addr, nil)
	req, _ := http.NewRequest("GET", "https://"+testHost+"/", nil)
	req.Header.Set("Authorization", "Bearer "+b.Placeholder("OPENAI_API_KEY"))
	resp, err := sandboxClient(b, f.addr(), false).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Errorf("status %d, want 502", resp.StatusCode)
	}
	if recs := f.records(); len(recs) != 1 || recs[0].Status != http.StatusBadGateway {
		t.Errorf("records %+v", recs)
	}
	f.noCanary(t)
}

// TestProtocolFollowsTheHost: a client that offers h2 and HTTP/1.1 speaks
// to the broker what the host chose with the broker, and the connection
// the broker made during the handshake serves the first request.
func TestProtocolFollowsTheHost(t *testing.T) {
	for _, hostH2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "host without h2", true: "host with h2"}[hostH2], func(t *testing.T) {
			b, f, conns := countingHost(t, hostH2)
			c := sandboxClient(b, f.addr(), true)
			c.Transport.(*http.Transport).Protocols.SetHTTP1(true)
			want := map[bool]string{false: "HTTP/1.1", true: "HTTP/2.0"}[hostH2]
			for range 3 {
				req, _ := http.NewRequest("GET", "https://"+testHost+"/", nil)
				req.Header.Set("Authorization", "Bearer "+b.Placeholder("OPENAI_API_KEY"))
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || resp.Proto != want || string(body) != want {
					t.Fatalf("status %d over %s to the broker, %q upstream; want %s both", resp.StatusCode, resp.Proto, body, want)
				}
			}
			if n := conns(); n != 1 {
				t.Errorf("the host got %d connections, want 1", n)
			}
			f.noCanary(t)
		})
	}
}

// TestEarlyConnectionExpires: the connection made during the handshake is
// closed when no request comes within earlyLife; a later request dials.
func TestEarlyConnectionExpires(t *testing.T) {
	old := earlyLife
	earlyLife = 20 * time.Millisecond
	t.Cleanup(func() { earlyLife = old })
	b, f, conns := countingHost(t, false)
	pool := trusting(b)
	c, err := tls.Dial("tcp", f.addr(), &tls.Config{ServerName: testHost, RootCAs: pool, NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if p := c.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
		t.Fatalf("negotiated %q with a host without h2", p)
	}
	time.Sleep(10 * earlyLife)
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", testHost, b.Placeholder("OPENAI_API_KEY"))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if n := conns(); n != 2 {
		t.Errorf("the host got %d connections, want 2 (the early one, closed, and the request's)", n)
	}
	f.noCanary(t)
}

// TestEarlyDialBounded: a host that accepts and never answers holds the
// sandbox's handshake for earlyDial at most, which then offers h2 first as
// when the broker dials at the first request.
func TestEarlyDialBounded(t *testing.T) {
	old := earlyDial
	earlyDial = 50 * time.Millisecond
	t.Cleanup(func() { earlyDial = old })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	b := newBroker(t)
	f := startFront(t, b, ln.Addr().String(), nil)
	pool := trusting(b)
	start := time.Now()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", f.addr(), &tls.Config{ServerName: testHost, RootCAs: pool, NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the handshake took %s", d)
	}
	if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Errorf("negotiated %q, want h2", p)
	}
}

// countingHost is an HTTPS host for testHost, with or without h2, that
// answers with the protocol it was spoken to in, a broker and a front for
// it, and the number of connections the host has accepted.
func countingHost(t *testing.T, h2 bool) (*Broker, *front, func() int) {
	t.Helper()
	ca := newTestCA(t)
	var mu sync.Mutex
	conns := 0
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.Proto)
	}))
	up.TLS = &tls.Config{Certificates: []tls.Certificate{ca.leaf(t, testHost)}}
	up.EnableHTTP2 = h2
	up.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			mu.Lock()
			conns++
			mu.Unlock()
		}
	}
	up.StartTLS()
	t.Cleanup(up.Close)
	b := newBroker(t)
	f := startFront(t, b, up.Listener.Addr().String(), ca.pool)
	return b, f, func() int {
		mu.Lock()
		defer mu.Unlock()
		return conns
	}
}
