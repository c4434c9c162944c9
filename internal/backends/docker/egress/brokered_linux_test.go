package egress

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker/egress/broker"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/testing/medians"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/testing/netns"
)

var apiHost = netip.MustParseAddr("198.18.1.30")

// seenHeaders is what one outside HTTPS host received, by request.
type seenHeaders struct {
	mu   sync.Mutex
	auth []string
}

func (s *seenHeaders) add(v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.auth = append(s.auth, v)
}

func (s *seenHeaders) all() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.auth, "\n")
}

// echoHost serves HTTPS on a:443 with a leaf of ca, answering with the
// Authorization header it got (an echoing server, as an error page may be).
func echoHost(t testing.TB, l *netns.Lab, a netip.Addr, ca *netns.CA, h2 bool) *seenHeaders {
	t.Helper()
	seen := &seenHeaders{}
	ln, err := l.ListenOutside("tcp", net.JoinHostPort(a.String(), "443"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{ca.Leaf}, MinVersion: tls.VersionTLS12}
	if h2 {
		cfg.NextProtos = []string{"h2", "http/1.1"}
	}
	ln = tls.NewListener(ln, cfg)
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.add(r.Header.Get("Authorization"))
		fmt.Fprintf(w, "got %s", r.Header.Get("Authorization"))
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return seen
}

const brokerCanary = "sk-canary-7f3a9c1e5b2d4f6a8c0e"

// brokerRig is a gateway with a broker for API_KEY on api.test, an echoing
// HTTPS host for api.test and one for other.test (listed, not brokered),
// and an HTTP client in the sandbox's namespace that trusts the broker's CA.
type brokerRig struct {
	gw          *Gateway
	client      *http.Client
	placeholder string
	api, other  *seenHeaders
	mu          sync.Mutex
	records     []broker.Request
}

func newBrokerRig(t testing.TB) *brokerRig {
	t.Helper()
	return newBrokerRigWith(t, false)
}

// newBrokerRigWith is newBrokerRig with hosts that offer h2 when h2.
func newBrokerRigWith(t testing.TB, h2 bool) *brokerRig {
	t.Helper()
	lab := netns.New(t, apiHost, otherHost, dnsHost)
	dns := lab.DNSServer(t, dnsHost)
	dns.Set("api.test", netns.Static(apiHost))
	dns.Set("other.test", netns.Static(otherHost))
	apiCA, otherCA := netns.NewCA(t, "api.test"), netns.NewCA(t, "other.test")
	r := &brokerRig{}
	r.api, r.other = echoHost(t, lab, apiHost, apiCA, h2), echoHost(t, lab, otherHost, otherCA, h2)
	brk, err := broker.New([]broker.Secret{{Name: "API_KEY", Hosts: []string{"api.test"}, Header: "Authorization", Format: "Bearer %s", Value: []byte(brokerCanary)}})
	if err != nil {
		t.Fatal(err)
	}
	r.placeholder = brk.Placeholder("API_KEY")
	r.gw, err = attachGatewayNetns(lab.SandboxFD, GatewayConfig{
		Rules:       Rules{Names: []string{"api.test", "other.test"}},
		Resolver:    netip.AddrPortFrom(dnsHost, 53),
		Broker:      brk,
		BrokerRoots: apiCA.Pool,
		OnBrokered: func(req broker.Request) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.records = append(r.records, req)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.gw.Close)
	// The sandbox trusts the broker's CA (as its bundle will) and the
	// other host's own.
	pool := otherCA.Pool.Clone()
	pool.AppendCertsFromPEM(brk.CACertPEM())
	tr := &http.Transport{
		Proxy: nil, TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := lab.InSandbox(func() (err error) {
				d := net.Dialer{Timeout: 3 * time.Second, Resolver: &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
					var dd net.Dialer
					return dd.DialContext(ctx, "udp", net.JoinHostPort(dnsHost.String(), "53"))
				}}}
				c, err = d.DialContext(ctx, network, addr)
				return
			})
			return c, err
		},
	}
	t.Cleanup(tr.CloseIdleConnections)
	r.client = &http.Client{Timeout: 8 * time.Second, Transport: tr}
	return r
}

// get sends the placeholder to url the way code in the sandbox would.
func (r *brokerRig) get(url string) (string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+r.placeholder)
	resp, err := r.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err == nil && resp.StatusCode != 200 {
		err = fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	return string(b), err
}

