package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
	"github.com/sandboxio/terraform-provider-sandboxio/sandbox"
)

// BenchmarkMCPRoundTrip: the overhead of a tool call through `sandboxio mcp`
// over a direct run, variants interleaved in every iteration: direct
// (Sandbox.Run in this process), mcp (the run tool over stdio, with framing,
// summary and redaction), mcp-protocol (a call refused before the sandbox: the
// MCP layer alone) and cli-run (`sandboxio run`: open, run, close). It reports
// the medians and the ratios mcp/direct and mcp/cli-run:
//
//	go test -run '^$' -bench MCPRoundTrip -benchtime 30x ./cmd/sandboxio/
func BenchmarkMCPRoundTrip(b *testing.B) {
	needDocker(b)
	ctx := b.Context()
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

// BenchmarkMCPFirstCall: what a warm pool saves an agent host, from MCP
// initialize to the first tool call's result, through `sandboxio mcp` with a
// warm pool of 2 (filled first) and without one (cold at the first call),
// interleaved, each with a fresh server started outside the timing. It reports
// the medians and the ratio cold/pool:
//
//	go test -run '^$' -bench MCPFirstCall -benchtime 10x ./cmd/sandboxio/
func BenchmarkMCPFirstCall(b *testing.B) {
	needDocker(b)
	name := "mcp-bench-first-" + runID
	wp := model.WarmPool{Size: 2, MaxIdleSeconds: 300}
	poolSpec, poolSum := templateSpecFile(b, name, &wp)
	coldSpec, coldSum := templateSpecFile(b, name, nil)
	n := 0
	firstCall := func(pooled bool) time.Duration {
		n++
		spec, sum, ready := coldSpec, coldSum, "serving tenant"
		if pooled {
			spec, sum, ready = poolSpec, poolSum, "2 of 2 sandboxes ready"
		}
		srv := startServer(b, "--spec", spec, "--spec-sha256", sum, "--tenant", "acme", "--session", fmt.Sprintf("%s-%d", name, n))
		defer srv.stop(b)
		srv.waitFor(b, ready)
		b.StartTimer()
		start := time.Now()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "sandboxio-bench", Version: "1"}, nil).
			Connect(b.Context(), &mcp.IOTransport{Reader: srv.stdout, Writer: srv.stdin}, nil)
		if err != nil {
			b.Fatalf("initialize: %v\n%s", err, srv.stderr)
		}
		res, text := callText(b, cs, "run", map[string]any{"command": []string{"true"}})
		d := time.Since(start)
		b.StopTimer()
		if res.IsError || !strings.HasPrefix(text, "exit code 0 ") {
			b.Fatalf("first call: %s\n%s", text, srv.stderr)
		}
		if pooled != strings.Contains(srv.stderr.String(), "warm pool") {
			b.Fatalf("pooled %v:\n%s", pooled, srv.stderr)
		}
		_ = cs.Close()
		return d
	}
	firstCall(true) // warm-up: the image, the daemon, the page cache
	firstCall(false)
	var tPool, tCold []time.Duration
	b.ResetTimer()
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		for j := range 2 {
			if (i+j)%2 == 0 {
				tPool = append(tPool, firstCall(true))
			} else {
				tCold = append(tCold, firstCall(false))
			}
		}
	}
	med := func(d []time.Duration) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[len(s)/2]
	}
	mp, mc := med(tPool), med(tCold)
	b.ReportMetric(float64(mp.Microseconds())/1000, "pool-first-call-ms")
	b.ReportMetric(float64(mc.Microseconds())/1000, "cold-first-call-ms")
	b.ReportMetric(float64(mc)/float64(mp), "cold/pool")
	b.Logf("initialize -> first tool call result, medians over %d: warm pool of 2 (filled) %s, no pool (cold open) %s; cold/pool %.2fx",
		b.N, mp.Round(100*time.Microsecond), mc.Round(100*time.Microsecond), float64(mc)/float64(mp))
}

// server is a `sandboxio mcp` process (this test binary as the CLI) whose
// standard input and output the caller connects to when it chooses.
type server struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	stderr *lockedBuffer
}

func startServer(t testing.TB, args ...string) *server {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: exec.Command(exe, append([]string{"mcp"}, args...)...), stderr: &lockedBuffer{}}
	s.cmd.Env = append(os.Environ(), cliChildEnv+"=1", "SANDBOXIO_TEST_RUN_ID="+runID)
	s.cmd.Stderr = s.stderr
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if s.stdout, err = s.cmd.StdoutPipe(); err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return s
}

// waitFor waits until the server's stderr holds text.
func (s *server) waitFor(t testing.TB, text string) {
	t.Helper()
	for deadline := time.Now().Add(90 * time.Second); !strings.Contains(s.stderr.String(), text); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the server never said %q:\n%s", text, s.stderr)
		}
	}
}

// stop closes the server's input (the client disconnects) and waits for it
// to exit, which it does once its sandbox and pool are removed.
func (s *server) stop(t testing.TB) {
	_ = s.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the server: %v\n%s", err, s.stderr)
		}
	case <-time.After(2 * time.Minute):
		_ = s.cmd.Process.Kill()
		t.Errorf("the server did not exit:\n%s", s.stderr)
	}
}
