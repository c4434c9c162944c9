package broker

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
)

// FuzzDecide feeds arbitrary HTTP/1.1 request bytes through the standard
// reader, the broker's decision and its upstream rewrite. Whatever the
// bytes, the value may only come out as the one declared header of a
// request to the secret's host, and only when the sandbox sent the
// placeholder in exactly the declared form.
func FuzzDecide(f *testing.F) {
	b, err := New([]Secret{{Name: "K", Hosts: []string{testHost}, Header: "Authorization", Format: "Bearer %s", Value: []byte(canary)}})
	if err != nil {
		f.Fatal(err)
	}
	s := b.secrets[0]
	ph := s.placeholder
	for _, seed := range []string{
		"GET / HTTP/1.1\r\nHost: " + testHost + "\r\nAuthorization: Bearer PH\r\n\r\n",
		"GET https://" + otherHost + "/ HTTP/1.1\r\nHost: " + testHost + "\r\nAuthorization: Bearer PH\r\n\r\n",
		"POST /x?PH HTTP/1.1\r\nHost: " + testHost + ":443\r\nAuthorization: Bearer PH\r\nAuthorization: Bearer PH\r\nContent-Length: 2\r\n\r\nPH",
		"GET / HTTP/1.1\r\nHost: " + testHost + "\r\nX: 1\r\n Authorization: Bearer PH\r\n\r\n",
		"GET / HTTP/1.0\r\nHost: " + testHost + "\r\nAuthorization: Bearer PH\r\n\r\n",
		"CONNECT " + otherHost + ":443 HTTP/1.1\r\nHost: " + otherHost + "\r\nAuthorization: Bearer PH\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: " + testHost + "\r\nTrailer: Authorization\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nAuthorization: Bearer PH\r\n\r\n",
	} {
		f.Add([]byte(seed))
	}
	target := &url.URL{Scheme: "https", Host: testHost}
	f.Fuzz(func(t *testing.T, raw []byte) {
		// PH in the input stands for the placeholder, so the fuzzer can
		// move it about without guessing 42 random characters.
		raw = bytes.ReplaceAll(raw, []byte("PH"), []byte(ph))
		r, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
		if err != nil {
			return
		}
		r.TLS = &tls.ConnectionState{ServerName: testHost}
		use, code := decide(r, testHost, b.secrets)
		if use != nil {
			if code != 0 {
				t.Fatal("a secret chosen for a refused request")
			}
			if !sameHost(r.Host, testHost, true) || r.Header.Get("Authorization") != s.sent || len(r.Header["Authorization"]) != 1 {
				t.Fatalf("a secret chosen for %q Host %q Authorization %q", r.RequestURI, r.Host, r.Header["Authorization"])
			}
			if r.Method == http.MethodConnect || r.ProtoMinor < 1 {
				t.Fatalf("a secret chosen for %s %s", r.Method, r.Proto)
			}
		}
		if code != 0 {
			return
		}
		pr := &httputil.ProxyRequest{In: r, Out: r.Clone(t.Context())}
		pr.Out.Header.Del("Connection") // as the proxy strips hop-by-hop fields
		rewrite(pr, target, use)
		var out bytes.Buffer
		if err := pr.Out.Write(&out); err != nil {
			return
		}
		wire := out.String()
		head, _, _ := strings.Cut(wire, "\r\n\r\n")
		head += "\r\n"
		n := strings.Count(wire, canary)
		switch {
		case use == nil && n != 0:
			t.Fatalf("the value went out without a chosen secret:\n%s", wire)
		case use != nil && (n != 1 || !strings.Contains(head, "\r\nAuthorization: Bearer "+canary+"\r\n")):
			t.Fatalf("the value went out other than once in the declared header:\n%s", wire)
		case !strings.Contains(head, "\r\nHost: "+testHost+"\r\n"):
			t.Fatalf("the upstream request is not for the host:\n%s", wire)
		}
	})
}
