package broker

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// rig is one broker in front of one upstream, plus a second upstream for
// another allowed host that the broker does not intercept.
type rig struct {
	ca    *testCA
	b     *Broker
	ph    string
	up    *upstream
	other *upstream
	f     *front
	// otherAddr is the gateway's plain splice to the other host.
	otherAddr string
}

func newRig(t testing.TB) *rig { return newRigWith(t, false) }

// connKinds are the sandbox connections the contract tests run over: each
// protocol from a kernel socket, and HTTP/2 as the gateway's netstack
// hands it over (Serve then writes from a goroutine of its own).
var connKinds = []struct {
	name          string
	h2, userSpace bool
}{{"HTTP/1.1", false, false}, {"HTTP/2", true, false}, {"HTTP/2 user-space connection", true, true}}

func newRigWith(t testing.TB, userSpace bool) *rig {
	ca := newTestCA(t)
	r := &rig{ca: ca, b: newBroker(t)}
	r.ph = r.b.Placeholder("OPENAI_API_KEY")
	r.up = newUpstream(t, ca.leaf(t, testHost))
	r.other = newUpstream(t, ca.leaf(t, otherHost))
	if userSpace {
		r.f = startUserSpaceFront(t, r.b, r.up.srv.Listener.Addr().String(), ca.pool)
	} else {
		r.f = startFront(t, r.b, r.up.srv.Listener.Addr().String(), ca.pool)
	}
	r.otherAddr = splice(t, r.other.srv.Listener.Addr().String())
	return r
}

// leaked reports where the value went that it must not: any request the
// other host got with it anywhere, and any request the secret's host got
// with it outside one Authorization header.
func (r *rig) leaked() string {
	var where []string
	for _, s := range r.other.requests() {
		if strings.Contains(s.String(), canary) {
			where = append(where, "other host")
		}
	}
	for _, s := range r.up.requests() {
		h := s.Header.Clone()
		if len(h["Authorization"]) == 1 && h.Get("Authorization") == "Bearer "+canary && s.Host == testHost {
			h.Del("Authorization")
		}
		if strings.Contains(seen{Proto: s.Proto, Method: s.Method, Host: s.Host, URI: s.URI, Header: h, Body: s.Body}.String(), canary) {
			where = append(where, "secret's host outside the declared header")
		}
	}
	return strings.Join(where, ", ")
}

// upstreamGotValue reports whether the secret's host got the value at all.
func (r *rig) upstreamGotValue() bool {
	for _, s := range r.up.requests() {
		if strings.Contains(s.String(), canary) {
			return true
		}
	}
	return false
}

func (r *rig) do(h2 bool, req *http.Request) (int, string) {
	resp, err := sandboxClient(r.b, r.f.addr(), h2).Do(req)
	if err != nil {
		return 0, "error: " + err.Error()
	}
	defer resp.Body.Close()
	// Read what arrives, also of a body cut short, for the canary check.
	body, err := io.ReadAll(resp.Body)
	resp.Body = io.NopCloser(strings.NewReader(string(body)))
	dump, _ := httputil.DumpResponse(resp, true)
	if err != nil {
		dump = append(dump, "\n(body ended: "+err.Error()+")"...)
	}
	return resp.StatusCode, string(dump)
}

func newReq(method, url, body string, hdr ...string) *http.Request {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, rd)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	return req
}

func status(code int) string {
	if code == 0 {
		return "refused (no response)"
	}
	return fmt.Sprintf("%d %s", code, http.StatusText(code))
}

