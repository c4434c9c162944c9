package vercel_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	vercelserver "github.com/sandboxio/terraform-provider-sandboxio/internal/fakes/vercel"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/testing/medians"
)

// The benchmarks compare the adapter with the raw HTTP calls it makes, to
// the same local conformance server in the same run, interleaving the
// variants in every iteration so that drift hits both alike, and report
// medians and their ratio:
//
//	go test -run '^$' -bench . -benchtime 20x ./internal/backends/vercel/

// raw is the API called by hand: the requests the SDK sends.
type raw struct {
	url string
	hc  *http.Client
}

func (r raw) do(method, path string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	req, err := http.NewRequest(method, r.url+path+sep+"teamId="+vercelserver.TestTeam, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+canaryToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.hc.Do(req)
	if err == nil && resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	return resp, err
}

// run posts a command and reads its stream to the exit code.
func (r raw) run(sid string) error {
	resp, err := r.do(http.MethodPost, "/v2/sandboxes/sessions/"+sid+"/cmd", map[string]any{"command": "true", "args": []string{},
		"env": map[string]string{}, "sudo": false, "wait": true, "logs": true, "timeout": 60000})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	n := 0
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"exitCode":0`) {
			n++
		}
	}
	if n != 1 {
		return fmt.Errorf("the stream did not end with exit code 0")
	}
	return nil
}

func (r raw) openRunClose(i int) error {
	resp, err := r.do(http.MethodPost, "/v2/sandboxes", map[string]any{"projectId": vercelserver.TestProject, "runtime": "node22",
		"name": fmt.Sprintf("bench-raw-%d-%d", time.Now().UnixNano(), i), "persistent": false, "timeout": 120000,
		"resources": map[string]int{"vcpus": 1}, "networkPolicy": map[string]string{"mode": "deny-all"},
		"tags": map[string]string{"sandboxio.tenant_id": "acme"}})
	if err != nil {
		return err
	}
	var created struct {
		Sandbox struct{ Name string }
		Session struct{ ID string }
	}
	err = json.NewDecoder(resp.Body).Decode(&created)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if err := r.run(created.Session.ID); err != nil {
		return err
	}
	for _, c := range [][2]string{{http.MethodPost, "/v2/sandboxes/sessions/" + created.Session.ID + "/stop"},
		{http.MethodDelete, "/v2/sandboxes/" + created.Sandbox.Name + "?projectId=" + vercelserver.TestProject}} {
		resp, err := r.do(c[0], c[1], nil)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return nil
}

func bench(b *testing.B, variants []func(int) error, names []string) {
	for k, v := range variants { // warm up
		if err := v(-1); err != nil {
			b.Fatalf("%s: %v", names[k], err)
		}
	}
	times := make([][]time.Duration, len(variants))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range variants {
			k := (i + j) % len(variants)
			start := time.Now()
			if err := variants[k](i); err != nil {
				b.Fatalf("%s: %v", names[k], err)
			}
			times[k] = append(times[k], time.Since(start))
		}
	}
	b.StopTimer()
	m0, m1 := medians.Of(times[0]), medians.Of(times[1])
	b.ReportMetric(float64(m0.Microseconds())/1000, names[0]+"-ms")
	b.ReportMetric(float64(m1.Microseconds())/1000, names[1]+"-ms")
	b.ReportMetric(float64(m0)/float64(m1), names[0]+"/"+names[1])
	b.Logf("medians over %d: %s %s, %s %s; ratio %.3f", b.N, names[0], m0.Round(100*time.Microsecond), names[1], m1.Round(100*time.Microsecond), float64(m0)/float64(m1))
}

// BenchmarkOpenRunClose: create, one command, stop and delete.
func BenchmarkOpenRunClose(b *testing.B) {
	srv, be := open(b)
	r := raw{url: srv.URL, hc: &http.Client{}}
	ctx := b.Context()
	s := spec()
	adapter := func(int) error {
		sb, err := be.Create(ctx, backends.CreateRequest{Spec: s})
		if err != nil {
			return err
		}
		res, err := sb.Run(ctx, []string{"true"}, backends.RunOptions{})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exit %d", res.ExitCode)
		}
		if cerr := sb.Close(ctx); err == nil {
			err = cerr
		}
		return err
	}
	bench(b, []func(int) error{adapter, r.openRunClose}, []string{"adapter", "raw"})
}

// BenchmarkRun: one command in an open sandbox, where the adapter's own
// work is not hidden behind a container start.
func BenchmarkRun(b *testing.B) {
	srv, be := open(b)
	r := raw{url: srv.URL, hc: &http.Client{}}
	ctx := b.Context()
	sb, err := be.Create(ctx, backends.CreateRequest{Spec: spec()})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close(ctx)
	rec, _ := srv.Observe(sb.ID())
	adapter := func(int) error {
		res, err := sb.Run(ctx, []string{"true"}, backends.RunOptions{})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exit %d", res.ExitCode)
		}
		return err
	}
	bench(b, []func(int) error{adapter, func(int) error { return r.run(rec.SessionID) }}, []string{"adapter", "raw"})
}
