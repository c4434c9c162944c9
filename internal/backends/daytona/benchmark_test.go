package daytona_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	daytonaserver "github.com/sandboxio/terraform-provider-sandboxio/internal/fakes/daytona"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/testing/medians"
)

// BenchmarkOpenRunClose: open → run `true` → close through the adapter,
// against the raw calls to the same local server (POST /sandbox, the
// toolbox's session create and exec, DELETE /sandbox/{id}), interleaved in
// one run (the order alternates), compared by medians: the adapter's
// overhead over the wire protocol (the goal is printed). Both paths open the same
// sandbox (image as a build, caps, deny egress, labels, idle limit).
func BenchmarkOpenRunClose(b *testing.B) {
	srv, be := open(b, 0)
	ctx := b.Context()
	n := 0
	adapter := func() error {
		n++
		s := spec().ForTenant("acme", fmt.Sprintf("bench-%d", n), nil)
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
	raw := func() error { return rawOpenRunClose(ctx, srv.APIURL()) }
	for _, f := range []func() error{adapter, raw} { // warm up both paths
		if err := f(); err != nil {
			b.Fatal(err)
		}
	}
	var at, rt []time.Duration
	timed := func(f func() error, into *[]time.Duration) {
		start := time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		*into = append(*into, time.Since(start))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			timed(adapter, &at)
			timed(raw, &rt)
		} else {
			timed(raw, &rt)
			timed(adapter, &at)
		}
	}
	b.StopTimer()
	ma, mr := medians.Of(at), medians.Of(rt)
	b.ReportMetric(float64(ma)/1e6, "adapter-ms")
	b.ReportMetric(float64(mr)/1e6, "raw-ms")
	b.ReportMetric(float64(ma)/float64(mr), "adapter/raw")
	b.Logf("open→run→close medians over %d: adapter %s, raw HTTP %s; adapter/raw %.3f (goal ≤ 1.10)",
		b.N, ma.Round(100*time.Microsecond), mr.Round(100*time.Microsecond), float64(ma)/float64(mr))
}

// rawOpenRunClose is the wire calls alone, as a hand-written client would
// make them.
func rawOpenRunClose(ctx context.Context, api string) error {
	call := func(method, url string, body, into any) error {
		var rd *bytes.Reader
		if body != nil {
			j, _ := json.Marshal(body)
			rd = bytes.NewReader(j)
		} else {
			rd = bytes.NewReader(nil)
		}
		req, _ := http.NewRequestWithContext(ctx, method, url, rd)
		req.Header.Set("Authorization", "Bearer "+canaryKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("%s %s: %d", method, url, resp.StatusCode)
		}
		if into != nil {
			return json.NewDecoder(resp.Body).Decode(into)
		}
		return nil
	}
	var sb struct {
		ID, State, ToolboxProxyURL string
	}
	err := call(http.MethodPost, api+"/sandbox", map[string]any{
		"buildInfo": map[string]string{"dockerfileContent": "FROM " + daytonaserver.TestSnapshot + "\n"},
		"env":       map[string]string{}, "labels": map[string]string{"sandboxio.managed": "true", "bench": "raw"},
		"networkBlockAll": true, "cpu": 1, "memory": 1, "disk": 1, "autoStopInterval": 3, "autoDeleteInterval": 0,
	}, &sb)
	if err != nil || sb.State != "started" {
		return fmt.Errorf("create: %s: %w", sb.State, err)
	}
	tb := sb.ToolboxProxyURL + "/" + sb.ID
	if err := call(http.MethodPost, tb+"/process/session", map[string]string{"sessionId": "raw"}, nil); err != nil {
		return err
	}
	var out struct {
		ExitCode *int `json:"exitCode"`
	}
	if err := call(http.MethodPost, tb+"/process/session/raw/exec", map[string]any{"command": "true", "runAsync": false}, &out); err != nil {
		return err
	}
	if out.ExitCode == nil || *out.ExitCode != 0 {
		return fmt.Errorf("run: exit %v", out.ExitCode)
	}
	return call(http.MethodDelete, api+"/sandbox/"+sb.ID, nil, nil)
}