// TestExfiltration tries to move the value where the sandbox can read it
// or to a host it does not belong to. Each row states what happened; the
// value must reach nothing but the secret's host in the declared header,
// and never the sandbox.
func TestExfiltration(t *testing.T) {
	type attempt struct {
		name string
		run  func(t *testing.T, r *rig) (result string, sandboxSaw string)
		// want is a substring of the result: the refusal or the proof
		// that the placeholder stayed a placeholder. Alternatives, each
		// a refusal, are separated by " or ".
		want string
	}
	protos := []bool{false, true}
	var rows []attempt
	for _, h2 := range protos {
		p := map[bool]string{false: "h1", true: "h2"}[h2]
		rows = append(rows,
			attempt{p + ": placeholder in the body, read back from an echo", func(t *testing.T, r *rig) (string, string) {
				code, dump := r.do(h2, newReq("POST", "https://"+testHost+"/echo", "key="+r.ph, "Authorization", "Bearer "+r.ph))
				ok := strings.Contains(dump, "key="+r.ph)
				return fmt.Sprintf("%s; body echoed as placeholder: %v", status(code), ok), dump
			}, "body echoed as placeholder: true"},
			attempt{p + ": placeholder in the URL, read back from an echo", func(t *testing.T, r *rig) (string, string) {
				code, dump := r.do(h2, newReq("GET", "https://"+testHost+"/echo?k="+r.ph, "", "Authorization", "Bearer "+r.ph))
				ok := strings.Contains(dump, " /echo?k="+r.ph+" host=")
				return fmt.Sprintf("%s; URL echoed as placeholder: %v", status(code), ok), dump
			}, "URL echoed as placeholder: true"},
			attempt{p + ": placeholder in another header, read back from an echo", func(t *testing.T, r *rig) (string, string) {
				code, dump := r.do(h2, newReq("GET", "https://"+testHost+"/echo", "", "X-Api-Key", r.ph, "Authorization", "Bearer "+r.ph))
				ok := strings.Contains(dump, "X-Api-Key: "+r.ph)
				return fmt.Sprintf("%s; X-Api-Key echoed as placeholder: %v", status(code), ok), dump
			}, "X-Api-Key echoed as placeholder: true"},
			attempt{p + ": the echo of the real value (header and body)", func(t *testing.T, r *rig) (string, string) {
				code, dump := r.do(h2, newReq("GET", "https://"+testHost+"/echo", "", "Authorization", "Bearer "+r.ph))
				ok := strings.Contains(dump, "X-Echo-Authorization: Bearer "+r.ph) && strings.Contains(dump, "Authorization: Bearer "+r.ph+"\n")
				return fmt.Sprintf("%s; upstream got value: %v; echo scrubbed to placeholder: %v", status(code), r.upstreamGotValue(), ok), dump
			}, "upstream got value: true; echo scrubbed to placeholder: true"},
			attempt{p + ": placeholder not in the declared format", func(t *testing.T, r *rig) (string, string) {
				code, dump := r.do(h2, newReq("GET", "https://"+testHost+"/echo", "", "Authorization", r.ph))
				return fmt.Sprintf("%s; upstream got value: %v", status(code), r.upstreamGotValue()), dump
			}, "400 Bad Request; upstream got value: false"},
			attempt{p + ": duplicate declared header", func(t *testing.T, r *rig) (string, string) {
				code, dump := r.do(h2, newReq("GET", "https://"+testHost+"/echo", "", "Authorization", "Bearer "+r.ph, "Authorization", "Bearer "+r.ph))
				return fmt.Sprintf("%s; upstream got value: %v", status(code), r.upstreamGotValue()), dump
			}, "400 Bad Request; upstream got value: false"},
			attempt{p + ": Host/:authority of another host over the secret host's TLS", func(t *testing.T, r *rig) (string, string) {
				req := newReq("GET", "https://"+testHost+"/echo", "", "Authorization", "Bearer "+r.ph)
				req.Host = otherHost
				code, dump := r.do(h2, req)
				return fmt.Sprintf("%s; upstream got value: %v", status(code), r.upstreamGotValue()), dump
			}, "421 Misdirected Request; upstream got value: false"},
			attempt{p + ": Host/:authority with another port", func(t *testing.T, r *rig) (string, string) {
				req := newReq("GET", "https://"+testHost+"/echo", "", "Authorization", "Bearer "+r.ph)
				req.Host = testHost + ":8443"
				code, dump := r.do(h2, req)
				return fmt.Sprintf("%s; upstream got value: %v", status(code), r.upstreamGotValue()), dump
			}, "421 Misdirected Request; upstream got value: false"},
			attempt{p + ": redirect from the secret's host to another host", func(t *testing.T, r *rig) (string, string) {
				code, dump := r.do(h2, newReq("GET", "https://"+testHost+"/redirect", "", "Authorization", "Bearer "+r.ph))
				loc := ""
				if i := strings.Index(dump, "Location: "); i >= 0 {
					loc = strings.TrimSpace(strings.SplitN(dump[i+len("Location: "):], "\n", 2)[0])
				}
				// The sandbox follows it with the header: the other host is
				// not intercepted, so the gateway splices it.
				follow := otherClient(r, h2)
				req := newReq("GET", loc, "", "Authorization", "Bearer "+r.ph)
				resp, err := follow.Do(req)
				got := ""
				if err == nil {
					resp.Body.Close()
					if o := r.other.requests(); len(o) == 1 {
						got = o[0].Header.Get("Authorization")
					}
				}
				return fmt.Sprintf("%s passed to the sandbox (broker follows nothing; upstream requests: %d); other host got %q", status(code), len(r.up.requests()),
					strings.ReplaceAll(got, r.ph, "<placeholder>")), dump
			}, `other host got "Bearer <placeholder>"`},
			attempt{p + ": placeholder sent to an allowed host that is not the secret's", func(t *testing.T, r *rig) (string, string) {
				resp, err := otherClient(r, h2).Do(newReq("GET", "https://"+otherHost+"/echo", "", "Authorization", "Bearer "+r.ph))
				if err != nil {
					return "error: " + err.Error(), ""
				}
				defer resp.Body.Close()
				dump, _ := httputil.DumpResponse(resp, true)
				got := r.other.requests()[0].Header.Get("Authorization")
				return fmt.Sprintf("Intercepts=%v; other host got %q", r.b.Intercepts(otherHost), strings.ReplaceAll(got, r.ph, "<placeholder>")), string(dump)
			}, `Intercepts=false; other host got "Bearer <placeholder>"`},
			attempt{p + ": SNI of another host to the broker", func(t *testing.T, r *rig) (string, string) {
				pool := trusting(r.b)
				c, err := tls.Dial("tcp", r.f.addr(), &tls.Config{ServerName: otherHost, RootCAs: pool, NextProtos: []string{map[bool]string{false: "http/1.1", true: "h2"}[h2]}})
				if err == nil {
					c.Close()
					return "handshake accepted", ""
				}
				return "handshake refused", err.Error()
			}, "handshake refused"},
			attempt{p + ": upstream whose certificate does not verify", func(t *testing.T, r *rig) (string, string) {
				bad := newUpstream(t, newTestCA(t).leaf(t, testHost)) // another CA
				f := startFront(t, r.b, bad.srv.Listener.Addr().String(), newTestCA(t).pool)
				resp, err := sandboxClient(r.b, f.addr(), h2).Do(newReq("GET", "https://"+testHost+"/echo", "", "Authorization", "Bearer "+r.ph))
				if err != nil {
					return "error: " + err.Error(), ""
				}
				defer resp.Body.Close()
				dump, _ := httputil.DumpResponse(resp, true)
				f.noCanary(t)
				return fmt.Sprintf("%s; bad upstream got requests: %d", status(resp.StatusCode), len(bad.requests())), string(dump)
			}, "502 Bad Gateway; bad upstream got requests: 0"},
			attempt{p + ": upstream answers with gzip (unscannable)", func(t *testing.T, r *rig) (string, string) {
				code, dump := r.do(h2, newReq("GET", "https://"+testHost+"/gzip", "", "Authorization", "Bearer "+r.ph, "Accept-Encoding", "gzip"))
				return status(code), dump
			}, "502 Bad Gateway"},
			attempt{p + ": Range request cutting into the echoed value", func(t *testing.T, r *rig) (string, string) {
				code, dump := r.do(h2, newReq("GET", "https://"+testHost+"/echo", "", "Authorization", "Bearer "+r.ph, "Range", "bytes=60-"))
				sawRange := false
				for _, s := range r.up.requests() {
					sawRange = sawRange || s.Header.Get("Range") != ""
				}
				return fmt.Sprintf("%s; upstream saw Range: %v", status(code), sawRange), dump
			}, "200 OK; upstream saw Range: false"},
			attempt{p + ": upstream answers 206 unasked", func(t *testing.T, r *rig) (string, string) {
				code, dump := r.do(h2, newReq("GET", "https://"+testHost+"/partial", "", "Authorization", "Bearer "+r.ph))
				return status(code), dump
			}, "502 Bad Gateway"},
			attempt{p + ": echo cut short inside the value", func(t *testing.T, r *rig) (string, string) {
				code, dump := r.do(h2, newReq("GET", "https://"+testHost+"/cut", "", "Authorization", "Bearer "+r.ph))
				return fmt.Sprintf("%s; ends in the placeholder's start: %v", status(code), strings.HasSuffix(dump, "Bearer "+r.ph[:20])), dump
			}, "200 OK; ends in the placeholder's start: true"},
			attempt{p + ": upstream dies while echoing the value", func(t *testing.T, r *rig) (string, string) {
				code, dump := r.do(h2, newReq("GET", "https://"+testHost+"/abort", "", "Authorization", "Bearer "+r.ph))
				return fmt.Sprintf("%s; held start of the value dropped: %v", status(code), !strings.Contains(dump, "key Bearer "+canary[:minPartial-2])), dump
			}, "held start of the value dropped: true"},
			attempt{p + ": CONNECT through the secret's host", func(t *testing.T, r *rig) (string, string) {
				if h2 {
					return h2Raw(r, [][2]string{{":method", "CONNECT"}, {":authority", otherHost + ":443"}, {"authorization", "Bearer " + r.ph}})
				}
				return rawExchange(t, r.b, r.f.addr(), "CONNECT "+otherHost+":443 HTTP/1.1\r\nHost: "+otherHost+":443\r\nAuthorization: Bearer "+r.ph+"\r\n\r\n")
			}, "405"},
		)
	}
	rows = append(rows,
		attempt{"h1: absolute-form URL naming another host", func(t *testing.T, r *rig) (string, string) {
			return rawExchange(t, r.b, r.f.addr(), "GET https://"+otherHost+"/echo HTTP/1.1\r\nHost: "+testHost+"\r\nAuthorization: Bearer "+r.ph+"\r\nConnection: close\r\n\r\n")
		}, "421"},
		attempt{"h1: absolute-form URL with userinfo trick", func(t *testing.T, r *rig) (string, string) {
			return rawExchange(t, r.b, r.f.addr(), "GET https://"+testHost+"@"+otherHost+"/echo HTTP/1.1\r\nHost: "+testHost+"\r\nAuthorization: Bearer "+r.ph+"\r\nConnection: close\r\n\r\n")
		}, "421"},
		attempt{"h1: two Host headers", func(t *testing.T, r *rig) (string, string) {
			return rawExchange(t, r.b, r.f.addr(), "GET /echo HTTP/1.1\r\nHost: "+testHost+"\r\nHost: "+otherHost+"\r\nAuthorization: Bearer "+r.ph+"\r\nConnection: close\r\n\r\n")
		}, "400"},
		attempt{"h1: no Host header", func(t *testing.T, r *rig) (string, string) {
			return rawExchange(t, r.b, r.f.addr(), "GET /echo HTTP/1.1\r\nAuthorization: Bearer "+r.ph+"\r\nConnection: close\r\n\r\n")
		}, "400"},
		attempt{"h1: HTTP/1.0 request", func(t *testing.T, r *rig) (string, string) {
			return rawExchange(t, r.b, r.f.addr(), "GET /echo HTTP/1.0\r\nHost: "+testHost+"\r\nAuthorization: Bearer "+r.ph+"\r\n\r\n")
		}, "505"},
		attempt{"h1: bare CR inside the declared header", func(t *testing.T, r *rig) (string, string) {
			return rawExchange(t, r.b, r.f.addr(), "GET /echo HTTP/1.1\r\nHost: "+testHost+"\r\nAuthorization: Bearer "+r.ph+"\rX-Leak: 1\r\nConnection: close\r\n\r\n")
		}, "400"},
		attempt{"h1: bare LF splitting a header into the declared one", func(t *testing.T, r *rig) (string, string) {
			line, all := rawExchange(t, r.b, r.f.addr(), "GET /echo HTTP/1.1\r\nHost: "+testHost+"\r\nX-A: 1\nAuthorization: Bearer "+r.ph+"\r\nConnection: close\r\n\r\n")
			return fmt.Sprintf("%s; upstream got value: %v (read as its own line; upstream gets clean CRLF)", line, r.upstreamGotValue()), all
		}, "200 OK; upstream got value: true (read"},
		attempt{"h1: obs-fold continuation carrying the declared header", func(t *testing.T, r *rig) (string, string) {
			line, all := rawExchange(t, r.b, r.f.addr(), "GET /echo HTTP/1.1\r\nHost: "+testHost+"\r\nX-A: 1\r\n Authorization: Bearer "+r.ph+"\r\nConnection: close\r\n\r\n")
			return fmt.Sprintf("%s; upstream got value: %v", line, r.upstreamGotValue()), all
		}, "200 OK; upstream got value: false"},
		attempt{"h1: obs-fold continuing the declared header", func(t *testing.T, r *rig) (string, string) {
			line, all := rawExchange(t, r.b, r.f.addr(), "GET /echo HTTP/1.1\r\nHost: "+testHost+"\r\nAuthorization: Bearer\r\n "+r.ph+"\r\nConnection: close\r\n\r\n")
			return fmt.Sprintf("%s; upstream got value: %v (unfolded to the declared form; upstream gets one clean line)", line, r.upstreamGotValue()), all
		}, "200 OK; upstream got value: true (unfolded"},
		attempt{"h1: space before the colon of the declared header", func(t *testing.T, r *rig) (string, string) {
			return rawExchange(t, r.b, r.f.addr(), "GET /echo HTTP/1.1\r\nHost: "+testHost+"\r\nAuthorization : Bearer "+r.ph+"\r\nConnection: close\r\n\r\n")
		}, "400"},
		attempt{"h1: extra token in the request line", func(t *testing.T, r *rig) (string, string) {
			return rawExchange(t, r.b, r.f.addr(), "GET /echo HTTP/1.1 "+otherHost+"\r\nHost: "+testHost+"\r\nAuthorization: Bearer "+r.ph+"\r\nConnection: close\r\n\r\n")
		}, "400"},
		attempt{"h1: Content-Length with Transfer-Encoding, a second request smuggled", func(t *testing.T, r *rig) (string, string) {
			smuggled := "GET /echo HTTP/1.1\r\nHost: " + otherHost + "\r\nAuthorization: Bearer " + r.ph + "\r\nConnection: close\r\n\r\n"
			raw := "POST /echo HTTP/1.1\r\nHost: " + testHost + "\r\nContent-Length: " + fmt.Sprint(len(smuggled)+5) + "\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled
			_, all := rawExchange(t, r.b, r.f.addr(), raw)
			var lines []string
			for _, l := range strings.Split(all, "\r\n") {
				if len(l) >= 12 && strings.HasPrefix(l, "HTTP/1.1 ") && l[9] >= '1' && l[9] <= '5' && l[12:13] == " " {
					lines = append(lines, l)
				}
			}
			return fmt.Sprintf("%s; upstream requests: %d; upstream got value: %v", strings.Join(lines, ", then "), len(r.up.requests()), r.upstreamGotValue()), all
		}, "upstream got value: false"},
		attempt{"h1: Host with userinfo naming another host", func(t *testing.T, r *rig) (string, string) {
			return rawExchange(t, r.b, r.f.addr(), "GET /echo HTTP/1.1\r\nHost: "+testHost+"@"+otherHost+"\r\nAuthorization: Bearer "+r.ph+"\r\nConnection: close\r\n\r\n")
		}, "HTTP/1.1 4"},
		attempt{"h1: Host with a trailing dot and upper case", func(t *testing.T, r *rig) (string, string) {
			line, all := rawExchange(t, r.b, r.f.addr(), "GET /echo HTTP/1.1\r\nHost: API.Example.Test.\r\nAuthorization: Bearer "+r.ph+"\r\nConnection: close\r\n\r\n")
			return fmt.Sprintf("%s; upstream got value: %v (the same host, normalised)", line, r.upstreamGotValue()), all
		}, "200 OK; upstream got value: true"},
		attempt{"h1: header section over the limit", func(t *testing.T, r *rig) (string, string) {
			return rawExchange(t, r.b, r.f.addr(), "GET /echo HTTP/1.1\r\nHost: "+testHost+"\r\nX-Pad: "+strings.Repeat("a", 80<<10)+"\r\nAuthorization: Bearer "+r.ph+"\r\nConnection: close\r\n\r\n")
		}, "431"},
		attempt{"h1: Upgrade to websocket", func(t *testing.T, r *rig) (string, string) {
			return rawExchange(t, r.b, r.f.addr(), "GET /echo HTTP/1.1\r\nHost: "+testHost+"\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nAuthorization: Bearer "+r.ph+"\r\n\r\n")
		}, "501"},
		attempt{"h2: header value with CR/LF", func(t *testing.T, r *rig) (string, string) {
			return h2Raw(r, [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", testHost}, {":path", "/echo"}, {"authorization", "Bearer " + r.ph + "\r\nx-leak: 1"}})
		}, "refused"},
		attempt{"h2: :authority and Host disagree", func(t *testing.T, r *rig) (string, string) {
			return h2Raw(r, [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", testHost}, {":path", "/echo"}, {"host", otherHost}, {"authorization", "Bearer " + r.ph}})
		}, ":status 421; upstream got value: false"},
		attempt{"h2: :scheme http over the secret host's TLS", func(t *testing.T, r *rig) (string, string) {
			return h2Raw(r, [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", testHost}, {":path", "/echo"}, {"authorization", "Bearer " + r.ph}})
		}, ":status 200; upstream got value: true"},
		attempt{"h2: extended CONNECT (:protocol)", func(t *testing.T, r *rig) (string, string) {
			return h2Raw(r, [][2]string{{":method", "CONNECT"}, {":protocol", "websocket"}, {":scheme", "https"}, {":authority", testHost}, {":path", "/echo"}, {"authorization", "Bearer " + r.ph}})
		}, "refused (RST_STREAM PROTOCOL_ERROR)"},
		attempt{"h2: :path in absolute form naming another host", func(t *testing.T, r *rig) (string, string) {
			return h2Raw(r, [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", testHost}, {":path", "https://" + otherHost + "/echo"}, {"authorization", "Bearer " + r.ph}})
			// Go 1.27's HTTP/2 server refuses the stream itself; 1.26's
			// hands it to the broker, which answers 421. A refusal either way.
		}, ":status 421; upstream got value: false or refused (RST_STREAM PROTOCOL_ERROR)"},
		attempt{"h2: :authority with userinfo", func(t *testing.T, r *rig) (string, string) {
			return h2Raw(r, [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", testHost + "@" + otherHost}, {":path", "/echo"}, {"authorization", "Bearer " + r.ph}})
		}, "refused"},
		attempt{"h2: upper-case header name", func(t *testing.T, r *rig) (string, string) {
			return h2Raw(r, [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", testHost}, {":path", "/echo"}, {"Authorization", "Bearer " + r.ph}})
		}, "refused"},
	)
	var table []string
	for _, a := range rows {
		for _, userSpace := range []bool{false, true} {
			name := a.name
			if userSpace {
				if !strings.HasPrefix(name, "h2") {
					continue
				}
				name += " (user-space connection)"
			}
			t.Run(name, func(t *testing.T) {
				r := newRigWith(t, userSpace)
				result, sandboxSaw := a.run(t, r)
				result = strings.ReplaceAll(result, canary, "<VALUE>")
				if strings.Contains(sandboxSaw, canary) {
					t.Errorf("the sandbox saw the value")
					result += " — SANDBOX SAW THE VALUE"
				}
				if l := r.leaked(); l != "" {
					t.Errorf("the value reached: %s", l)
					result += " — LEAKED to " + l
				}
				r.f.noCanary(t)
				if !slices.ContainsFunc(strings.Split(a.want, " or "), func(w string) bool { return strings.Contains(result, w) }) {
					t.Errorf("result %q, want %q", result, a.want)
				}
				if !userSpace {
					table = append(table, "| "+a.name+" | "+strings.ReplaceAll(result, "|", "/")+" |")
				}
			})
		}
	}
	t.Logf("exfiltration attempts:\n| attempt | result |\n| --- | --- |\n%s", strings.Join(table, "\n"))
}

// otherClient is the sandbox reaching the other allowed host through the
// gateway's plain splice, trusting that host's CA as a sandbox trusts the
// system store.
func otherClient(r *rig, h2 bool) *http.Client {
	c := sandboxClient(r.b, r.otherAddr, h2)
	c.Transport.(*http.Transport).TLSClientConfig.RootCAs = r.ca.pool
	return c
}

// h2Raw sends one HEADERS frame, fields as given, with no validation on
// this side, and returns the response's :status or the refusal.
func h2Raw(r *rig, fields [][2]string) (string, string) {
	pool := trusting(r.b)
	c, err := tls.Dial("tcp", r.f.addr(), &tls.Config{ServerName: testHost, RootCAs: pool, NextProtos: []string{"h2"}})
	if err != nil {
		return "handshake refused", err.Error()
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		return "write failed", ""
	}
	fr := http2.NewFramer(c, c)
	_ = fr.WriteSettings()
	var hb strings.Builder
	enc := hpack.NewEncoder(&hb)
	for _, f := range fields {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte(hb.String()), EndStream: true, EndHeaders: true})
	dec := hpack.NewDecoder(4096, nil)
	var saw strings.Builder
	for i := 0; i < 50; i++ {
		f, err := fr.ReadFrame()
		if err != nil {
			return "refused (connection closed)", saw.String()
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.RSTStreamFrame:
			return "refused (RST_STREAM " + f.ErrCode.String() + ")", saw.String()
		case *http2.GoAwayFrame:
			if f.ErrCode == http2.ErrCodeNo && f.LastStreamID >= 1 {
				continue // a graceful close: stream 1 still gets its answer
			}
			return "refused (GOAWAY " + f.ErrCode.String() + ")", saw.String()
		case *http2.HeadersFrame:
			hf, _ := dec.DecodeFull(f.HeaderBlockFragment())
			for _, h := range hf {
				fmt.Fprintf(&saw, "%s: %s\n", h.Name, h.Value)
				if h.Name == ":status" {
					// Read the body too, for the canary check.
					for j := 0; j < 20 && !f.StreamEnded(); j++ {
						g, err := fr.ReadFrame()
						if err != nil {
							break
						}
						if d, ok := g.(*http2.DataFrame); ok {
							saw.Write(d.Data())
							if d.StreamEnded() {
								break
							}
						}
					}
					return ":status " + h.Value + "; upstream got value: " + fmt.Sprint(r.upstreamGotValue()), saw.String()
				}
			}
		}
	}
	return "no answer", saw.String()
}

// TestHTTP2Bounds: the broker tells an HTTP/2 client its limits (streams,
// header list, HPACK table) in its first SETTINGS frame.
func TestHTTP2Bounds(t *testing.T) {
	r := newRig(t)
	pool := trusting(r.b)
	c, err := tls.Dial("tcp", r.f.addr(), &tls.Config{ServerName: testHost, RootCAs: pool, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	_ = fr.WriteSettings()
	f, err := fr.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok {
		t.Fatalf("first frame %T", f)
	}
	got := map[http2.SettingID]uint32{}
	_ = sf.ForeachSetting(func(s http2.Setting) error { got[s.ID] = s.Val; return nil })
	if got[http2.SettingMaxConcurrentStreams] != maxStreams {
		t.Errorf("max concurrent streams %d, want %d", got[http2.SettingMaxConcurrentStreams], maxStreams)
	}
	if v := got[http2.SettingMaxHeaderListSize]; v == 0 || v > 2*maxHeaderBytes {
		t.Errorf("max header list size %d, want set and near %d", v, maxHeaderBytes)
	}
	if v, ok := got[http2.SettingHeaderTableSize]; ok && v > 4096 {
		t.Errorf("header table size %d", v)
	}
}
