package kubernetes

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/testing/medians"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// The benchmarks interleave the variants they compare in every iteration
// (the order alternating), so that drift in the cluster's speed over the
// run hits all of them alike, and report medians and their ratios. The
// test cluster shares its two cores with everything else on the machine:
// read the ratios, not the times.
//
//	SANDBOXIO_REQUIRE_K8S=1 go test -run '^$' -bench . -benchtime 8x ./internal/backends/kubernetes/

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// interleave runs each variant once per iteration, in alternating order,
// and reports each one's median and the ratio of the first to the second.
func interleave(b *testing.B, names [2]string, run [2]func() error) {
	b.Helper()
	times := [2][]time.Duration{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range 2 {
			j := (i + k) % 2
			start := time.Now()
			if err := run[j](); err != nil {
				b.Fatalf("%s: %v", names[j], err)
			}
			times[j] = append(times[j], time.Since(start))
		}
	}
	b.StopTimer()
	m0, m1 := medians.Of(times[0]), medians.Of(times[1])
	b.ReportMetric(ms(m0), names[0]+"-ms")
	b.ReportMetric(ms(m1), names[1]+"-ms")
	b.ReportMetric(float64(m0)/float64(m1), names[0]+"/"+names[1])
	b.Logf("medians over %d: %s %s, %s %s, ratio %.2f", b.N, names[0], m0.Round(time.Millisecond), names[1], m1.Round(time.Millisecond), float64(m0)/float64(m1))
}

func benchBackend(b *testing.B, api string) *k8sBackend {
	be := needCluster(b)
	if api == APIAgentSandbox {
		ab, err := Open(mustDSN(testDSN("api=agent-sandbox")))
		if err != nil {
			b.Fatal(err)
		}
		ab.namespace = be.namespace
		be = ab
	}
	return be
}

// open → run(true) → close through the backend, against the same work done
// with client-go alone: create the same pod (podFor), wait (a watch) until
// its container runs, exec `true` in it, delete it and wait until no
// container of it runs (what Close confirms).
func BenchmarkOpenRunClose(b *testing.B) {
	for _, api := range []string{APIPod, APIAgentSandbox} {
		b.Run(api, func(b *testing.B) {
			be := benchBackend(b, api)
			ctx := b.Context()
			spec := testSpec("bench")
			spec.Backend = be.dsn()
			p, err := be.validate(backends.CreateRequest{Spec: spec}, true)
			if err != nil {
				b.Fatal(err)
			}
			// Fill the node's cached process ceiling, as any earlier open
			// in the process would have.
			if err := openRunClose(ctx, be, spec); err != nil {
				b.Fatal(err)
			}
			steps := traceSteps(be)
			clear(rawSteps)
			defer func() {
				b.Log("backend:")
				logSteps(b, steps)
				b.Log("raw (running counts from before the create):")
				logSteps(b, rawSteps)
			}()
			interleave(b, [2]string{"backend", "raw"}, [2]func() error{
				func() error { return openRunClose(ctx, be, spec) },
				func() error { return rawOpenRunClose(ctx, be, p) },
			})
		})
	}
}

func openRunClose(ctx context.Context, be *k8sBackend, spec model.Spec) error {
	s, err := be.Create(ctx, backends.CreateRequest{Spec: spec})
	if err != nil {
		return err
	}
	res, err := s.Run(ctx, []string{"true"}, backends.RunOptions{})
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("exit %d", res.ExitCode)
	}
	be.step("run")
	if cerr := s.Close(ctx); err == nil {
		err = cerr
	}
	be.step("close")
	return err
}

// traceSteps records how long each step of the backend's opens took (from
// the step before it; the first from the start of Create).
func traceSteps(be *k8sBackend) map[string][]time.Duration {
	steps := map[string][]time.Duration{}
	last := time.Time{}
	be.trace = func(step string) {
		now := time.Now()
		if step == "create" {
			// Create's own start is just before validate: close enough.
			last = now
			return
		}
		if !last.IsZero() {
			steps[step] = append(steps[step], now.Sub(last))
		}
		last = now
	}
	return steps
}

func logSteps(b *testing.B, steps map[string][]time.Duration) {
	for _, k := range []string{"running", "probe-exec", "verify", "annotate", "run", "close"} {
		if d := steps[k]; len(d) > 0 {
			b.Logf("step %-10s median %s (n=%d)", k, medians.Of(d).Round(time.Millisecond), len(d))
		}
	}
}

// rawSteps are the raw baseline's steps, as traceSteps records the backend's.
var rawSteps = map[string][]time.Duration{}

