package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/mcpserver"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
	"github.com/sandboxio/terraform-provider-sandboxio/sandbox"
)

// mcpExitCodesHelp ends the help of mcp.
const mcpExitCodesHelp = `Exit codes:
  0      the client disconnected; the sandbox (if one was opened) was removed
  2      usage or input error (bad flags, unreadable spec, a non-loopback --http address)
  64-70  refused before serving, one code per error class, as for run (see sandboxio
         run --help); nothing is left provisioned. Also at the end of a session in
         which every open failed (each failure was that tool call's error): the
         class of the last one
  130    interrupted (SIGINT, SIGTERM); the sandbox was removed`

// mcpFlags are the flags of mcp beside the run flags.
type mcpFlags struct {
	http        string
	idleTimeout time.Duration
	head, tail  int
	elicit      bool
	tokenFile   string
	noToken     bool
	maxCalls    int
	callWait    time.Duration
}

func init() {
	register(&command{
		name:    "mcp",
		summary: "serve a tenant session's sandbox to an agent host over MCP (stdio, or HTTP on loopback)",
		usage:   "mcp --spec FILE --tenant ID --session ID [--http 127.0.0.1:PORT --token-file FILE] [flags]",
		help: `Serves one sandbox, for one tenant and session, to an agent host over the Model Context
Protocol: on standard input and output, or streamable HTTP on a loopback address with a
bearer token. Tools: run, run_code, upload, read_file; each call is checked as run checks it.`,
		example: `sandboxio mcp --spec spec.json --spec-sha256 "$(terraform output -raw tenant_spec_sha256)" \
    --tenant acme --session s-42 --audit audit.jsonl
sandboxio mcp --spec spec.json --tenant acme --session s-42 --http 127.0.0.1:8750 --token-file token`,
		briefFlagsOf: "run",
		exitCodes:    mcpExitCodesHelp,
		setup: func(fs *pflag.FlagSet) runFunc {
			f := &runFlags{commandName: "mcp", keepsPool: true}
			f.declare(fs)
			m := &mcpFlags{}
			fs.StringVar(&m.http, "http", "", "serve HTTP on this loopback `ADDR`ESS (127.0.0.1:PORT, [::1]:PORT, localhost:PORT)")
			fs.DurationVar(&m.idleTimeout, "idle-timeout", 10*time.Minute, "with --http: end the session, removing the sandbox, after this long idle")
			fs.IntVar(&m.head, "head", mcpserver.DefaultHeadBytes, "bytes of the beginning of each stream a result shows")
			fs.IntVar(&m.tail, "tail", mcpserver.DefaultTailBytes, "bytes of the end of each stream a result shows")
			fs.StringVar(&m.tokenFile, "token-file", "", "with --http: require the bearer token in `FILE` (this user's, mode 0600)")
			fs.BoolVar(&m.noToken, "insecure-no-token", false, "with --http: no token; any local process can then run code in the sandbox")
			fs.IntVar(&m.maxCalls, "max-calls", mcpserver.DefaultMaxCalls, "tool calls served at once; one more waits --call-wait, then fails with Busy")
			fs.DurationVar(&m.callWait, "call-wait", mcpserver.DefaultCallWait, "how long a call beyond --max-calls waits before it fails with Busy")
			fs.BoolVar(&m.elicit, "approve-by-elicitation", false, "ask the client's user (MCP elicitation) about calls that need approval")
			return func(ctx context.Context, e *env, args []string) int {
				return m.run(ctx, e, f, args)
			}
		},
	})
}

