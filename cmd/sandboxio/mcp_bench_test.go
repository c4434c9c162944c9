package main

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/sandbox"
)

// BenchmarkMCPRoundTrip: the overhead of a tool call through `sandboxio mcp`
// over a direct run. Three variants of the same command (true), interleaved
// in every iteration so that drift in the daemon's speed hits all alike:
//
//   - direct: Sandbox.Run on a sandbox open in this process (the Go API);
//   - mcp: the run tool, called by the Go SDK's client on a `sandboxio mcp`
//     process over stdio (JSON-RPC framing, the server's summary, its
//     redaction), on its own open sandbox;
//   - mcp-protocol: a call the server refuses before the sandbox (an empty
//     command): the MCP layer's own round trip;
//   - cli-run: `sandboxio run` (in this process): open, run, close.
//
// It reports the medians and the ratios mcp/direct and mcp/cli-run:
//
//	go test -run '^$' -bench MCPRoundTrip -benchtime 30x ./cmd/sandboxio/
func BenchmarkMCPRoundTrip(b *testing.B) {
	needDocker(b)
	ctx := context.Background()
	direct := "mcp-bench-direct-" + runID
	specPath, sum := specFile(b, "acme", direct)
	spec, err := os.ReadFile(specPath)
	if err != nil {
		b.Fatal(err)
	}
	c, err := sandbox.New(ctx, sandbox.Config{})
	if err != nil {
		b.Fatal(err)
	}
	sb, err := c.Open(ctx, sandbox.Request{Spec: spec, SpecSHA256: sum, TenantID: "acme", SessionID: direct})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = sb.Close(ctx) }()
	served := "mcp-bench-mcp-" + runID
	mcpSpec, mcpSum := specFile(b, "acme", served)
	cs, _, stderr := startMCP(b, nil, "--spec", mcpSpec, "--spec-sha256", mcpSum, "--tenant", "acme", "--session", served, "--quiet")
	defer cs.Close()
	cliSession := "mcp-bench-cli-" + runID
	cliSpec, cliSum := specFile(b, "acme", cliSession)

	variants := []struct {
		name string
		run  func() error
	}{
		{"direct", func() error {
			res, err := sb.Run(ctx, []string{"true"}, sandbox.RunOptions{})
			if err == nil && res.ExitCode != 0 {
				b.Fatalf("direct: exit %d", res.ExitCode)
			}
			return err
		}},
		{"mcp", func() error {
			res, text := callText(b, cs, "run", map[string]any{"command": []string{"true"}})
			if res.IsError || !strings.HasPrefix(text, "exit code 0 ") {
				b.Fatalf("mcp: %s\n%s", text, stderr)
			}
			return nil
		}},
		{"mcp-protocol", func() error {
			// A call the server answers before the sandbox (an empty
			// command): the MCP layer alone, client to server process and
			// back.
			res, text := callText(b, cs, "run", map[string]any{"command": []string{}})
			if !res.IsError || !strings.Contains(text, "no command given") {
				b.Fatalf("mcp-protocol: %s", text)
			}
			return nil
		}},
		{"cli-run", func() error {
			var out, errb bytes.Buffer
			code := run(ctx, []string{"run", "--spec", cliSpec, "--spec-sha256", cliSum, "--tenant", "acme", "--session", cliSession, "--quiet", "--", "true"},
				&env{stdout: &out, stderr: &errb, stdin: strings.NewReader(""), now: time.Now})
			if code != 0 {
				b.Fatalf("cli-run: exit %d: %s", code, errb.String())
			}
			return nil
		}},
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
	med := func(d []time.Duration) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[len(s)/2]
	}
	md, mm, mp, mc := med(times[0]), med(times[1]), med(times[2]), med(times[3])
	b.ReportMetric(float64(md.Microseconds())/1000, "direct-ms")
	b.ReportMetric(float64(mm.Microseconds())/1000, "mcp-ms")
	b.ReportMetric(float64(mp.Microseconds())/1000, "mcp-protocol-ms")
	b.ReportMetric(float64(mc.Microseconds())/1000, "cli-run-ms")
	b.ReportMetric(float64(mm)/float64(md), "mcp/direct")
	b.ReportMetric(float64(mm)/float64(mc), "mcp/cli-run")
	b.Logf("run `true`, medians over %d: direct Sandbox.Run %s, MCP tool call %s (mcp/direct %.3f), the MCP layer alone %s, sandboxio run (open+run+close) %s (mcp/cli-run %.3f)",
		b.N, md.Round(100*time.Microsecond), mm.Round(100*time.Microsecond), float64(mm)/float64(md), mp.Round(10*time.Microsecond),
		mc.Round(time.Millisecond), float64(mm)/float64(mc))
}
