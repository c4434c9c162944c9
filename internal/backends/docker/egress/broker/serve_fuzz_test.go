package broker

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// FuzzServeHTTP1 sends arbitrary bytes, after a real TLS handshake, to a
// broker in front of an echoing upstream. Whatever they are, the value may
// reach the upstream only in the declared header of a request to the host,
// and the sandbox's side never sees it.
func FuzzServeHTTP1(f *testing.F) {
	for _, seed := range []string{
		"GET /echo HTTP/1.1\r\nHost: " + testHost + "\r\nAuthorization: Bearer PH\r\nConnection: close\r\n\r\n",
		"GET /echo?PH HTTP/1.1\r\nHost: " + testHost + "\r\nAuthorization: Bearer PH\r\n\r\nGET https://" + otherHost + "/echo HTTP/1.1\r\nHost: " + testHost + "\r\nAuthorization: Bearer PH\r\nConnection: close\r\n\r\n",
		"POST /echo HTTP/1.1\r\nHost: " + testHost + "\r\nTransfer-Encoding: chunked\r\nAuthorization: Bearer PH\r\n\r\n2\r\nPH\r\n0\r\nAuthorization: Bearer PH\r\n\r\n",
		"GET /cut HTTP/1.1\r\nHost: " + testHost + "\r\nAuthorization: Bearer PH\r\nRange: bytes=3-\r\nConnection: close\r\n\r\n",
		"GET /everywhere HTTP/1.1\r\nHost: " + testHost + ":443\r\nAuthorization: Bearer PH\r\nConnection: close\r\n\r\n",
	} {
		f.Add([]byte(seed))
	}
	r := newRig(f)
	rawWait = 300 * time.Millisecond
	defer func() { rawWait = 5 * time.Second }()
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) > 8<<10 {
			return
		}
		raw = bytes.ReplaceAll(raw, []byte("PH"), []byte(r.ph))
		r.up.mu.Lock()
		r.up.got = nil
		r.up.mu.Unlock()
		_, all := rawExchange(t, r.b, r.f.addr(), string(raw))
		if strings.Contains(all, canary) {
			t.Fatalf("the sandbox saw the value")
		}
		if l := r.leaked(); l != "" {
			t.Fatalf("the value reached: %s", l)
		}
	})
	r.f.noCanary(f)
}
