package e2b_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/e2b"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/e2b/envd/process"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/e2b/envd/process/processconnect"
	e2bserver "github.com/sandboxio/terraform-provider-sandboxio/internal/fakes/e2b"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/testing/medians"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// BenchmarkOpenRunClose: open → run `true` → close through the adapter,
// against the same three calls made raw (POST /v2/sandboxes, envd's
// process Start over Connect, DELETE /sandboxes/{id}) to the same local
// server, interleaved in one run (the order alternates), compared by
// medians: the adapter's overhead over the wire protocol (goal printed).
// Both paths open the same sandbox (template, deny egress, metadata).
func BenchmarkOpenRunClose(b *testing.B) {
	srv := e2bserver.NewTestServer(b, canaryKey)
	b.Setenv(e2b.EnvAPIKey, canaryKey)
	b.Setenv(e2b.EnvAPIURL, srv.URL)
	b.Setenv(e2b.EnvSandboxURL, srv.URL)
	be, err := e2b.New(backends.DSN{Scheme: "e2b", Options: map[string]string{}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	n := 0
	adapter := func() error {
		n++
		sb, err := be.Create(ctx, backends.CreateRequest{Spec: spec(func(s *model.Spec) { s.SessionID = fmt.Sprintf("bench-%d", n) })})
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
	raw := func() error { return rawOpenRunClose(ctx, srv.URL) }
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
	b.Logf("open→run→close medians over %d: adapter %s, raw HTTP+Connect %s; adapter/raw %.3f (goal ≤ 1.10)",
		b.N, ma.Round(100*time.Microsecond), mr.Round(100*time.Microsecond), float64(ma)/float64(mr))
}

// rawOpenRunClose is the wire calls alone, as a hand-written client would
// make them.
func rawOpenRunClose(ctx context.Context, base string) error {
	body, _ := json.Marshal(map[string]any{"templateID": e2bserver.TestTemplate, "timeout": 120, "allow_internet_access": false,
		"metadata": map[string]string{"sandboxio.managed": "true", "bench": "raw"}})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v2/sandboxes", bytes.NewReader(body))
	req.Header.Set("X-API-Key", canaryKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	var created struct {
		SandboxID       string `json:"sandboxID"`
		EnvdAccessToken string `json:"envdAccessToken"`
	}
	err = json.NewDecoder(resp.Body).Decode(&created)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("create: %d: %w", resp.StatusCode, err)
	}
	proc := processconnect.NewProcessClient(http.DefaultClient, base, connect.WithProtoJSON())
	start := connect.NewRequest(&process.StartRequest{Process: &process.ProcessConfig{Cmd: "true"}})
	start.Header().Set("E2b-Sandbox-Id", created.SandboxID)
	start.Header().Set("E2b-Sandbox-Port", strconv.Itoa(e2bserver.EnvdPort))
	start.Header().Set("X-Access-Token", created.EnvdAccessToken)
	stream, err := proc.Start(ctx, start)
	if err != nil {
		return err
	}
	var end *process.ProcessEvent_EndEvent
	for stream.Receive() {
		if e, ok := stream.Msg().GetEvent().GetEvent().(*process.ProcessEvent_End); ok {
			end = e.End
		}
	}
	_ = stream.Close()
	if end == nil || end.GetExitCode() != 0 {
		return fmt.Errorf("run: end %v: %w", end, stream.Err())
	}
	del, _ := http.NewRequestWithContext(ctx, http.MethodDelete, base+"/sandboxes/"+created.SandboxID, nil)
	del.Header.Set("X-API-Key", canaryKey)
	resp, err = http.DefaultClient.Do(del)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("kill: %d", resp.StatusCode)
	}
	return nil
}
