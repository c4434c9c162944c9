package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// newTokenFile writes a random bearer token into a file of mode 0600 and
// returns its path and the token.
func newTokenFile(t testing.TB) (string, string) {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	tok := "TOKEN-" + hex.EncodeToString(b)
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p, tok
}

// startHTTPMCP starts `sandboxio mcp --http 127.0.0.1:0` as a process and
// returns the URL it serves at.
func startHTTPMCP(t *testing.T, env []string, args ...string) (string, *cliProc) {
	t.Helper()
	p := startCLIProc(t, env, append([]string{"mcp", "--http", "127.0.0.1:0"}, args...)...)
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if m := httpURL.FindStringSubmatch(p.stderrText()); m != nil {
			return m[1], p
		}
		select {
		case <-p.exited:
			t.Fatalf("the server exited %d before serving:\n%s", p.code, p.stderrText())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not say where it serves:\n%s", p.stderrText())
		}
	}
}

// bearerTransport adds the token to every request of a client.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"stray","version":"1"}}}`

// Stray and hostile requests to the HTTP transport claim nothing: a GET or
// a tools/list without a session, CORS preflights, a DNS-rebound Host, an
// evil or null Origin, a missing or wrong token, an initialize the SDK
// refuses. Each gets its status and a clear error; then the real client's
// initialize still succeeds, and a second initialize is refused (409). The
// token is in no stderr line and not in the server's command line. No
// sandbox is opened: no daemon is needed.
func TestMCPHTTP_StrayRequestsClaimNothing(t *testing.T) {
	spec, sum := specFile(t, "acme", "mcp-http-stray")
	tokPath, tok := newTokenFile(t)
	base, p := startHTTPMCP(t, []string{"DOCKER_HOST=unix:///nonexistent/sandboxio-test.sock"},
		"--spec", spec, "--spec-sha256", sum, "--tenant", "acme", "--session", "mcp-http-stray", "--idle-timeout", "2m",
		"--token-file", tokPath)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(u.Port())
	other := net.JoinHostPort("127.0.0.1", strconv.Itoa(port+1))
	hc := &http.Client{Timeout: 30 * time.Second}
	do := func(method, host string, hdr map[string]string, body string) (int, http.Header, string) {
		t.Helper()
		req, err := http.NewRequest(method, base, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range hdr {
			if v == "" {
				req.Header.Del(k)
			} else {
				req.Header.Set(k, v)
			}
		}
		res, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<16))
		return res.StatusCode, res.Header, string(b)
	}
	auth := "Bearer " + tok
	for _, c := range []struct {
		name   string
		method string
		host   string
		hdr    map[string]string
		body   string
		status int
		want   string // in the JSON-RPC error's message
	}{
		{"GET without a session", "GET", "", map[string]string{"Authorization": auth}, "", 400, "must be the client's initialize"},
		{"DELETE without a session", "DELETE", "", map[string]string{"Authorization": auth}, "", 400, "must be the client's initialize"},
		{"tools/list without a session", "POST", "", map[string]string{"Authorization": auth}, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, 400, "method initialize"},
		{"a batch", "POST", "", map[string]string{"Authorization": auth}, "[" + initializeBody + "]", 400, "method initialize"},
		{"preflight from an evil origin", "OPTIONS", "", map[string]string{"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"}, "", 403, "Origin"},
		{"preflight from a loopback origin", "OPTIONS", "", map[string]string{"Origin": "http://localhost:5173", "Access-Control-Request-Method": "POST"}, "", 405, "no CORS preflight"},
		{"a DNS-rebound Host", "POST", "evil.example:" + u.Port(), map[string]string{"Authorization": auth}, initializeBody, 403, "Host header"},
		{"a loopback Host with another port", "POST", other, map[string]string{"Authorization": auth}, initializeBody, 403, "Host header"},
		{"an evil Origin", "POST", "", map[string]string{"Authorization": auth, "Origin": "http://evil.example"}, initializeBody, 403, "Origin"},
		{"a null Origin", "POST", "", map[string]string{"Authorization": auth, "Origin": "null"}, initializeBody, 403, "Origin"},
		{"no token", "POST", "", nil, initializeBody, 401, "bearer token"},
		{"a wrong token", "POST", "", map[string]string{"Authorization": "Bearer " + strings.Repeat("x", len(tok))}, initializeBody, 401, "bearer token"},
		{"the token as Basic", "POST", "", map[string]string{"Authorization": "Basic " + tok}, initializeBody, 401, "bearer token"},
		{"an initialize the SDK refuses (Accept)", "POST", "", map[string]string{"Authorization": auth, "Accept": "text/plain"}, initializeBody, 400, ""},
	} {
		status, hdr, body := do(c.method, c.host, c.hdr, c.body)
		if status != c.status {
			t.Errorf("%s: HTTP %d, want %d: %s", c.name, status, c.status, body)
			continue
		}
		if status == 401 && !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer ") {
			t.Errorf("%s: WWW-Authenticate %q, want Bearer", c.name, hdr.Get("WWW-Authenticate"))
		}
		if c.want == "" {
			continue
		}
		var msg struct {
			Error struct{ Message string } `json:"error"`
		}
		if err := json.Unmarshal([]byte(body), &msg); err != nil || !strings.Contains(msg.Error.Message, c.want) {
			t.Errorf("%s: body %q, want a JSON-RPC error saying %q", c.name, body, c.want)
		}
	}

	// The real client, with the token: its initialize takes the session.
	client := mcp.NewClient(&mcp.Implementation{Name: "sandboxio-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearerTransport{tok}}}, nil)
	if err != nil {
		t.Fatalf("the real client could not connect after the stray requests: %v\n%s", err, p.stderrText())
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 4 {
		t.Fatalf("tools/list: %v %v", tools, err)
	}
	if status, _, body := do("POST", "", map[string]string{"Authorization": auth}, initializeBody); status != 409 || !strings.Contains(body, "serves one MCP session") {
		t.Errorf("a second initialize while the session is held: HTTP %d %s", status, body)
	}
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.cmd.Process.Pid))
	environ, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.cmd.Process.Pid))
	if len(cmdline) == 0 || strings.Contains(string(cmdline)+string(environ), tok) {
		t.Errorf("the token is in the server's /proc cmdline or environ (or they could not be read: %d bytes)", len(cmdline))
	}
	_ = cs.Close()
	select {
	case <-p.exited:
	case <-time.After(time.Minute):
		t.Fatalf("the server did not exit when the client ended its session:\n%s", p.stderrText())
	}
	if p.code != exitOK || !strings.Contains(p.stderrText(), "no sandbox was opened") {
		t.Errorf("exit %d:\n%s", p.code, p.stderrText())
	}
	if strings.Contains(p.stderrText(), tok) {
		t.Error("the token is on the server's stderr")
	}
}

