package broker

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Bounds on what one sandbox can make the broker hold or wait for.
const (
	handshakeTimeout = 10 * time.Second
	headerTimeout    = 10 * time.Second
	idleTimeout      = 90 * time.Second
	maxHeaderBytes   = 64 << 10
	maxStreams       = 64 // concurrent HTTP/2 streams per sandbox connection
	maxUpstreamConns = 8  // upstream connections per sandbox connection
	// A model API may think for minutes before its first byte; the sandbox's
	// lifetime (ctx) bounds it in the end.
	upstreamHeaderTimeout = 5 * time.Minute
	maxMethod             = 32
)

var errSNI = errors.New("broker: server name is not the intercepted host")

// bothProtos is what an HTTP/2-capable client offers upstream.
var bothProtos = []string{"h2", "http/1.1"}

// The connection made during the handshake: the sandbox's handshake waits
// for it at most earlyDial (a client may give up on a slow handshake; the
// request then dials as before), and it waits for the first request at
// most earlyLife (a host may close a connection that sends nothing, and a
// request on a fresh connection is not retried).
var (
	earlyDial = 2 * time.Second
	earlyLife = time.Second
)

// Serve handles one connection the gateway accepted for host, prefix being
// the bytes already read from c (the ClientHello). It terminates TLS with a
// leaf for host from the broker's CA, proxies each request to host over
// connections from dial with TLS verified for host against roots (nil: the
// system's), writes the value into the declared header of requests to host
// and scrubs it from responses. record, when not nil, gets every request.
// Serve returns when the connection ends or ctx is done, and closes c.
// record may be called from several goroutines at once (HTTP/2 streams).
func (b *Broker) Serve(ctx context.Context, c net.Conn, prefix []byte, host string,
	dial func(ctx context.Context) (net.Conn, error), roots *x509.CertPool, record func(Request)) error {
	defer c.Close()
	// The gateway's deadline for reading the ClientHello is not the
	// broker's: its own limits apply from here.
	_ = c.SetDeadline(time.Time{})
	host, ok := normalHost(host)
	if !ok || !b.Intercepts(host) {
		return errors.New("broker: the host is not one the broker intercepts")
	}
	if record == nil {
		record = func(Request) {}
	}
	var mine []*secret
	for _, s := range b.secrets {
		if s.covers(host) {
			mine = append(mine, s)
		}
	}
	leaf, err := b.leaf(host)
	if err != nil {
		return err
	}
	// A client that offers h2 gets the protocol the host itself chose:
	// the broker dials the host while it answers the ClientHello, and
	// that connection serves the first request. HTTP/2 to the sandbox in
	// front of HTTP/1.1 upstream costs a second framing and more goroutine
	// hand-offs per request than the sandbox would pay without the broker.
	first := &earlyConn{}
	defer first.close()
	pc := &prefixConn{Conn: c, r: io.MultiReader(bytes.NewReader(prefix), c)}
	tc := tls.Server(pc, &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			if n, _ := normalHost(hello.ServerName); n != host {
				return nil, errSNI
			}
			protos := []string{"h2", "http/1.1"}
			if slices.Contains(hello.SupportedProtos, "h2") {
				ectx, cancel := context.WithTimeout(hello.Context(), earlyDial)
				up, err := dialUpstream(ectx, dial, host, roots, bothProtos)
				cancel()
				if err == nil {
					first.set(up)
					if up.ConnectionState().NegotiatedProtocol != "h2" {
						protos = []string{"http/1.1", "h2"}
					}
				}
			}
			return &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: protos, Certificates: []tls.Certificate{*leaf}}, nil
		},
	})
	hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	err = tc.HandshakeContext(hctx)
	cancel()
	if err != nil {
		return fmt.Errorf("broker: TLS from the sandbox for %s: %w", host, err)
	}

	// Upstream speaks what the sandbox's client chose with the broker: an
	// HTTP/1.1 connection is one request at a time, for which one
	// HTTP/1.1 connection upstream is the cheaper match; HTTP/2 falls
	// back to HTTP/1.1 where the host has no h2.
	h2 := tc.ConnectionState().NegotiatedProtocol == "h2"
	if _, kernel := c.(syscall.Conn); h2 && !kernel {
		stopWriter := pc.startWriter()
		defer stopWriter()
	}
	var upProtos []string // as http.Transport offers for HTTP/1.1 only: no ALPN
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	if h2 {
		upProtos = bothProtos
		protocols.SetHTTP2(true)
	}
	tr := &http.Transport{
		// The gateway's own resolution and dial; never the sandbox's
		// address, never a proxy from the environment. TLS is verified
		// for host against roots.
		DialTLSContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			if up := first.take(h2); up != nil {
				return up, nil
			}
			return dialUpstream(ctx, dial, host, roots, upProtos)
		},
		ForceAttemptHTTP2:      true,
		Protocols:              protocols,
		ResponseHeaderTimeout:  upstreamHeaderTimeout,
		MaxResponseHeaderBytes: maxHeaderBytes,
		IdleConnTimeout:        idleTimeout,
		MaxConnsPerHost:        maxUpstreamConns,
		MaxIdleConnsPerHost:    maxUpstreamConns,
		// The scrubber reads literal bytes: ask for none of the encodings
		// that would hide the value from it.
		DisableCompression: true,
	}
	defer tr.CloseIdleConnections()
	target := &url.URL{Scheme: "https", Host: host}

	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &scrubWriter{rw: w, s: newScrubber(b.scrub), pairs: b.scrub, keepLength: b.sameLength()}
		entry := Request{Host: host, Method: r.Method}
		if len(entry.Method) > maxMethod {
			entry.Method = entry.Method[:maxMethod]
		}
		ended := false
		defer func() {
			// A response the proxy aborted (it panics with
			// http.ErrAbortHandler) ends without what the scrubber holds:
			// that may be the start of a value.
			if ended {
				sw.finish()
			}
			entry.Status = sw.status
			if entry.Status == 0 {
				entry.Status = http.StatusBadGateway
			}
			record(entry)
		}()
		use, code := decide(r, host, mine)
		if code != 0 {
			// A connection that sent one refused request is not trusted
			// with another: HTTP/1.1 closes after this answer.
			sw.Header().Set("Connection", "close")
			http.Error(sw, http.StatusText(code), code)
			ended = true
			return
		}
		if use != nil {
			entry.Secret = use.Name
		}
		rp := &httputil.ReverseProxy{
			Rewrite:   func(pr *httputil.ProxyRequest) { rewrite(pr, target, use) },
			Transport: tr,
			ModifyResponse: func(resp *http.Response) error {
				if ce := resp.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
					return errors.New("broker: an encoded response cannot be scrubbed")
				}
				if resp.StatusCode == http.StatusPartialContent {
					return errors.New("broker: a partial response can cut a value where the scrubber cannot see it")
				}
				return nil
			},
			// The error may describe the upstream; the sandbox gets only a
			// status, and nothing is logged.
			ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) {
				w.WriteHeader(http.StatusBadGateway)
			},
			ErrorLog:   discard,
			BufferPool: buffers,
		}
		rp.ServeHTTP(sw, r)
		ended = true
	})

	ln := &oneConn{c: tc, closed: make(chan struct{})}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: headerTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          discard,
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams:      maxStreams,
			MaxDecoderHeaderTableSize: 4096,
			MaxEncoderHeaderTableSize: 4096,
		},
		BaseContext: func(net.Listener) context.Context { return ctx },
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateClosed || st == http.StateHijacked {
				ln.Close()
			}
		},
	}
	stop := context.AfterFunc(ctx, func() { srv.Close() })
	defer stop()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("broker: serving %s: %w", host, err)
	}
	return nil
}

