package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/mcpserver"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/safefile"
)

// The HTTP transport serves code execution to whoever reaches a loopback
// port: every local process and user, and any web page a local browser
// opens (DNS rebinding, or a plain cross-origin request). Each request is
// therefore checked, before it can claim the one session, for a loopback
// Host naming the bound port, a loopback Origin when it has one, and the
// bearer token. Only a client's initialize that the SDK answers with a
// session claims the session: a refused or stray request claims nothing.

const (
	// maxTokenFileBytes bounds the token file; minTokenBytes is the
	// shortest token taken (a guessable one is no credential).
	maxTokenFileBytes = 4096
	minTokenBytes     = 16
	// maxInitializeBytes bounds the body of a request without a session,
	// which the gate reads to see that it is an initialize.
	maxInitializeBytes = 64 << 10
	// maxLoggedRefusals bounds the refusals written to stderr: a page
	// that sends requests in a loop must not flood it.
	maxLoggedRefusals = 20
)

// bearerToken is the token of --token-file, kept only as its SHA-256 so
// that comparing takes the same time whatever the length of what a client
// sends.
type bearerToken struct{ sum [sha256.Size]byte }

// bearer reads --token-file, or accepts --insecure-no-token with a
// warning. A token is required by default: loopback is shared by every
// local user and process.
func (m *mcpFlags) bearer(e *env) (*bearerToken, error) {
	switch {
	case m.tokenFile != "" && m.noToken:
		return nil, errors.New("--token-file and --insecure-no-token exclude each other")
	case m.noToken:
		fmt.Fprintln(e.stderr, "sandboxio mcp: warning: --insecure-no-token: serving without a bearer token; any local process or user that reaches the port can run code in the sandbox")
		return nil, nil
	case m.tokenFile == "":
		return nil, errors.New("--http needs --token-file FILE, the bearer token every request must carry (e.g. umask 077; openssl rand -hex 32 >token), or --insecure-no-token to serve without one")
	}
	tok, err := readTokenFile(m.tokenFile)
	if err != nil {
		return nil, fmt.Errorf("--token-file: %w", err)
	}
	return &bearerToken{sum: sha256.Sum256(tok)}, nil
}

// readTokenFile reads a bearer token from a regular file (no symlink) of
// this user that no one else may read or write. Errors never quote the
// file's content.
func readTokenFile(path string) ([]byte, error) {
	f, fi, err := safefile.OpenRead(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if uid, ok := safefile.Owner(fi); ok {
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			return nil, fmt.Errorf("%s has mode %04o: a token file must be readable by its owner only (chmod 600 %s)", path, perm, path)
		}
		if uid != os.Geteuid() {
			return nil, fmt.Errorf("%s is owned by uid %d, not by this user (uid %d): another user could change the token", path, uid, os.Geteuid())
		}
	}
	if fi.Size() > maxTokenFileBytes {
		return nil, fmt.Errorf("%s has %d bytes, more than a token file holds (%d)", path, fi.Size(), maxTokenFileBytes)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	tok := bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r"))
	switch {
	case len(tok) == 0:
		return nil, fmt.Errorf("%s is empty: write a token into it (e.g. openssl rand -hex 32)", path)
	case len(tok) < minTokenBytes:
		return nil, fmt.Errorf("%s holds a token of %d characters, fewer than %d: use a random one (e.g. openssl rand -hex 32)", path, len(tok), minTokenBytes)
	}
	for _, c := range tok {
		if !isTokenChar(c) {
			return nil, fmt.Errorf("%s holds a character a bearer token cannot have (RFC 6750: letters, digits, -._~+/ and trailing =); one line only", path)
		}
	}
	return tok, nil
}

func isTokenChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~+/=", c) >= 0
}

// Slot states of the one MCP session.
const (
	slotFree    = iota
	slotPending // an initialize is being served
	slotTaken
)

// httpGate checks each request before the SDK's handler sees it, and
// keeps the one session: the first initialize the handler answers with a
// session takes it.
type httpGate struct {
	port   string // the bound port, which Host must name
	auth   *bearerToken
	srv    *mcp.Server
	next   http.Handler
	stderr io.Writer
	ended  chan struct{} // closed when the session is over

	mu       sync.Mutex
	state    int
	refusals int
}

