package docker

import (
	"context"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/testing/docker/rawapi"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/testing/medians"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// The benchmarks interleave the variants they compare in every iteration, so
// that drift in the daemon's speed over the run hits all of them alike, and
// report medians and their ratios:
//
//	go test -run '^$' -bench . -benchtime 20x ./internal/backends/docker/

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// dockerRunArgs is `docker run --rm` with the flags the backend sets.
func dockerRunArgs(p createPlan, labels map[string]string) []string {
	args := []string{"run", "--rm", "--init", "--network", p.networkMode, "--runtime", p.runtime,
		"--cap-drop", "ALL", "--security-opt", "no-new-privileges:true", "--log-driver", "none",
		"--memory", fmt.Sprintf("%dm", p.caps.MemoryMB), "--memory-swap", fmt.Sprintf("%dm", p.caps.MemoryMB),
		"--cpus", fmt.Sprint(p.caps.CPU), "--pids-limit", fmt.Sprint(p.caps.Pids), "--read-only"}
	for path, size := range tmpfsSizes(p.caps.DiskMB) {
		if path == shmPath {
			args = append(args, "--shm-size", fmt.Sprintf("%dk", size))
			continue
		}
		args = append(args, "--tmpfs", fmt.Sprintf("%s:rw,nosuid,nodev,size=%dk", path, size))
	}
	for k, v := range labels {
		args = append(args, "--label", k+"="+v)
	}
	return append(args, p.spec.Image, "true")
}

func BenchmarkOpenRunClose(b *testing.B) {
	needDocker(b)
	be := newTestBackend(b, WithDiskStrategy(DiskTmpfs))
	ctx := b.Context()
	spec := testSpec(b)
	p, err := validate(backends.CreateRequest{Spec: spec}, true)
	if err != nil {
		b.Fatal(err)
	}
	// The raw baseline starts the same container, sandboxio's init as PID 1.
	d, err := be.daemon(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if p.initPath, err = initBinary(d.arch); err != nil {
		b.Fatal(err)
	}
	p.expires = time.Now().Add(time.Hour) // as create sets it
	labels := map[string]string{model.LabelManaged: "true", labelOwner: processOwner().ID,
		labelExpires: time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "test": "bench-raw"}
	cfg, hc := containerConfig(p, DiskTmpfs, p.networkMode, labels)
	runArgs := dockerRunArgs(p, labels)
	// The same backend without the egress observer (deny is network mode
	// none either way): what the observer costs an open.
	bare := newTestBackend(b, WithDiskStrategy(DiskTmpfs), WithoutEgressObserver())

	variants := []struct {
		name string
		run  func() error
	}{
		{"backend", func() error { return openRunClose(ctx, be, spec) }},
		{"raw-api", func() error { return rawapi.OpenRunClose(ctx, be.cli, cfg, hc) }},
		{"backend-no-observer", func() error { return openRunClose(ctx, bare, spec) }},
		{"docker-run", func() error {
			out, err := exec.Command("docker", runArgs...).CombinedOutput()
			if err != nil {
				return fmt.Errorf("%w: %s", err, out)
			}
			return nil
		}},
	}
	// Warm up every path once (image facts, daemon info, the watcher).
	for _, v := range variants {
		if err := v.run(); err != nil {
			b.Fatalf("%s: %v", v.name, err)
		}
	}
	times := make([][]time.Duration, len(variants))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range variants {
			k := (i + j) % len(variants) // rotate the order
			v := variants[k]
			start := time.Now()
			if err := v.run(); err != nil {
				b.Fatalf("%s: %v", v.name, err)
			}
			times[k] = append(times[k], time.Since(start))
		}
	}
	b.StopTimer()
	med := make([]time.Duration, len(variants))
	for k := range variants {
		med[k] = medians.Of(times[k])
		b.ReportMetric(ms(med[k]), variants[k].name+"-ms")
	}
	b.ReportMetric(float64(med[0])/float64(med[1]), "backend/raw")
	b.ReportMetric(float64(med[0])/float64(med[2]), "backend/no-observer")
	b.ReportMetric(float64(med[0])/float64(med[3]), "backend/docker-run")
	b.Logf("medians over %d: backend %s, raw API %s, backend without egress observer %s, docker run --rm %s; backend/raw %.3f, backend/no-observer %.3f, backend/docker-run %.3f",
		b.N, med[0].Round(100*time.Microsecond), med[1].Round(100*time.Microsecond), med[2].Round(100*time.Microsecond), med[3].Round(100*time.Microsecond),
		float64(med[0])/float64(med[1]), float64(med[0])/float64(med[2]), float64(med[0])/float64(med[3]))
}

// openRunClose opens a sandbox, runs true in it and closes it.
func openRunClose(ctx context.Context, be *dockerBackend, spec model.Spec) error {
	sb, err := be.Create(ctx, backends.CreateRequest{Spec: spec})
	if err != nil {
		return err
	}
	if s := sb.(*sandbox); s.egress == nil && s.gw == nil && !be.cfg.noObserver {
		err = fmt.Errorf("no egress observer or gateway")
	}
	res, rerr := sb.Run(ctx, []string{"true"}, backends.RunOptions{})
	if err == nil && rerr != nil {
		err = rerr
	}
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("exit %d", res.ExitCode)
	}
	if cerr := sb.Close(ctx); err == nil {
		err = cerr
	}
	return err
}

func BenchmarkRun(b *testing.B) {
	needDocker(b)
	be := newTestBackend(b)
	ctx := b.Context()
	sb := open(b, be, testSpec(b))
	var backendT, rawT []time.Duration
	for i := 0; i < 3; i++ { // warm up
		_, _ = sb.Run(ctx, []string{"true"}, backends.RunOptions{})
	}
	b.ResetTimer()
	backendRun := func() {
		start := time.Now()
		res, err := sb.Run(ctx, []string{"true"}, backends.RunOptions{})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("run: %+v %v", res, err)
		}
		backendT = append(backendT, time.Since(start))
	}
	rawRun := func() {
		start := time.Now()
		if err := rawapi.Exec(ctx, be.cli, sb.id, []string{"true"}); err != nil {
			b.Fatal(err)
		}
		rawT = append(rawT, time.Since(start))
	}
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			backendRun()
			rawRun()
		} else {
			rawRun()
			backendRun()
		}
	}
	b.StopTimer()
	mb, mr := medians.Of(backendT), medians.Of(rawT)
	b.ReportMetric(ms(mb), "backend-ms")
	b.ReportMetric(ms(mr), "raw-exec-ms")
	b.ReportMetric(float64(mb)/float64(mr), "backend/raw")
	b.Logf("exec medians over %d: backend Run %s, raw exec %s, ratio %.3f", b.N,
		mb.Round(100*time.Microsecond), mr.Round(100*time.Microsecond), float64(mb)/float64(mr))
}
