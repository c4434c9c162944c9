// Package mcpserver serves one open sandbox to an agent host over the Model
// Context Protocol: the tools run, run_code, upload and read_file, each a call
// of the run-time helper (package sandbox) on that sandbox, so every call
// passes the same checks, the same pre-execution hook and the same audit log
// as the Go API and the CLI.
//
// Results are written for a model's context: the exit code, and the head and
// tail of each stream with its byte count; when a stream is longer than the
// summary shows, the whole of it is kept as a file in the sandbox and its path
// given, to be read with read_file. Failures are tool errors (isError) whose
// text starts with the error class and whose structured content names the
// class, the rule and the fix. Secret values never leave in a result: the
// helper redacts them from output and errors, and this package redacts every
// string it returns once more.
//
// The server serves one sandbox for one tenant session. It does not open or
// close it: the caller (`sandboxio mcp`) gives a Sandbox that opens at the
// first call that needs it, and closes it when the client disconnects or the
// process is told to stop. What the server tells the host before that (its
// instructions) comes from the policy decision, never from an open sandbox.
package mcpserver

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandboxio/terraform-provider-sandboxio/sandbox"
)

// Sandbox is what the tools call: *sandbox.Sandbox.
type Sandbox interface {
	Run(ctx context.Context, cmd []string, opts sandbox.RunOptions) (sandbox.Result, error)
	RunCode(ctx context.Context, lang, code string, opts sandbox.RunOptions) (sandbox.Result, error)
	Upload(ctx context.Context, path string, content []byte, mode fs.FileMode) error
}

// Options configure a server.
type Options struct {
	Sandbox Sandbox
	// Decision is what the policy decided for the session's sandbox
	// (sandbox.Client.Decide): the instructions say it.
	Decision sandbox.Decision
	// Secrets are the sandbox's secrets: every string a result holds is
	// redacted with them once more before it leaves.
	Secrets sandbox.Secrets
	// Version is the server's version in the MCP handshake.
	Version string
	// Timeout is the bound of a call that gives none (0 inherits the
	// spec's timeout_seconds); Workdir the working directory of one that
	// gives none.
	Timeout time.Duration
	Workdir string
	// OutputDir is the directory in the sandbox where a stream longer than
	// its summary is kept (default DefaultOutputDir).
	OutputDir string
	// HeadBytes and TailBytes bound the beginning and end of each stream a
	// result shows (defaults DefaultHeadBytes, DefaultTailBytes).
	HeadBytes, TailBytes int
}

// Defaults of Options.
const (
	DefaultOutputDir = "/tmp/sandboxio-mcp"
	DefaultHeadBytes = 2048
	DefaultTailBytes = 2048
	// MaxReadBytes bounds what one read_file call returns, DefaultReadBytes
	// is what it returns when the call does not say.
	MaxReadBytes     = 1 << 20
	DefaultReadBytes = 64 << 10
	// MaxUploadBytes bounds one upload's content, decoded: base64-encoded
	// in a request it stays under MaxMessageBytes.
	MaxUploadBytes = 8 << 20
	// MaxMessageBytes bounds one request from the client, on either
	// transport (the Go SDK's stdio frame limit).
	MaxMessageBytes = 16 << 20
)

type server struct {
	o     Options
	calls atomic.Int64 // numbers the kept output files
}

// New returns an MCP server with the four tools, bound to o.Sandbox.
func New(o Options) *mcp.Server {
	if o.OutputDir == "" {
		o.OutputDir = DefaultOutputDir
	}
	if o.HeadBytes <= 0 {
		o.HeadBytes = DefaultHeadBytes
	}
	if o.TailBytes <= 0 {
		o.TailBytes = DefaultTailBytes
	}
	s := &server{o: o}
	srv := mcp.NewServer(&mcp.Implementation{Name: "sandboxio", Title: "sandboxio sandbox", Version: o.Version},
		&mcp.ServerOptions{Instructions: s.instructions()})
	s.addTools(srv)
	return srv
}

// instructions tell the host what the sandbox is: whose, how isolated, and
// what its network policy allows. They are sent before the sandbox is open,
// so they say only what the policy decided and the open enforces.
func (s *server) instructions() string {
	d := s.o.Decision
	egress := d.Network.Egress
	if egress == "" {
		egress = "deny"
	}
	if len(d.Network.Allow) > 0 {
		egress += " except " + strings.Join(d.Network.Allow, ", ")
	}
	tier := "isolation tier " + string(d.Tier)
	if d.Tier == "" {
		tier = "isolation tier known once it is open"
	}
	return s.redact(fmt.Sprintf(`Runs commands and programs in one sandbox (%s backend, %s) for tenant %q session %q.
The sandbox is opened at the first call that needs it; files persist across calls until the session ends,
and the sandbox is removed when the client disconnects.
Network egress: %s. Each call is bounded by %s and passes the policy's pre-execution checks.
Results show the exit code and the head and tail of each stream; a longer stream is kept in full
as a file under %s in the sandbox, and the result names it: read it with read_file.
Prefer writing a program that does the work and prints a short summary over many small calls.`,
		d.Backend, tier, d.TenantID, d.SessionID, egress, d.CallTimeout, s.o.OutputDir))
}

// redact replaces every secret value in text.
func (s *server) redact(text string) string { return s.o.Secrets.RedactString(text) }

// callOptions are the run options of one call.
func (s *server) callOptions(timeoutSeconds int, workdir string, stdin []byte) sandbox.RunOptions {
	o := sandbox.RunOptions{Timeout: s.o.Timeout, Workdir: s.o.Workdir, Stdin: stdin}
	if timeoutSeconds > 0 {
		o.Timeout = time.Duration(timeoutSeconds) * time.Second
	}
	if workdir != "" {
		o.Workdir = workdir
	}
	return o
}

// ExecResult is the structured content of run and run_code.
type ExecResult struct {
	ExitCode   int    `json:"exit_code"`
	DurationMS int64  `json:"duration_ms"`
	Stdout     Stream `json:"stdout"`
	Stderr     Stream `json:"stderr"`
}

// execResult summarizes a command that ran, and keeps each stream the
// summary cuts as a file in the sandbox.
func (s *server) execResult(ctx context.Context, op string, res sandbox.Result) *mcp.CallToolResult {
	n := s.calls.Add(1)
	out := ExecResult{ExitCode: res.ExitCode, DurationMS: res.Duration.Milliseconds()}
	for _, st := range []struct {
		name string
		data []byte
		dst  *Stream
	}{{"stdout", res.Stdout, &out.Stdout}, {"stderr", res.Stderr, &out.Stderr}} {
		data := s.o.Secrets.Redact(st.data)
		*st.dst = summarize(data, s.o.HeadBytes, s.o.TailBytes)
		st.dst.Head, st.dst.Tail = s.redact(st.dst.Head), s.redact(st.dst.Tail)
		if st.dst.Omitted == 0 {
			continue
		}
		p := path.Join(s.o.OutputDir, fmt.Sprintf("%04d-%s.%s", n, op, st.name))
		if err := s.o.Sandbox.Upload(ctx, p, data, 0o600); err != nil {
			st.dst.KeepError = s.redact(err.Error())
		} else {
			st.dst.Path = p
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "exit code %d (%s)\n", out.ExitCode, res.Duration.Round(time.Millisecond))
	out.Stdout.render(&b, "stdout")
	out.Stderr.render(&b, "stderr")
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: b.String()}}, StructuredContent: out}
}