func (m *mcpFlags) run(ctx context.Context, e *env, f *runFlags, args []string) int {
	usage := func(format string, a ...any) int {
		fmt.Fprintf(e.stderr, "sandboxio mcp: "+format+"\n", a...)
		return exitUsage
	}
	switch {
	case len(args) > 0:
		return usage("unexpected argument %q: the tools' commands come from the MCP client", args[0])
	case m.head <= 0 || m.tail <= 0:
		return usage("--head and --tail must be positive")
	case m.idleTimeout <= 0:
		return usage("--idle-timeout must be positive")
	case m.maxCalls <= 0 || m.callWait <= 0:
		return usage("--max-calls and --call-wait must be positive")
	case m.http == "" && f.spec == "-":
		return usage("--spec - and the MCP stream cannot both read standard input: pass the spec as a file")
	case m.http == "" && (m.tokenFile != "" || m.noToken):
		return usage("--token-file and --insecure-no-token apply to --http only: on stdio the host that starts the server is its only client")
	case m.http == "" && f.audit == "-":
		return usage("--audit - would write audit records into the MCP stream on standard output: pass a file")
	}
	var ln net.Listener
	var auth *bearerToken
	if m.http != "" {
		// Before anything is opened: a refused address or token provisions nothing.
		var err error
		if ln, err = listenLoopback(ctx, m.http); err != nil {
			return usage("--http: %v", err)
		}
		defer ln.Close()
		if auth, err = m.bearer(e); err != nil {
			return usage("%v", err)
		}
	} else {
		f.usesStdin = true // the MCP stream: --spec - is refused
	}
	if code := f.scrubSecrets(e); code != 0 {
		return code
	}
	approval := &mcpserver.Approval{Rules: f.approve, Elicit: m.elicit}
	f.approver = approval
	s, code := f.prepare(ctx, e)
	if s == nil {
		return code
	}
	defer s.close()
	approval.Secrets = s.req.Secrets
	// The policy decides now, before serving: a refusal it knows ends the
	// server with its exit code, as an open would. The sandbox is opened
	// at the first tool call that needs it, when a warm sandbox may be
	// ready.
	dec, err := s.client.Decide(ctx, s.req)
	if err != nil {
		fmt.Fprintf(e.stderr, "sandboxio mcp: %s\n", classLine(err))
		return exitFor(err)
	}
	lz := &lazySandbox{client: s.client, req: s.req, ctx: ctx, stderr: e.stderr, ended: make(chan struct{})}
	srv := mcpserver.New(mcpserver.Options{Sandbox: lz, Decision: dec, Secrets: s.req.Secrets, Version: version,
		Timeout: f.timeout, Workdir: f.workdir, HeadBytes: m.head, TailBytes: m.tail,
		MaxCalls: m.maxCalls, CallWait: m.callWait})
	what := fmt.Sprintf("tenant %s session %s (%s backend; the sandbox opens at the first tool call", dec.TenantID, dec.SessionID, dec.Backend)
	if dec.Pooled {
		what += ", from the warm pool when one is ready"
	}
	what += ")"
	if ln != nil {
		err = m.serveHTTP(ctx, e, ln, srv, auth, what)
	} else {
		fmt.Fprintf(e.stderr, "sandboxio mcp: serving %s over stdio\n", what)
		err = srv.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(e.stdin), Writer: nopWriteCloser{e.stdout}, MaxLineLength: mcpserver.MaxMessageBytes})
		if ctx.Err() == nil {
			err = nil // the client closed the stream: the session is over
		}
	}
	opened, openErr, closeErr := lz.end()
	if ctx.Err() != nil {
		fmt.Fprintf(e.stderr, "sandboxio mcp: interrupted; %s\n", removed(opened))
		return exitInterrupted
	}
	var oe *sandbox.OrphanedError
	switch {
	case closeErr != nil && errors.As(closeErr, &oe):
		return exitOK // warned on stderr and audited; the lifetime and reap remove it
	case closeErr != nil:
		err = closeErr
	case err == nil && !opened && openErr != nil:
		// Every open failed, and each failure was the tool call's error.
		err = openErr
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "sandboxio mcp: %s\n", classLine(err))
		return exitFor(err)
	}
	fmt.Fprintf(e.stderr, "sandboxio mcp: the client disconnected; %s\n", removed(opened))
	return exitOK
}

func removed(opened bool) string {
	if opened {
		return "the sandbox was removed"
	}
	return "no sandbox was opened"
}