// --http requires a token file unless --insecure-no-token says otherwise,
// and a token file must be a regular file (no symlink) of this user that
// no one else can read, with a token in it. Errors never quote the token.
func TestMCPHTTP_TokenFileChecks(t *testing.T) {
	spec, sum := specFile(t, "acme", "mcp-http-token")
	dir := t.TempDir()
	good, tok := newTokenFile(t)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	loose := writeFile(t, dir, "loose", tok)
	if err := os.Chmod(loose, 0o640); err != nil {
		t.Fatal(err)
	}
	empty := writeFile(t, dir, "empty", "")
	short := writeFile(t, dir, "short", "q7Zx\n")
	spaced := writeFile(t, dir, "spaced", tok+" "+tok)
	twoLines := writeFile(t, dir, "two-lines", tok+"\n"+tok+"\n")
	base := []string{"mcp", "--spec", spec, "--spec-sha256", sum, "--tenant", "acme", "--session", "mcp-http-token"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--http", "127.0.0.1:0"}, "--http needs --token-file FILE"},
		{[]string{"--token-file", good}, "apply to --http only"},
		{[]string{"--http", "127.0.0.1:0", "--token-file", good, "--insecure-no-token"}, "exclude each other"},
		{[]string{"--http", "127.0.0.1:0", "--token-file", link}, "is a symbolic link"},
		{[]string{"--http", "127.0.0.1:0", "--token-file", loose}, "mode 0640"},
		{[]string{"--http", "127.0.0.1:0", "--token-file", empty}, "is empty"},
		{[]string{"--http", "127.0.0.1:0", "--token-file", short}, "fewer than 16"},
		{[]string{"--http", "127.0.0.1:0", "--token-file", spaced}, "a character a bearer token cannot have"},
		{[]string{"--http", "127.0.0.1:0", "--token-file", twoLines}, "a character a bearer token cannot have"},
		{[]string{"--http", "127.0.0.1:0", "--token-file", dir}, "not a regular file"},
		{[]string{"--http", "127.0.0.1:0", "--token-file", filepath.Join(dir, "none")}, "no such file"},
	} {
		code, out, errOut := cli(t, "", append(base, c.args...)...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and %q", c.args, code, out, errOut, c.want)
		}
		if strings.Contains(errOut, tok) || strings.Contains(errOut, "q7Zx") {
			t.Errorf("%v: the error quotes the token: %s", c.args, errOut)
		}
	}
}
