package sandbox

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// openFirstExec opens a sandbox from the template spec and runs its first
// command; it returns the sandbox (open) and the time to the command's end.
func openFirstExec(ctx context.Context, c *Client, spec []byte, sum, tenant, session string) (*Sandbox, time.Duration, error) {
	start := time.Now()
	sb, err := c.Open(ctx, Request{Spec: spec, SpecSHA256: sum, TenantID: tenant, SessionID: session})
	if err != nil {
		return nil, 0, err
	}
	res, err := sb.Run(ctx, []string{"true"}, RunOptions{})
	d := time.Since(start)
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("exit %d", res.ExitCode)
	}
	if err != nil {
		_ = sb.Close(ctx)
		return nil, 0, err
	}
	return sb, d, nil
}

// BenchmarkWarmPool measures, on one template and daemon: the latency of
// claim -> first exec from a full pool of 4 against a cold open -> first exec,
// interleaved, each with the pool at rest and closes outside the timing; and
// the sustained rate of 16 opens -> first exec from a pool of 4 refilling in
// the background (later opens may go cold) against 16 cold opens. The goal is
// printed with the ratio.
//
//	go test -run '^$' -bench WarmPool -benchtime 15x ./sandbox/
func BenchmarkWarmPool(b *testing.B) {
	needDocker(b)
	ctx := b.Context()
	tpl := template(b)
	pooled, _, spec, sum := poolClient(b, tpl, 4, 10*time.Minute)
	cold, _ := newClient(b)
	waitReady(b, pooled, 4)
	var n int
	session := func() string { n++; return fmt.Sprintf("b%d", n) }
	// Warm-up: the image facts, the daemon info, the policy engine.
	for _, c := range []*Client{cold, pooled} {
		sb, _, err := openFirstExec(ctx, c, spec, sum, "bench", session())
		if err != nil {
			b.Fatal(err)
		}
		_ = sb.Close(ctx)
	}

	var tPool, tCold []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range 2 {
			c, times := cold, &tCold
			if (i+j)%2 == 0 {
				c, times = pooled, &tPool
			}
			// Both at rest: no refill of the pool runs during either.
			b.StopTimer()
			waitReady(b, pooled, 4)
			b.StartTimer()
			sb, d, err := openFirstExec(ctx, c, spec, sum, "bench", session())
			if err != nil {
				b.Fatal(err)
			}
			*times = append(*times, d)
			b.StopTimer()
			_ = sb.Close(ctx)
			b.StartTimer()
		}
	}
	b.StopTimer()

	const burst = 16
	rounds := 3
	if b.N == 1 {
		rounds = 1 // bench-smoke
	}
	var rPool, rCold []time.Duration
	var fromPool int
	for r := range rounds {
		for j := range 2 {
			c, times := cold, &rCold
			if (r+j)%2 == 0 {
				c, times = pooled, &rPool
			}
			waitReady(b, pooled, 4)
			before := claimed(pooled)
			var open []*Sandbox
			start := time.Now()
			for range burst {
				sb, _, err := openFirstExec(ctx, c, spec, sum, "bench", session())
				if err != nil {
					b.Fatal(err)
				}
				open = append(open, sb)
			}
			*times = append(*times, time.Since(start))
			if c == pooled {
				fromPool += claimed(pooled) - before
			}
			for _, sb := range open {
				_ = sb.Close(ctx)
			}
		}
	}

	mp, mc := median(tPool), median(tCold)
	rp, rc := burst/median(rPool).Seconds(), burst/median(rCold).Seconds()
	b.ReportMetric(ms(mp), "claim-first-exec-ms")
	b.ReportMetric(ms(mc), "cold-first-exec-ms")
	b.ReportMetric(float64(mc)/float64(mp), "cold/claim")
	b.ReportMetric(rp, "pool-opens/s")
	b.ReportMetric(rc, "cold-opens/s")
	b.ReportMetric(rp/rc, "pool/cold-rate")
	b.Logf("open -> first exec, medians over %d: claim from a pool of 4 %s, cold open %s; cold/claim %.1fx (goal >= 5x)",
		b.N, mp.Round(100*time.Microsecond), mc.Round(100*time.Microsecond), float64(mc)/float64(mp))
	b.Logf("sustained, %d opens -> first exec back to back, medians over %d rounds: pool of 4 refilling %.2f opens/s (%d of %d from the pool), cold %.2f opens/s; pool/cold %.2fx",
		burst, rounds, rp, fromPool, burst*rounds, rc, rp/rc)
}

func claimed(c *Client) int {
	n := 0
	for _, st := range c.PoolStats() {
		n += st.Claimed
	}
	return n
}