// dialUpstream dials host and makes TLS to it, verified for host against
// roots (nil: the system's), offering protos.
func dialUpstream(ctx context.Context, dial func(ctx context.Context) (net.Conn, error),
	host string, roots *x509.CertPool, protos []string) (*tls.Conn, error) {
	raw, err := dial(ctx)
	if err != nil {
		return nil, err
	}
	tc := tls.Client(raw, &tls.Config{ServerName: host, RootCAs: roots, MinVersion: tls.VersionTLS12, NextProtos: protos})
	hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		raw.Close()
		return nil, err
	}
	return tc, nil
}

// earlyConn holds the upstream connection made during the sandbox's
// handshake until the first request takes it or earlyLife ends.
type earlyConn struct {
	mu sync.Mutex
	c  *tls.Conn
	t  *time.Timer
}

func (e *earlyConn) set(c *tls.Conn) {
	e.close()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.c = c
	e.t = time.AfterFunc(earlyLife, e.close)
}

// take returns the connection if it is still waiting and fits: an h2
// connection only for a Transport that speaks HTTP/2.
func (e *earlyConn) take(h2 bool) *tls.Conn {
	e.mu.Lock()
	c := e.c
	e.c = nil
	e.mu.Unlock()
	if c != nil && !h2 && c.ConnectionState().NegotiatedProtocol == "h2" {
		c.Close()
		return nil
	}
	return c
}

