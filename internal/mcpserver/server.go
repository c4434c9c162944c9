// Package mcpserver serves one open sandbox to an agent host over the Model
// Context Protocol: the tools run, run_code, upload and read_file, each a call
// of the run-time helper (package sandbox), so every call passes the same
// checks, pre-execution hook and audit log as the Go API and the CLI.
// Results are summaries for a model's context (a long stream is kept as a file
// in the sandbox); failures are tool errors naming class, rule and fix; secret
// values are redacted twice. The caller (`sandboxio mcp`) opens and closes the
// sandbox; the server's instructions come from the policy decision alone.
package mcpserver

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
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
	// MaxCalls bounds the tool calls served at once (default
	// DefaultMaxCalls): a call beyond it waits up to CallWait (default
	// DefaultCallWait) for one to end, then fails with Busy. With the
	// bounded capture of each stream, it bounds the server's memory.
	MaxCalls int
	CallWait time.Duration
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
	DefaultMaxCalls = 4
	DefaultCallWait = 10 * time.Second
)

type server struct {
	o     Options
	calls atomic.Int64  // numbers the kept output files
	slots chan struct{} // one per call being served
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
	if o.MaxCalls <= 0 {
		o.MaxCalls = DefaultMaxCalls
	}
	if o.CallWait <= 0 {
		o.CallWait = DefaultCallWait
	}
	s := &server{o: o, slots: make(chan struct{}, o.MaxCalls)}
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

// busyError refuses a call while MaxCalls calls are served.
type busyError struct {
	max  int
	wait time.Duration
}

func (e *busyError) Error() string {
	return fmt.Sprintf("%d calls are running, the most this server serves at once, and none ended within %s", e.max, e.wait)
}

// acquire takes a call's slot, waiting up to CallWait; release gives it back.
func (s *server) acquire(ctx context.Context) (release func(), err error) {
	release = func() { <-s.slots }
	select {
	case s.slots <- struct{}{}:
		return release, nil
	default:
	}
	t := time.NewTimer(s.o.CallWait)
	defer t.Stop()
	select {
	case s.slots <- struct{}{}:
		return release, nil
	case <-t.C:
		return nil, &busyError{max: s.o.MaxCalls, wait: s.o.CallWait}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// ExecResult is the structured content of run and run_code.
type ExecResult struct {
	ExitCode   int    `json:"exit_code"`
	DurationMS int64  `json:"duration_ms"`
	Stdout     Stream `json:"stdout"`
	Stderr     Stream `json:"stderr"`
	// Warnings are the pre-execution hook's advisory findings on the
	// call: it ran, and the model that sent it should know.
	Warnings []WarningInfo `json:"warnings,omitempty"`
}

// WarningInfo is one warning of a call.
type WarningInfo struct {
	Class     string `json:"class"`
	Rule      string `json:"rule,omitempty"`
	Attribute string `json:"attribute,omitempty"`
	Message   string `json:"message"`
	Fix       string `json:"fix,omitempty"`
}

// callWarnings collects the warnings of one call (RunOptions.OnWarning).
type callWarnings struct {
	mu   sync.Mutex
	list []model.Warning
}

func (w *callWarnings) add(x model.Warning) {
	w.mu.Lock()
	w.list = append(w.list, x)
	w.mu.Unlock()
}

// infos returns the warnings, redacted, and the lines the text gives them.
func (s *server) infos(w *callWarnings) ([]WarningInfo, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []WarningInfo
	var b strings.Builder
	for _, x := range w.list {
		out = append(out, WarningInfo{Class: string(x.Class), Rule: s.redact(x.Rule), Attribute: s.redact(x.Attribute),
			Message: s.redact(x.Message), Fix: s.redact(x.Fix)})
		b.WriteString("warning: " + s.redact(x.String()) + "\n")
	}
	return out, b.String()
}

// execCall runs a command with its output captured (see capture), then
// summarizes it and keeps each stream the summary cuts as a file in the
// sandbox. The hook's advisory findings on the call are in the result,
// failed or not.
func (s *server) execCall(ctx context.Context, op string, opts sandbox.RunOptions, run func(sandbox.RunOptions) (sandbox.Result, error)) *mcp.CallToolResult {
	release, err := s.acquire(ctx)
	if err != nil {
		return s.toolError(err)
	}
	defer release()
	n := s.calls.Add(1)
	stdout, stderr := s.newCapture(s.keptPath(n, op, "stdout")), s.newCapture(s.keptPath(n, op, "stderr"))
	warnings := &callWarnings{}
	opts.Stdout, opts.Stderr, opts.OnWarning = stdout, stderr, warnings.add
	res, err := run(opts)
	ws, wtext := s.infos(warnings)
	if err != nil {
		stdout.discard(ctx)
		stderr.discard(ctx)
		r := s.toolError(err)
		if len(ws) > 0 {
			r.StructuredContent.(map[string]any)["warnings"] = ws
			tc := r.Content[0].(*mcp.TextContent)
			tc.Text += "\n" + strings.TrimSuffix(wtext, "\n")
		}
		return r
	}
	out := ExecResult{ExitCode: res.ExitCode, DurationMS: res.Duration.Milliseconds(), Warnings: ws}
	for _, st := range []struct {
		c   *capture
		dst *Stream
	}{{stdout, &out.Stdout}, {stderr, &out.Stderr}} {
		*st.dst = st.c.stream()
		st.dst.Head, st.dst.Tail = s.redact(st.dst.Head), s.redact(st.dst.Tail)
		if st.dst.Omitted == 0 {
			st.c.discard(ctx)
			continue
		}
		if err := st.c.keep(ctx); err != nil {
			st.dst.KeepError = s.redact(err.Error())
		} else {
			st.dst.Path = st.c.base
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "exit code %d (%s)\n", out.ExitCode, res.Duration.Round(time.Millisecond))
	b.WriteString(wtext)
	out.Stdout.render(&b, "stdout")
	out.Stderr.render(&b, "stderr")
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: b.String()}}, StructuredContent: out}
}