// lazySandbox is the session's sandbox, opened at the first call that needs
// it (from the warm pool when one is ready, cold otherwise) and held open by
// Client.With until the session ends, so that it is closed on every path:
// the client disconnecting, and ctx ending (SIGTERM), which closes it at
// once even while a call runs. Concurrent first calls open one sandbox: the
// others wait for it. An open that fails is that call's error; the next call
// tries again.
type lazySandbox struct {
	client *sandbox.Client
	req    sandbox.Request
	ctx    context.Context // the server's: the sandbox lives until it ends
	stderr io.Writer

	mu      sync.Mutex
	sb      *sandbox.Sandbox
	ended   chan struct{} // closed by end: With closes the sandbox
	stopped bool
	done    chan struct{} // closed when With returned, with err set
	err     error         // With's: a close error
	openErr error         // the last failed open
}

// get returns the session's sandbox, opening it first if need be.
func (l *lazySandbox) get() (*sandbox.Sandbox, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.sb != nil:
		return l.sb, nil
	case l.stopped:
		return nil, &model.Error{Class: model.ErrSandboxGone, Message: "the MCP session is over", Fix: "start the server again"}
	}
	opened := make(chan *sandbox.Sandbox, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.err = l.client.With(l.ctx, l.req, func(_ context.Context, sb *sandbox.Sandbox) error {
			opened <- sb
			<-l.ended
			return nil
		})
	}()
	select {
	case sb := <-opened:
		l.sb, l.done = sb, done
		fmt.Fprintf(l.stderr, "sandboxio mcp: opened %s\n", sb)
		return sb, nil
	case <-done:
		l.openErr = l.err
		fmt.Fprintf(l.stderr, "sandboxio mcp: the sandbox could not be opened: %s\n", classLine(l.err))
		return nil, l.err
	}
}

// end ends the session: the sandbox, if one was opened, is closed. It
// reports whether one was, the last failed open, and the close's error.
func (l *lazySandbox) end() (opened bool, openErr, closeErr error) {
	l.mu.Lock()
	l.stopped = true
	close(l.ended)
	done := l.done
	l.mu.Unlock()
	if done == nil {
		return false, l.openErr, nil
	}
	<-done
	return true, nil, l.err
}

func (l *lazySandbox) Run(ctx context.Context, cmd []string, opts sandbox.RunOptions) (sandbox.Result, error) {
	sb, err := l.get()
	if err != nil {
		return sandbox.Result{}, err
	}
	return sb.Run(ctx, cmd, opts)
}

func (l *lazySandbox) RunCode(ctx context.Context, lang, code string, opts sandbox.RunOptions) (sandbox.Result, error) {
	sb, err := l.get()
	if err != nil {
		return sandbox.Result{}, err
	}
	return sb.RunCode(ctx, lang, code, opts)
}

func (l *lazySandbox) Upload(ctx context.Context, path string, content []byte, mode fs.FileMode) error {
	sb, err := l.get()
	if err != nil {
		return err
	}
	return sb.Upload(ctx, path, content, mode)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// listenLoopback listens on addr, which must name a loopback address: the
// server runs code for whoever connects, so it is never reachable from
// another host. A name is checked by what it resolves to, and the listener
// by the address it got.
func listenLoopback(ctx context.Context, addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%q is not HOST:PORT (e.g. 127.0.0.1:8765)", addr)
	}
	if host == "" {
		return nil, fmt.Errorf("%q listens on every interface; give a loopback address, e.g. 127.0.0.1%s", addr, addr)
	}
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil || len(ips) == 0 {
		return nil, fmt.Errorf("%q does not resolve: give a loopback address, e.g. 127.0.0.1:8765", host)
	}
	for _, ip := range ips {
		if !ip.IP.IsLoopback() {
			return nil, fmt.Errorf("%s is not a loopback address (%s): sandboxio mcp serves this host only; give 127.0.0.1, ::1 or localhost", host, ip.IP)
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if a, ok := ln.Addr().(*net.TCPAddr); !ok || !a.IP.IsLoopback() {
		_ = ln.Close()
		return nil, fmt.Errorf("listening on %s, which is not a loopback address", ln.Addr())
	}
	return ln, nil
}