func (e *earlyConn) close() {
	e.mu.Lock()
	c := e.c
	e.c = nil
	if e.t != nil {
		e.t.Stop()
	}
	e.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

var discard = log.New(io.Discard, "", 0)

// buffers spares each proxied response a fresh 32 KiB copy buffer.
var buffers = &bufferPool{p: sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}}

type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte  { return *b.p.Get().(*[]byte) }
func (b *bufferPool) Put(v []byte) { b.p.Put(&v) }

// decide checks a request from the sandbox and picks the secret to write
// into it. A non-zero code refuses it. Refusals are the cases where the
// request could carry the value somewhere other than host's declared
// header, or where the parse is not the one upstream would make.
func decide(r *http.Request, host string, mine []*secret) (*secret, int) {
	switch {
	case r.ProtoMajor < 1 || r.ProtoMajor == 1 && r.ProtoMinor < 1:
		return nil, http.StatusHTTPVersionNotSupported
	case r.Method == http.MethodConnect:
		return nil, http.StatusMethodNotAllowed
	case r.Header.Get("Upgrade") != "" || hasToken(r.Header.Values("Connection"), "upgrade"):
		return nil, http.StatusNotImplemented
	case r.TLS == nil || !sameHost(r.TLS.ServerName, host, false):
		return nil, http.StatusMisdirectedRequest
	case !sameHost(r.Host, host, true):
		return nil, http.StatusMisdirectedRequest
	case len(r.Header["Host"]) > 0 && (len(r.Header["Host"]) > 1 || !sameHost(r.Header["Host"][0], host, true)):
		// HTTP/2 keeps a Host field beside :authority; both must agree.
		return nil, http.StatusMisdirectedRequest
	case r.URL.Host != "" && !sameHost(r.URL.Host, host, true),
		r.URL.Scheme != "" && r.URL.Scheme != "https",
		r.URL.User != nil:
		return nil, http.StatusMisdirectedRequest
	}
	var use *secret
	for _, s := range mine {
		vs := r.Header.Values(s.Header)
		if len(vs) > 1 {
			return nil, http.StatusBadRequest
		}
		if _, inTrailer := r.Trailer[s.Header]; inTrailer {
			return nil, http.StatusBadRequest
		}
		if len(vs) == 0 {
			continue
		}
		switch {
		case vs[0] == s.sent:
			if use != nil {
				// Two secrets in one request: not a shape the contract
				// has; refuse rather than pick.
				return nil, http.StatusBadRequest
			}
			use = s
		case strings.Contains(vs[0], s.placeholder):
			// The placeholder in the declared header but not in the
			// declared form: refuse, so no partial rewrite is guessed at.
			return nil, http.StatusBadRequest
		}
	}
	return use, 0
}

// rewrite makes the upstream request: to host over TLS whatever the
// sandbox's request said, asking for no content encoding and no range, with the
// value in the declared header when decide chose a secret.
func rewrite(pr *httputil.ProxyRequest, target *url.URL, use *secret) {
	pr.SetURL(target)
	pr.Out.Host = target.Host
	pr.Out.Header.Set("Accept-Encoding", "identity")
	// A range of an echo could start or end inside the value, where the
	// scrubber cannot recognise it: always ask for the whole response.
	pr.Out.Header.Del("Range")
	pr.Out.Header.Del("If-Range")
	if use != nil {
		pr.Out.Header[use.Header] = []string{use.real}
	}
}

