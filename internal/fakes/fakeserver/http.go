package fakeserver

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"
)

// HTTP is a fake's listener and HTTP server; a server embeds it.
type HTTP struct {
	// URL is the server's base URL, http://HOST:PORT.
	URL string

	srv *http.Server
}

// Listen listens on addr (port 0: a free one), sets URL and serves
// handler until Shutdown; name prefixes its error.
func (h *HTTP) Listen(name, addr string, handler http.Handler) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s: listen: %w", name, err)
	}
	h.URL = "http://" + ln.Addr().String()
	h.srv = &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = h.srv.Serve(ln) }()
	return nil
}

// Shutdown stops serving, giving the requests under way 5 s.
func (h *HTTP) Shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = h.srv.Shutdown(ctx)
}

// EndAll ends every sandbox of open and returns the first error.
func EndAll[S any](open []S, end func(S) error) error {
	var first error
	for _, sb := range open {
		if err := end(sb); err != nil && first == nil {
			first = err
		}
	}
	return first
}