func (g *httpGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := g.checkHost(r.Host); err != nil {
		g.refuse(w, r, http.StatusForbidden, err.Error())
		return
	}
	if err := checkOrigin(r.Header.Values("Origin")); err != nil {
		g.refuse(w, r, http.StatusForbidden, err.Error())
		return
	}
	if r.Method == http.MethodOptions {
		// No browser page is served: a CORS preflight gets no grant.
		w.Header().Set("Allow", "GET, POST, DELETE")
		g.refuse(w, r, http.StatusMethodNotAllowed, "sandboxio mcp answers no CORS preflight: it serves MCP clients, not web pages")
		return
	}
	if !g.authorized(r) {
		v := `Bearer realm="sandboxio mcp"`
		if r.Header.Get("Authorization") != "" {
			v += `, error="invalid_token"`
		}
		w.Header().Set("WWW-Authenticate", v)
		g.refuse(w, r, http.StatusUnauthorized, "this sandboxio mcp server requires its bearer token (Authorization: Bearer TOKEN, the content of its --token-file)")
		return
	}
	if r.Header.Get("Mcp-Session-Id") != "" {
		g.next.ServeHTTP(w, r) // the SDK refuses an unknown session (404)
		return
	}
	if !g.isInitialize(w, r) {
		return
	}
	g.mu.Lock()
	free := g.state == slotFree
	if free {
		g.state = slotPending
	}
	g.mu.Unlock()
	if !free {
		g.refuse(w, r, http.StatusConflict, "this sandboxio mcp server serves one MCP session, which is taken: start another server (with its own --session) for another client")
		return
	}
	g.next.ServeHTTP(w, r)
	// The SDK keeps a session only for an initialize it answered.
	var ss *mcp.ServerSession
	for s := range g.srv.Sessions() {
		if s.InitializeParams() != nil {
			ss = s
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if ss == nil {
		g.state = slotFree
		return
	}
	g.state = slotTaken
	go func() {
		_ = ss.Wait()
		close(g.ended)
	}()
}

// checkHost accepts a Host header that names a loopback address, or
// localhost, with the bound port: a DNS-rebound name is refused.
func (g *httpGate) checkHost(h string) error {
	host, port, err := net.SplitHostPort(h)
	if err != nil {
		host, port = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"), "80"
	}
	if !loopbackName(host) || port != g.port {
		return fmt.Errorf("the Host header %q does not name this server's address: it accepts 127.0.0.1:%s, localhost:%s or [::1]:%s only (DNS rebinding protection)", h, g.port, g.port, g.port)
	}
	return nil
}

// checkOrigin accepts no Origin (a client that is no browser) or one
// loopback http origin.
func checkOrigin(vals []string) error {
	if len(vals) == 0 {
		return nil
	}
	if len(vals) == 1 {
		u, err := url.Parse(vals[0])
		if err == nil && u.Scheme == "http" && u.User == nil && (u.Path == "" || u.Path == "/") && u.RawQuery == "" && loopbackName(u.Hostname()) {
			return nil
		}
	}
	return fmt.Errorf("the Origin %q is refused: only http://127.0.0.1, http://localhost and http://[::1] origins (any port), or none, may reach this server", strings.Join(vals, ", "))
}

func loopbackName(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// authorized compares the request's bearer token with the server's in
// constant time; without --token-file every request is.
func (g *httpGate) authorized(r *http.Request) bool {
	if g.auth == nil {
		return true
	}
	vals := r.Header.Values("Authorization")
	if len(vals) != 1 {
		return false
	}
	scheme, tok, ok := strings.Cut(vals[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	return subtle.ConstantTimeCompare(sum[:], g.auth.sum[:]) == 1
}

// isInitialize refuses a request without a session that is not an MCP
// initialize (a JSON-RPC request object whose method is initialize); the
// body it read is put back for the handler.
func (g *httpGate) isInitialize(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodPost {
		g.refuse(w, r, http.StatusBadRequest, "a request without Mcp-Session-Id must be the client's initialize (POST)")
		return false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxInitializeBytes+1))
	if err != nil || len(body) > maxInitializeBytes {
		g.refuse(w, r, http.StatusBadRequest, fmt.Sprintf("a request without Mcp-Session-Id must be an initialize of at most %d bytes", maxInitializeBytes))
		return false
	}
	var msg struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.JSONRPC != "2.0" || msg.Method != "initialize" || len(msg.ID) == 0 || string(msg.ID) == "null" {
		g.refuse(w, r, http.StatusBadRequest, "a request without Mcp-Session-Id must be the client's initialize (a JSON-RPC 2.0 request, method initialize)")
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return true
}

// refuse answers with an HTTP status and a JSON-RPC error body, and notes
// the refusal on stderr (a bounded number of times).
func (g *httpGate) refuse(w http.ResponseWriter, r *http.Request, status int, msg string) {
	g.mu.Lock()
	g.refusals++
	n := g.refusals
	g.mu.Unlock()
	switch {
	case n <= maxLoggedRefusals:
		fmt.Fprintf(g.stderr, "sandboxio mcp: refused %s %s (HTTP %d): %s\n", r.Method, r.URL.Path, status, msg)
	case n == maxLoggedRefusals+1:
		fmt.Fprintln(g.stderr, "sandboxio mcp: further refused requests are not logged")
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": -32600, "message": msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// serveHTTP serves one MCP session over streamable HTTP until the client
// ends it, it idles past --idle-timeout, or ctx ends. A second session is
// refused while the first is served, and after it: the sandbox is the first
// session's, and it is removed when that session ends.
func (m *mcpFlags) serveHTTP(ctx context.Context, e *env, ln net.Listener, srv *mcp.Server, auth *bearerToken, what string) error {
	_, port, err := net.SplitHostPort(ln.Addr().String())
	if err != nil {
		return err
	}
	gate := &httpGate{port: port, auth: auth, srv: srv, stderr: e.stderr, ended: make(chan struct{}),
		next: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
			&mcp.StreamableHTTPOptions{SessionTimeout: m.idleTimeout, MaxRequestBodyBytes: mcpserver.MaxMessageBytes})}
	hs := &http.Server{Handler: gate, ReadHeaderTimeout: 10 * time.Second}
	how := "a bearer token (--token-file)"
	if auth == nil {
		how = "no bearer token (--insecure-no-token)"
	}
	fmt.Fprintf(e.stderr, "sandboxio mcp: serving %s over streamable HTTP at http://%s/ with %s\n", what, ln.Addr(), how)
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case <-ctx.Done():
		err = ctx.Err()
	case <-gate.ended:
	case err = <-served:
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