// rawOpenRunClose is the client-go baseline: the hardened pod, and nothing
// this backend adds (the probe, the tier, the annotations, the wrapper's
// exec block).
func rawOpenRunClose(ctx context.Context, be *k8sBackend, p createPlan) error {
	last := time.Now()
	rawStep := func(step string) {
		rawSteps[step] = append(rawSteps[step], time.Since(last))
		last = time.Now()
	}
	name := "sandboxio-raw-" + randomHex(4)
	pods := be.cs.CoreV1().Pods(be.namespace)
	pod := podFor(p, name, map[string]string{model.LabelManaged: "true", model.LabelTenantID: "bench-raw"}, nil)
	w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		return err
	}
	defer w.Stop()
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return err
	}
	defer func() {
		_ = pods.Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(1))})
	}()
	if err := untilRunning(w.ResultChan()); err != nil {
		return err
	}
	rawStep("running")
	req := be.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(be.namespace).Name(name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: sandboxCtr, Command: []string{"true"}, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ex, err := remotecommand.NewWebSocketExecutor(be.rc, http.MethodGet, req.URL().String())
	if err != nil {
		return err
	}
	var out, errb bytes.Buffer
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &errb}); err != nil {
		return fmt.Errorf("exec: %w %s", err, errb.String())
	}
	rawStep("run")
	if err := pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(1))}); err != nil {
		return err
	}
	for {
		pod, err := pods.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && !anyRunning(pod)) {
			rawStep("close")
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func untilRunning(ch <-chan watch.Event) error {
	for ev := range ch {
		pod, ok := ev.Object.(*corev1.Pod)
		if !ok {
			continue
		}
		if sandboxRunning(pod) {
			return nil
		}
		if pod.Status.Phase == corev1.PodFailed {
			return fmt.Errorf("pod failed: %s", pod.Status.Message)
		}
	}
	return fmt.Errorf("watch ended")
}

// A warm sandbox's claim and first exec, against a cold open and its first
// exec; the warm sandbox is made outside the timing (that is the pool's
// work), and both are closed outside it.
func BenchmarkWarmClaimFirstExec(b *testing.B) {
	for _, api := range []string{APIPod, APIAgentSandbox} {
		b.Run(api, func(b *testing.B) {
			be := benchBackend(b, api)
			ctx := b.Context()
			tpl := testSpec("")
			tpl.Backend, tpl.Name, tpl.SessionID = be.dsn(), "bench-warm", ""
			spec := claimSpec(tpl, "bench", "s1")
			var open []backends.Sandbox
			closeAll := func() {
				for _, s := range open {
					_ = s.Close(ctx)
				}
				open = nil
			}
			defer closeAll()
			var ready []backends.Warm
			firstExec := func(s backends.Sandbox) error {
				open = append(open, s)
				res, err := s.Run(ctx, []string{"true"}, backends.RunOptions{})
				if err == nil && res.ExitCode != 0 {
					err = fmt.Errorf("exit %d", res.ExitCode)
				}
				return err
			}
			if err := openRunClose(ctx, be, spec); err != nil {
				b.Fatal(err)
			}
			times := [2][]time.Duration{}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				closeAll()
				w, err := be.CreateWarm(ctx, backends.WarmRequest{Spec: tpl, SpecSHA256: testSpecHash, MaxIdle: 5 * time.Minute})
				if err != nil {
					b.Fatal(err)
				}
				ready = append(ready, w)
				b.StartTimer()
				for k := range 2 {
					start := time.Now()
					if (i+k)%2 == 0 {
						s, err := be.Create(ctx, backends.CreateRequest{Spec: spec})
						if err == nil {
							err = firstExec(s)
						}
						if err != nil {
							b.Fatal(err)
						}
						times[0] = append(times[0], time.Since(start))
					} else {
						s, err := w.Claim(ctx, backends.ClaimRequest{Spec: spec, SpecSHA256: testSpecHash})
						if err == nil {
							err = firstExec(s)
						}
						if err != nil {
							b.Fatal(err)
						}
						times[1] = append(times[1], time.Since(start))
					}
				}
			}
			b.StopTimer()
			for _, w := range ready {
				_ = w.Discard(ctx)
			}
			m0, m1 := medians.Of(times[0]), medians.Of(times[1])
			b.ReportMetric(ms(m0), "cold-ms")
			b.ReportMetric(ms(m1), "claim-ms")
			b.ReportMetric(float64(m0)/float64(m1), "cold/claim")
			b.Logf("medians over %d: cold open + first exec %s, claim + first exec %s, ratio %.1f", b.N, m0.Round(time.Millisecond), m1.Round(time.Millisecond), float64(m0)/float64(m1))
		})
	}
}
