package broker

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// FuzzServeHTTP2 sends one HTTP/2 request whose header fields (pseudo ones
// included, in any order, any bytes) and body come from the input, after a
// real TLS handshake that chose h2. Whatever they are, the value may reach
// the upstream only in the declared header of a request to the host, and
// nothing the sandbox's side reads (decoded header fields, data) holds it.
func FuzzServeHTTP2(f *testing.F) {
	for _, seed := range []string{
		":method GET\n:scheme https\n:authority " + testHost + "\n:path /echo\nauthorization Bearer PH\n\n",
		":method POST\n:scheme https\n:authority " + otherHost + "\n:path /echo?PH\nauthorization Bearer PH\n\nPH",
		":method GET\n:scheme https\n:authority " + testHost + "\n:path /everywhere\nauthorization Bearer PH\nauthorization Bearer PH\n\n",
		":method GET\n:scheme http\n:authority " + testHost + ":443\n:path https://" + otherHost + "/\nhost " + otherHost + "\nauthorization Bearer PH\n\n",
		":method CONNECT\n:protocol websocket\n:scheme https\n:authority " + testHost + "\n:path /\nauthorization Bearer\tPH\n\n",
	} {
		f.Add(seed)
	}
	r := newRig(f)
	f.Fuzz(func(t *testing.T, in string) {
		if len(in) > 8<<10 {
			return
		}
		in = strings.ReplaceAll(in, "PH", r.ph)
		head, body, _ := strings.Cut(in, "\n\n")
		var fields []hpack.HeaderField
		for _, l := range strings.Split(head, "\n") {
			name, value, _ := strings.Cut(l, " ")
			fields = append(fields, hpack.HeaderField{Name: name, Value: value})
		}
		r.up.mu.Lock()
		r.up.got = nil
		r.up.mu.Unlock()
		if got := h2Exchange(t, r.b, r.f.addr(), fields, []byte(body)); strings.Contains(got, canary) {
			t.Fatal("the sandbox saw the value")
		}
		if l := r.leaked(); l != "" {
			t.Fatalf("the value reached: %s", l)
		}
	})
	r.f.noCanary(f)
}

// h2Exchange sends one stream (HEADERS with fields, then DATA with body)
// and returns what came back on the connection, header fields decoded.
func h2Exchange(t testing.TB, b *Broker, addr string, fields []hpack.HeaderField, body []byte) string {
	t.Helper()
	pool := trusting(b)
	d := &net.Dialer{Timeout: 5 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{RootCAs: pool, ServerName: testHost, NextProtos: []string{"h2"}})
	if err != nil {
		return "handshake refused"
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, hf := range fields {
		_ = enc.WriteField(hf)
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	fr.MaxHeaderListSize = 1 << 20
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		return "write failed"
	}
	_ = fr.WriteSettings()
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true, EndStream: len(body) == 0})
	if len(body) > 0 {
		_ = fr.WriteData(1, true, body)
	}
	var got strings.Builder
	for {
		frame, err := fr.ReadFrame()
		if err != nil {
			return got.String()
		}
		switch fm := frame.(type) {
		case *http2.SettingsFrame:
			if !fm.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.MetaHeadersFrame:
			for _, hf := range fm.Fields {
				got.WriteString(hf.Name + ": " + hf.Value + "\n")
			}
			if fm.StreamEnded() {
				return got.String()
			}
		case *http2.DataFrame:
			got.Write(fm.Data())
			if fm.StreamEnded() {
				return got.String()
			}
		case *http2.RSTStreamFrame, *http2.GoAwayFrame:
			return got.String()
		}
	}
}

// The fuzzer's exchange reaches the host: a well-formed stream gets the
// echo, scrubbed, and the host gets the value.
func TestH2ExchangeReachesTheHost(t *testing.T) {
	r := newRig(t)
	got := h2Exchange(t, r.b, r.f.addr(), []hpack.HeaderField{
		{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "https"}, {Name: ":authority", Value: testHost},
		{Name: ":path", Value: "/echo"}, {Name: "authorization", Value: "Bearer " + r.ph},
	}, nil)
	if !strings.Contains(got, ":status: 200") || !strings.Contains(got, r.ph) || strings.Contains(got, canary) || !r.upstreamGotValue() {
		t.Fatalf("got %q; upstream got the value: %v", got, r.upstreamGotValue())
	}
}