// Through the gateway, a request from the sandbox to the secret's host
// carries the real value in the declared header; the sandbox holds and
// reads back only the placeholder; another listed host gets the
// placeholder as it was sent, spliced untouched.
func TestGatewayBrokersTheSecret(t *testing.T) {
	r := newBrokerRig(t)
	get := func(url string) string {
		t.Helper()
		b, err := r.get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		return b
	}
	placeholder, canary, api, other, gw := r.placeholder, brokerCanary, r.api, r.other, r.gw
	if got := get("https://api.test/"); got != "got Bearer "+placeholder {
		t.Fatalf("the sandbox read %q from the secret's host, want the placeholder echoed", got)
	}
	if got := api.all(); got != "Bearer "+canary {
		t.Fatalf("the secret's host got %q, want the real value", got)
	}
	if got := get("https://other.test/"); got != "got Bearer "+placeholder {
		t.Fatalf("the other host answered %q", got)
	}
	if got := other.all(); strings.Contains(got, canary) || got != "Bearer "+placeholder {
		t.Fatalf("the other host got %q, want the placeholder untouched", got)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	records := r.records
	if len(records) != 1 || records[0].Secret != "API_KEY" || records[0].Host != "api.test" || records[0].Status != 200 {
		t.Fatalf("brokered requests recorded %+v", records)
	}
	var all bytes.Buffer
	fmt.Fprintf(&all, "%+v %+v", gw.Allowed(), records)
	_, list := gw.Record().Snapshot()
	fmt.Fprintf(&all, "%+v", list)
	if strings.Contains(all.String(), canary) {
		t.Fatal("the value is in the gateway's records")
	}
}

// TestGatewayBrokersOverHTTP2: to a host that speaks h2, the sandbox's
// client speaks HTTP/2 through the broker too (its writes then go through
// the broker's own writer goroutine into the netstack), and the contract
// holds: the value upstream, the placeholder back, several streams at once.
func TestGatewayBrokersOverHTTP2(t *testing.T) {
	r := newBrokerRigWith(t, true)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodGet, "https://api.test/", nil)
			req.Header.Set("Authorization", "Bearer "+r.placeholder)
			resp, err := r.client.Do(req)
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.ProtoMajor != 2 || string(b) != "got Bearer "+r.placeholder {
				errs <- fmt.Errorf("over %s the sandbox read %q", resp.Proto, b)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, got := range strings.Split(r.api.all(), "\n") {
		if got != "Bearer "+brokerCanary {
			t.Fatalf("the secret's host got %q, want the real value", got)
		}
	}
}

// BenchmarkBrokerThroughGateway compares, in one run and interleaved,
// requests from the sandbox through the gateway to the secret's host (the
// broker terminates TLS and writes the value) against the same requests to
// a listed host the gateway splices: the rate and the added p50 latency.
func BenchmarkBrokerThroughGateway(b *testing.B) { benchThroughGateway(b, false) }

// BenchmarkBrokerH2ThroughGateway is the same comparison with hosts that
// speak h2, so both paths are HTTP/2 from the sandbox (named apart so that
// -bench BenchmarkBrokerThroughGateway runs the benchmark alone).
func BenchmarkBrokerH2ThroughGateway(b *testing.B) { benchThroughGateway(b, true) }

func benchThroughGateway(b *testing.B, h2 bool) {
	r := newBrokerRigWith(b, h2)
	const perRound = 200
	urls := [2]string{"https://api.test/", "https://other.test/"}
	round := func(url string) (float64, time.Duration, error) {
		lat := make([]time.Duration, 0, perRound)
		start := time.Now()
		for range perRound {
			s := time.Now()
			if _, err := r.get(url); err != nil {
				return 0, 0, err
			}
			lat = append(lat, time.Since(s))
		}
		return perRound / time.Since(start).Seconds(), medians.Of(lat), nil
	}
	for _, u := range urls { // warm up: connections, leaf, resolution
		if _, _, err := round(u); err != nil {
			b.Fatal(err)
		}
	}
	var rates [2][]float64
	var p50s [2][]time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range 2 {
			k := (i + j) % 2
			rate, p50, err := round(urls[k])
			if err != nil {
				b.Fatal(err)
			}
			rates[k], p50s[k] = append(rates[k], rate), append(p50s[k], p50)
		}
	}
	b.StopTimer()
	rb, rs := medians.Of(rates[0]), medians.Of(rates[1])
	pb, ps := medians.Of(p50s[0]), medians.Of(p50s[1])
	b.ReportMetric(rb/rs, "broker/splice-rate")
	b.ReportMetric(float64((pb-ps).Microseconds())/1000, "added-p50-ms")
	b.Logf("medians over %d rounds of %d requests: through the broker %.0f req/s, p50 %s; spliced %.0f req/s, p50 %s; rate ratio %.2f (goal >= 0.7), added p50 %s (goal <= 3ms)",
		b.N, perRound, rb, pb.Round(time.Microsecond), rs, ps.Round(time.Microsecond), rb/rs, (pb - ps).Round(time.Microsecond))
}
