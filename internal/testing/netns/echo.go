//go:build linux

package netns

import (
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Seen is one request an Echo host received.
type Seen struct {
	TLS                      bool
	Proto, Method, Host, URI string
	Header                   http.Header
	Body                     string
}

// Echo is a web host (HTTP/1.1 and HTTP/2 on 443, HTTP/1.1 on 80) that answers every
// request with what it received, as an echoing API or an error page would:
// the request line, every header and the body. /redirect?to=URL answers 302
// to URL; /sse streams three server-sent events a while apart, the first
// holding the Authorization header it got.
type Echo struct {
	mu   sync.Mutex
	seen []Seen
}

// Requests are the requests received so far.
func (e *Echo) Requests() []Seen {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.seen)
}

// All is everything received so far, as one string to search.
func (e *Echo) All() string {
	var b strings.Builder
	for _, s := range e.Requests() {
		fmt.Fprintf(&b, "%s %s %s %s\n%v\n%s\n", s.Proto, s.Method, s.Host, s.URI, s.Header, s.Body)
	}
	return b.String()
}

// EchoHost starts an Echo on a:443, with a leaf of ca, and a:80.
func (l *Lab) EchoHost(t testing.TB, a netip.Addr, ca *CA) *Echo {
	t.Helper()
	e := &Echo{}
	for _, port := range []string{"443", "80"} {
		ln, err := l.ListenOutside("tcp", net.JoinHostPort(a.String(), port))
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(e.serve), ErrorLog: log.New(io.Discard, "", 0),
			TLSConfig: &tls.Config{Certificates: []tls.Certificate{ca.Leaf}, MinVersion: tls.VersionTLS12}}
		go func() {
			if port == "443" {
				_ = srv.ServeTLS(ln, "", "")
			} else {
				_ = srv.Serve(ln)
			}
		}()
		t.Cleanup(func() { srv.Close() })
	}
	return e
}

func (e *Echo) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	e.mu.Lock()
	e.seen = append(e.seen, Seen{TLS: r.TLS != nil, Proto: r.Proto, Method: r.Method, Host: r.Host, URI: r.RequestURI, Header: r.Header.Clone(), Body: string(body)})
	e.mu.Unlock()
	switch r.URL.Path {
	case "/redirect":
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
		return
	case "/sse":
		w.Header().Set("Content-Type", "text/event-stream")
		f, _ := w.(http.Flusher)
		for i := range 3 {
			fmt.Fprintf(w, "data: %d %s\n\n", i, r.Header.Get("Authorization"))
			if f != nil {
				f.Flush()
			}
			if i < 2 {
				time.Sleep(300 * time.Millisecond)
			}
		}
		return
	}
	fmt.Fprintf(w, "%s %s %s\n", r.Method, r.RequestURI, r.Proto)
	for _, k := range slices.Sorted(maps.Keys(r.Header)) {
		fmt.Fprintf(w, "%s: %s\n", k, strings.Join(r.Header[k], ", "))
	}
	fmt.Fprintf(w, "\n%s", body)
}
