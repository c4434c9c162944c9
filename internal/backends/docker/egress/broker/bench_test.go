package broker

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/testing/medians"
)

// BenchmarkBroker measures, in one run, requests per second and p50 latency
// through Serve against the same requests through a plain TCP splice (the
// gateway's path for a host it does not intercept) to the same upstream.
// Rounds interleave the two; the metrics are medians over the rounds.
//
//	go test -run '^$' -bench BenchmarkBroker -benchtime 1x ./internal/backends/docker/egress/broker/
func BenchmarkBroker(b *testing.B) {
	for _, c := range []struct {
		name string
		h2   bool
		path string
	}{{"HTTP1", false, "/"}, {"HTTP2", true, "/"}, {"HTTP1-upstream-1ms", false, "/slow"}, {"HTTP2-upstream-1ms", true, "/slow"}} {
		h2, path := c.h2, c.path
		b.Run(c.name, func(b *testing.B) {
			const (
				rounds  = 7
				workers = 8
				total   = 2000 // requests per rate measurement
				serial  = 400  // requests per latency measurement
			)
			ca := newTestCA(b)
			up := newUpstream(b, ca.leaf(b, testHost))
			brk := newBroker(b)
			f := startFront(b, brk, up.srv.Listener.Addr().String(), ca.pool)
			base := splice(b, up.srv.Listener.Addr().String())
			ph := brk.Placeholder("OPENAI_API_KEY")
			var rate [2][]float64
			var p50 [2][]float64
			for i := 0; i < rounds; i++ {
				for k, c := range []*http.Client{benchClient(base, ca.pool, h2), benchClient(f.addr(), caPool(brk), h2)} {
					rate[k] = append(rate[k], measureRate(b, c, path, ph, workers, total))
					p50[k] = append(p50[k], measureP50(b, c, path, ph, serial))
					c.CloseIdleConnections()
				}
			}
			baseRate, brokerRate := medians.Of(rate[0]), medians.Of(rate[1])
			baseP50, brokerP50 := medians.Of(p50[0]), medians.Of(p50[1])
			b.ReportMetric(baseRate, "splice-req/s")
			b.ReportMetric(brokerRate, "broker-req/s")
			b.ReportMetric(brokerRate/baseRate, "rate-ratio")
			b.ReportMetric(baseP50*1e3, "splice-p50-ms")
			b.ReportMetric(brokerP50*1e3, "broker-p50-ms")
			b.ReportMetric((brokerP50-baseP50)*1e3, "added-p50-ms")
			b.Logf("rate %.0f/s through the broker vs %.0f/s spliced: %.2fx (goal >= 0.7x); p50 %.3f ms vs %.3f ms: +%.3f ms (goal <= 3 ms)",
				brokerRate, baseRate, brokerRate/baseRate, brokerP50*1e3, baseP50*1e3, (brokerP50-baseP50)*1e3)
		})
	}
}

func caPool(b *Broker) *x509.CertPool {
	pool := trusting(b)
	return pool
}

// benchClient keeps connections alive, as an SDK does, so the measurement
// is of requests, not of handshakes.
func benchClient(addr string, roots *x509.CertPool, h2 bool) *http.Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		},
		TLSClientConfig:     &tls.Config{RootCAs: roots, ServerName: testHost},
		ForceAttemptHTTP2:   h2,
		MaxIdleConnsPerHost: 16,
	}
	tr.Protocols = new(http.Protocols)
	if h2 {
		tr.Protocols.SetHTTP2(true)
	} else {
		tr.Protocols.SetHTTP1(true)
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func get(c *http.Client, path, ph string) error {
	req, _ := http.NewRequest("GET", "https://"+testHost+path, nil)
	req.Header.Set("Authorization", "Bearer "+ph)
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

func measureRate(b *testing.B, c *http.Client, path, ph string, workers, total int) float64 {
	var wg sync.WaitGroup
	var once sync.Once
	var failed error
	per := total / workers
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				if err := get(c, path, ph); err != nil {
					once.Do(func() { failed = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	if failed != nil {
		b.Fatal(failed)
	}
	return float64(per*workers) / time.Since(start).Seconds()
}

func measureP50(b *testing.B, c *http.Client, path, ph string, n int) float64 {
	if err := get(c, path, ph); err != nil { // warm: the connection exists
		b.Fatal(err)
	}
	lat := make([]float64, 0, n)
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if err := get(c, path, ph); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0).Seconds())
	}
	return medians.Of(lat)
}
