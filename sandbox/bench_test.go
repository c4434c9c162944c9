package sandbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/testing/docker/rawapi"
)

// The benchmarks compare the helper with what it wraps, in the same run,
// interleaving the variants in every iteration so that drift in the daemon's
// speed hits both alike, and report medians and ratios:
//
//	go test -run '^$' -bench . -benchtime 30x ./sandbox/

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// helperOpenRunClose is the helper's whole path: parse, digest, tenancy
// and policy checks, live preflight, create, run, close.
func helperOpenRunClose(ctx context.Context, c *Client, spec []byte, sum, tenant, session string) error {
	sb, err := c.Open(ctx, Request{Spec: spec, SpecSHA256: sum, TenantID: tenant, SessionID: session})
	if err != nil {
		return err
	}
	res, err := sb.Run(ctx, []string{"true"}, RunOptions{})
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("exit %d", res.ExitCode)
	}
	if cerr := sb.Close(ctx); err == nil {
		err = cerr
	}
	return err
}

// BenchmarkOpenRunClose: helper open -> run -> close against the raw
// Engine API sequence; the goal is printed with the ratio.
func BenchmarkOpenRunClose(b *testing.B) {
	cli := needDocker(b)
	ctx := b.Context()
	spec, sum := tenantSpec(b, template(b), "acme", "bench")
	c, err := New(ctx, Config{})
	if err != nil {
		b.Fatal(err)
	}
	// The raw variant creates exactly what the helper creates.
	sb, err := c.Open(ctx, Request{Spec: spec, SpecSHA256: sum, TenantID: "acme", SessionID: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	ins, err := cli.ContainerInspect(ctx, sb.ID())
	if err != nil {
		b.Fatal(err)
	}
	if err := sb.Close(ctx); err != nil {
		b.Fatal(err)
	}
	cfg, hc := ins.Config, ins.HostConfig
	cfg.Hostname = ""

	variants := []struct {
		name string
		run  func() error
	}{
		{"helper", func() error { return helperOpenRunClose(ctx, c, spec, sum, "acme", "bench") }},
		{"raw-api", func() error { return rawapi.OpenRunClose(ctx, cli, cfg, hc) }},
	}
	for _, v := range variants { // warm up
		if err := v.run(); err != nil {
			b.Fatalf("%s: %v", v.name, err)
		}
	}
	times := make([][]time.Duration, len(variants))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range variants {
			k := (i + j) % len(variants)
			start := time.Now()
			if err := variants[k].run(); err != nil {
				b.Fatalf("%s: %v", variants[k].name, err)
			}
			times[k] = append(times[k], time.Since(start))
		}
	}
	b.StopTimer()
	mh, mr := median(times[0]), median(times[1])
	b.ReportMetric(ms(mh), "helper-ms")
	b.ReportMetric(ms(mr), "raw-ms")
	b.ReportMetric(float64(mh)/float64(mr), "helper/raw")
	b.Logf("open->run->close medians over %d: helper %s, raw Engine API %s; helper/raw %.3f (goal <= 1.10)",
		b.N, mh.Round(100*time.Microsecond), mr.Round(100*time.Microsecond), float64(mh)/float64(mr))
}

// BenchmarkFiftyTenants: throughput of 50 tenants opened (open -> run ->
// close) concurrently, against the same 50 one after another, and against
// the raw Engine API sequence run 50 times concurrently (what the daemon
// itself allows on this machine).
func BenchmarkFiftyTenants(b *testing.B) {
	cli := needDocker(b)
	ctx := context.WithoutCancel(b.Context())
	const n = 50
	tpl := template(b)
	type req struct {
		spec        []byte
		sum, tenant string
	}
	reqs := make([]req, n)
	for i := range reqs {
		tenant := fmt.Sprintf("bench-%02d", i)
		spec, sum := tenantSpec(b, tpl, tenant, "bench")
		reqs[i] = req{spec: spec, sum: sum, tenant: tenant}
	}
	c, err := New(ctx, Config{})
	if err != nil {
		b.Fatal(err)
	}
	sb, err := c.Open(ctx, Request{Spec: reqs[0].spec, SpecSHA256: reqs[0].sum, TenantID: reqs[0].tenant, SessionID: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	ins, err := cli.ContainerInspect(ctx, sb.ID())
	if err != nil {
		b.Fatal(err)
	}
	if err := sb.Close(ctx); err != nil {
		b.Fatal(err)
	}
	cfg, hc := ins.Config, ins.HostConfig
	cfg.Hostname = ""
	rawConcurrent := func() error {
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = rawapi.OpenRunClose(ctx, cli, cfg, hc)
			}()
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	concurrent := func() error {
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i, r := range reqs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = helperOpenRunClose(ctx, c, r.spec, r.sum, r.tenant, "bench")
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	}
	sequential := func() error {
		for _, r := range reqs {
			if err := helperOpenRunClose(ctx, c, r.spec, r.sum, r.tenant, "bench"); err != nil {
				return err
			}
		}
		return nil
	}
	var conc, seq, raw []time.Duration
	type variant struct {
		run   func() error
		times *[]time.Duration
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		order := []variant{{concurrent, &conc}, {sequential, &seq}, {rawConcurrent, &raw}}
		order = append(order[i%3:], order[:i%3]...)
		for _, v := range order {
			start := time.Now()
			if err := v.run(); err != nil {
				b.Fatal(err)
			}
			*v.times = append(*v.times, time.Since(start))
		}
	}
	b.StopTimer()
	mc, msq, mr := median(conc), median(seq), median(raw)
	cRate, sRate, rRate := n/mc.Seconds(), n/msq.Seconds(), n/mr.Seconds()
	b.ReportMetric(cRate, "concurrent-sandboxes/s")
	b.ReportMetric(sRate, "sequential-sandboxes/s")
	b.ReportMetric(rRate, "raw-concurrent-sandboxes/s")
	b.ReportMetric(cRate/sRate, "concurrent/sequential")
	b.ReportMetric(cRate/rRate, "helper/raw-throughput")
	b.Logf("%d tenants open->run->close, medians over %d: concurrent %s (%.1f sandboxes/s), sequential %s (%.1f sandboxes/s), "+
		"raw Engine API concurrent %s (%.1f sandboxes/s); concurrent/sequential %.2fx, helper/raw throughput %.2f",
		n, b.N, mc.Round(time.Millisecond), cRate, msq.Round(time.Millisecond), sRate, mr.Round(time.Millisecond), rRate, cRate/sRate, cRate/rRate)
}