// sameHost reports whether an authority (or server name) names host; with
// port, a ":443" is allowed and any other port refused.
func sameHost(authority, host string, port bool) bool {
	// host is already normal: the usual exact form needs no parse.
	if authority == host || port && len(authority) == len(host)+4 && strings.HasPrefix(authority, host) && strings.HasSuffix(authority, ":443") {
		return true
	}
	h := authority
	if port {
		if hh, p, err := net.SplitHostPort(authority); err == nil {
			if p != "443" {
				return false
			}
			h = hh
		}
	}
	n, ok := normalHost(h)
	return ok && n == host
}

func hasToken(vs []string, tok string) bool {
	for _, v := range vs {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), tok) {
				return true
			}
		}
	}
	return false
}

// sameLength reports whether every placeholder is as long as its value, so
// scrubbing keeps a response's Content-Length true.
func (b *Broker) sameLength() bool {
	for _, p := range b.scrub {
		if len(p.from) != len(p.to) {
			return false
		}
	}
	return true
}

// scrubWriter is the sandbox's side of a response: every header written
// (1xx, final, trailers) and every body byte pass the scrubber first.
type scrubWriter struct {
	rw         http.ResponseWriter
	s          *scrubber
	pairs      []pair
	keepLength bool
	status     int
	out        []byte
}

func (w *scrubWriter) Header() http.Header { return w.rw.Header() }

func (w *scrubWriter) WriteHeader(code int) {
	scrubHeader(w.pairs, w.rw.Header())
	if code >= 100 && code < 200 {
		w.rw.WriteHeader(code)
		return
	}
	if w.status != 0 {
		return
	}
	w.status = code
	if !w.keepLength {
		w.rw.Header().Del("Content-Length")
	}
	w.rw.WriteHeader(code)
}

func (w *scrubWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	w.out = w.s.push(w.out[:0], p)
	if len(w.out) > 0 {
		if _, err := w.rw.Write(w.out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// FlushError passes on what the scrubber has released; a tail that may
// still become a value stays held.
func (w *scrubWriter) FlushError() error {
	return http.NewResponseController(w.rw).Flush()
}

// finish writes what the scrubber held back and scrubs the trailers the
// proxy set after the body.
func (w *scrubWriter) finish() {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if out := w.s.flush(nil); len(out) > 0 {
		_, _ = w.rw.Write(out)
	}
	scrubHeader(w.pairs, w.rw.Header())
}

// prefixConn reads the bytes the gateway already read before the rest.
type prefixConn struct {
	net.Conn
	r io.Reader

	wmu    sync.Mutex
	writes chan []byte
	wrote  chan writeResult
	done   chan struct{}
}

func (p *prefixConn) Read(b []byte) (int, error) { return p.r.Read(b) }

// startWriter moves the connection's writes onto one goroutine that lives
// as long as the connection: net/http's HTTP/2 server writes each flush
// from a new goroutine, whose stack would grow again through a user-space
// stack's deep write path (the gateway's netstack; a connection with no
// file descriptor) for every response. The returned func ends it.
func (p *prefixConn) startWriter() func() {
	p.writes, p.wrote, p.done = make(chan []byte), make(chan writeResult), make(chan struct{})
	go func() {
		for {
			select {
			case b := <-p.writes:
				n, err := p.Conn.Write(b)
				p.wrote <- writeResult{n, err}
			case <-p.done:
				return
			}
		}
	}()
	return func() { close(p.done) }
}

type writeResult struct {
	n   int
	err error
}

func (p *prefixConn) Write(b []byte) (int, error) {
	if p.writes == nil {
		return p.Conn.Write(b)
	}
	p.wmu.Lock()
	defer p.wmu.Unlock()
	select {
	case p.writes <- b:
	case <-p.done:
		return 0, net.ErrClosed
	}
	r := <-p.wrote
	return r.n, r.err
}

// oneConn is a listener that yields one connection, then blocks until
// closed, so http.Server serves exactly the sandbox's connection.
type oneConn struct {
	mu     sync.Mutex
	c      net.Conn
	once   sync.Once
	closed chan struct{}
}

func (l *oneConn) Accept() (net.Conn, error) {
	l.mu.Lock()
	c := l.c
	l.c = nil
	l.mu.Unlock()
	if c != nil {
		return c, nil
	}
	<-l.closed
	return nil, net.ErrClosed
}

func (l *oneConn) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *oneConn) Addr() net.Addr { return dummyAddr{} }

type dummyAddr struct{}

func (dummyAddr) Network() string { return "tcp" }
func (dummyAddr) String() string  { return "sandbox" }
