//go:build linux

package docker

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/testing/medians"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/testing/netns"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// downloadBytes is the size of the benchmark's download.
const downloadBytes = 256 << 20

// BenchmarkGateway compares, in one run and interleaved, the egress
// gateway with what it replaces: a large download through the gateway
// against the same download over the plain Docker bridge (open egress),
// the time of 50 connections (gateway minus bridge, per connection), and
// open → run → close of a gateway sandbox against a plain deny one.
func BenchmarkGateway(b *testing.B) {
	needDocker(b)
	host := netip.MustParseAddr("198.18.1.10")
	lab := netns.New(b, host, gwDNS)
	ln, err := lab.ListenOutside("tcp", net.JoinHostPort(host.String(), "8080"))
	if err != nil {
		b.Fatal(err)
	}
	zeros := make([]byte, 1<<20)
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(downloadBytes))
		for n := 0; n < downloadBytes; n += len(zeros) {
			if _, err := w.Write(zeros); err != nil {
				return
			}
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { srv.Close() })
	lab.WebHost(b, "bench", host, netns.NewCA(b, "bench.test")) // its 9000 is the connections' echo
	lab.DNSServer(b, gwDNS)

	be := newTestBackend(b, WithDiskStrategy(DiskTmpfs))
	ctx := b.Context()
	onGateway := func(s *model.Spec) {
		s.Backend = "docker://?egress=gateway&resolver=" + netip.AddrPortFrom(gwDNS, 53).String()
		s.Network = model.NetworkPolicy{Egress: model.EgressDeny, Allow: []string{host.String()}}.Normalized()
	}
	gwSpec, gwOpenSpec := testSpec(b, onGateway), testSpec(b, onGateway)
	bridgeSpec := testSpec(b, func(s *model.Spec) { s.Network = model.NetworkPolicy{Egress: model.EgressAllow}.Normalized() })
	denySpec := testSpec(b)
	gw, err := be.Create(ctx, backends.CreateRequest{Spec: gwSpec})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = gw.Close(ctx) })
	br, err := be.Create(ctx, backends.CreateRequest{Spec: bridgeSpec})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = br.Close(ctx) })

	url := "http://" + net.JoinHostPort(host.String(), "8080") + "/"
	download := func(sb backends.Sandbox) (time.Duration, error) {
		start := time.Now()
		res, err := sb.Run(ctx, []string{"wget", "-q", "-O", "/dev/null", url}, backends.RunOptions{Timeout: 60 * time.Second})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("wget exit %d: %s", res.ExitCode, res.Stderr)
		}
		return time.Since(start), err
	}
	const conns = 50
	connect := func(sb backends.Sandbox) (time.Duration, error) {
		args := []string{initTarget, probeProto}
		for range conns {
			args = append(args, "tcp|"+net.JoinHostPort(host.String(), "9000")+"|")
		}
		start := time.Now()
		res, err := sb.Run(ctx, args, backends.RunOptions{Timeout: 60 * time.Second})
		if err == nil && (res.ExitCode != 0 || strings.Count(string(res.Stdout), "=> connected") != conns) {
			err = fmt.Errorf("probe exit %d: %s", res.ExitCode, res.Stdout)
		}
		return time.Since(start), err
	}
	variants := []struct {
		name string
		run  func() (time.Duration, error)
	}{
		{"download-gateway", func() (time.Duration, error) { return download(gw) }},
		{"download-bridge", func() (time.Duration, error) { return download(br) }},
		{"connect-gateway", func() (time.Duration, error) { return connect(gw) }},
		{"connect-bridge", func() (time.Duration, error) { return connect(br) }},
		{"open-gateway", func() (time.Duration, error) {
			s := time.Now()
			err := openRunClose(ctx, be, gwOpenSpec)
			return time.Since(s), err
		}},
		{"open-deny", func() (time.Duration, error) {
			s := time.Now()
			err := openRunClose(ctx, be, denySpec)
			return time.Since(s), err
		}},
	}
	for _, v := range variants { // warm up (and the gateway's proof)
		if _, err := v.run(); err != nil {
			b.Fatalf("%s: %v", v.name, err)
		}
	}
	times := make([][]time.Duration, len(variants))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range variants {
			k := (i + j) % len(variants)
			d, err := variants[k].run()
			if err != nil {
				b.Fatalf("%s: %v", variants[k].name, err)
			}
			times[k] = append(times[k], d)
		}
	}
	b.StopTimer()
	med := make([]time.Duration, len(variants))
	for k := range variants {
		med[k] = medians.Of(times[k])
		b.ReportMetric(ms(med[k]), variants[k].name+"-ms")
	}
	throughput := float64(med[1]) / float64(med[0]) // gateway MB/s over bridge MB/s
	perConn := (med[2] - med[3]) / conns
	open := float64(med[4]) / float64(med[5])
	b.ReportMetric(throughput, "download-gateway/bridge")
	b.ReportMetric(ms(perConn), "extra-ms/conn")
	b.ReportMetric(open, "open-gateway/deny")
	mbps := func(d time.Duration) float64 { return float64(downloadBytes) / (1 << 20) / d.Seconds() }
	b.Logf("medians over %d: download of %d MiB through the gateway %s (%.0f MiB/s), over the bridge %s (%.0f MiB/s), throughput ratio %.2f (goal >= 0.8); %d connections %s vs %s, extra per connection %s (goal <= 2ms); open-run-close gateway %s vs deny %s, ratio %.3f (goal <= 1.15)",
		b.N, downloadBytes>>20, med[0].Round(time.Millisecond), mbps(med[0]), med[1].Round(time.Millisecond), mbps(med[1]), throughput,
		conns, med[2].Round(time.Millisecond), med[3].Round(time.Millisecond), perConn.Round(10*time.Microsecond),
		med[4].Round(time.Millisecond), med[5].Round(time.Millisecond), open)
}
