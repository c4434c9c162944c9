package modal

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	modalsdk "github.com/modal-labs/libmodal/modal-go"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// What Info reports of the caps Modal does not take per sandbox (the policy
// refuses any other value than the default for them).
const (
	diskNote = "not settable per sandbox on Modal: its ephemeral disk is Modal's, disk_mb stays at the default"
	pidsNote = "no process ceiling per sandbox on Modal (gVisor); pids stays at the default"
)

// maxOutput is the cap on what one command may print on each stream.
const maxOutput = 64 << 20

type sandbox struct {
	b           *backend
	sb          *modalsdk.Sandbox
	id          string
	labels      map[string]string
	created     time.Time
	expires     time.Time
	callTimeout time.Duration
	secrets     map[string]string
	onWarning   func(model.Warning)

	mu     sync.Mutex
	closed bool
	// settled is when the last timed-out command has had time to be killed
	// on Modal's side (see settle).
	settled time.Time
}

// killSettle is how long after a command's Modal-side timeout the next
// command on the sandbox waits, so that Modal's kill of the timed-out one
// has happened before it runs. The SDK cannot confirm the kill: its wait
// and output streams end at the same deadline, and the command router has
// no call that reports or kills a command after it.
const killSettle = 3 * time.Second

// settle waits until a timed-out command has had time to be killed, or ctx
// ends.
func (s *sandbox) settle(ctx context.Context) error {
	s.mu.Lock()
	wait := time.Until(s.settled)
	s.mu.Unlock()
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// String and GoString keep the secret values it holds out of any
// formatted output.
func (s *sandbox) String() string   { return "modal sandbox " + s.id }
func (s *sandbox) GoString() string { return s.String() }

func (s *sandbox) ID() string { return s.id }

func (s *sandbox) Info() backends.Info {
	return backends.Info{ID: s.id, Backend: Name, Tier: model.TierGVisor, Labels: maps.Clone(s.labels), Created: s.created,
		Expires: s.expires, DiskCapStrategy: diskNote, PidsCapStrategy: pidsNote, Running: !s.isClosed() && time.Now().Before(s.expires)}
}

func (s *sandbox) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Run runs a command through Modal's command router. Its timeout is sent
// with the command (whole seconds, rounded up), so Modal kills it there; the
// call itself returns ExecutionTimeout at the exact deadline and never
// partial output.
func (s *sandbox) Run(ctx context.Context, cmd []string, opts backends.RunOptions) (backends.Result, error) {
	if len(cmd) == 0 {
		return backends.Result{}, &model.Error{Class: model.ErrConfiguration, Attribute: "command", Message: "no command", Fix: "give a command to run"}
	}
	timeout := model.EffectiveTimeout(opts.Timeout, s.callTimeout)
	start := time.Now()
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if len(opts.Stdin) > 0 {
		// Modal streams input to a running command; it is uploaded here
		// first and redirected, so that it is complete when the command
		// starts (and a command that does not read it cannot block).
		file := "/tmp/.sandboxio-stdin-" + randomHex(6)
		if err := s.Upload(dctx, file, opts.Stdin, 0o600); err != nil {
			return backends.Result{}, s.runErr(ctx, dctx, timeout, err)
		}
		cmd = append([]string{"sh", "-c", `f=$0; "$@" <"$f"; rc=$?; rm -f "$f"; exit $rc`, file}, cmd...)
	}
	if err := s.settle(dctx); err != nil {
		return backends.Result{}, s.runErr(ctx, dctx, timeout, err)
	}
	params := &modalsdk.SandboxExecParams{Timeout: time.Duration(math.Ceil(timeout.Seconds())) * time.Second, Env: opts.Env, Workdir: opts.Workdir}
	execStart := time.Now()
	proc, err := s.sb.Exec(dctx, cmd, params)
	if err != nil {
		return backends.Result{}, s.runErr(ctx, dctx, timeout, err)
	}
	out := newCollector(opts.Stdout, opts.Stderr)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); out.read(proc.Stdout, false) }()
	go func() { defer wg.Done(); out.read(proc.Stderr, true) }()
	type waited struct {
		code int
		err  error
	}
	wc := make(chan waited, 1)
	go func() { c, err := proc.Wait(dctx); wc <- waited{c, err} }()
	var w waited
	select {
	case w = <-wc:
	case <-dctx.Done():
		w.err = dctx.Err()
	}
	if w.err == nil {
		wg.Wait()
	} else {
		_ = proc.Stdout.Close()
		_ = proc.Stderr.Close()
		wg.Wait()
	}
	out.stop()
	if w.err != nil {
		err := s.runErr(ctx, dctx, timeout, w.err)
		if errors.Is(err, model.ErrExecutionTimeout) {
			s.mu.Lock()
			s.settled = execStart.Add(params.Timeout + killSettle)
			s.mu.Unlock()
		}
		return backends.Result{}, err
	}
	if out.over {
		return backends.Result{}, &model.Error{Class: model.ErrResourceLimitExceeded, Limit: model.LimitOutput,
			Message: fmt.Sprintf("the command printed more than %d MiB on one stream", maxOutput>>20), Fix: "print less, or write to a file and read it in parts"}
	}
	return backends.Result{ExitCode: w.code, Stdout: out.stdout.Bytes(), Stderr: out.stderr.Bytes(), Duration: time.Since(start)}, nil
}

// runErr classifies a failed command: past its deadline it is
// ExecutionTimeout; a sandbox that has ended (its lifetime, a terminate) is
// SandboxGone; the rest is the vendor's error, classified.
func (s *sandbox) runErr(ctx, dctx context.Context, timeout time.Duration, err error) error {
	var te modalsdk.ExecTimeoutError
	if ctx.Err() == nil && (errors.As(err, &te) || errors.Is(dctx.Err(), context.DeadlineExceeded)) {
		return &model.Error{Class: model.ErrExecutionTimeout, Message: fmt.Sprintf("the command did not finish within %s; Modal kills it", timeout),
			Fix: "raise the call's timeout (at most timeout_seconds), or make the command faster"}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	// Modal answering NOT_FOUND for the sandbox's task or command means
	// the sandbox is no more.
	if isNotFound(err) || s.gone(context.WithoutCancel(ctx)) {
		return &model.Error{Class: model.ErrSandboxGone, Message: "the Modal sandbox " + s.id + " has ended (its lifetime passed or it was terminated)",
			Fix: backends.GoneFix(s.expires, time.Now())}
	}
	return classify("exec", redact(err, s.secrets))
}

// gone asks Modal whether the sandbox has ended.
func (s *sandbox) gone(ctx context.Context) bool {
	if s.isClosed() {
		return true
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	code, err := s.sb.Poll(pctx)
	return (err == nil && code != nil) || isNotFound(err)
}

// collector gathers a command's two streams, or forwards them to the
// caller's writers from one goroutine, and caps each.
type collector struct {
	mu             sync.Mutex
	stdout, stderr bytes.Buffer
	w              [2]io.Writer
	ch             chan chunk
	done           chan struct{}
	over           bool
}

type chunk struct {
	b   []byte
	err bool
}

func newCollector(stdout, stderr io.Writer) *collector {
	c := &collector{w: [2]io.Writer{stdout, stderr}}
	if stdout != nil || stderr != nil {
		c.ch, c.done = make(chan chunk, 16), make(chan struct{})
		go func() {
			defer close(c.done)
			for k := range c.ch {
				if w := c.w[btoi(k.err)]; w != nil {
					_, _ = w.Write(k.b)
				}
			}
		}()
	}
	return c
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (c *collector) read(r io.Reader, isErr bool) {
	buf := make([]byte, 32<<10)
	total := 0
	for {
		n, err := r.Read(buf)
		if n > 0 {
			total += n
			if total > maxOutput {
				c.mu.Lock()
				c.over = true
				c.mu.Unlock()
				return
			}
			c.mu.Lock()
			if c.w[btoi(isErr)] != nil {
				c.ch <- chunk{append([]byte(nil), buf[:n]...), isErr}
			} else if isErr {
				c.stderr.Write(buf[:n])
			} else {
				c.stdout.Write(buf[:n])
			}
			c.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// stop waits until every forwarded chunk is written: nothing is written
// after Run returns.
func (c *collector) stop() {
	if c.ch != nil {
		close(c.ch)
		<-c.done
	}
}

// interpreters maps RunCode languages to an interpreter that runs a file.
var interpreters = map[string]string{
	"python": "python3", "python3": "python3", "sh": "sh", "shell": "sh", "bash": "bash",
	"node": "node", "javascript": "node", "js": "node", "ruby": "ruby",
}

// RunCode uploads the program to a file and runs it with the language's
// interpreter from the image.
func (s *sandbox) RunCode(ctx context.Context, lang string, code string, opts backends.RunOptions) (backends.Result, error) {
	interp, ok := interpreters[strings.ToLower(lang)]
	if !ok {
		return backends.Result{}, &model.Error{Class: model.ErrConfiguration, Attribute: "lang",
			Message: fmt.Sprintf("language %q is not supported", lang), Fix: "use one of " + strings.Join(slices.Sorted(maps.Keys(interpreters)), ", ")}
	}
	file := "/tmp/sandboxio-code-" + randomHex(6)
	if err := s.Upload(ctx, file, []byte(code), 0o600); err != nil {
		return backends.Result{}, err
	}
	return s.Run(ctx, []string{interp, file}, opts)
}

// Upload writes a file through Modal's filesystem API, then sets its mode.
func (s *sandbox) Upload(ctx context.Context, p string, content []byte, mode int64) error {
	if !path.IsAbs(p) || strings.HasSuffix(p, "/") {
		return &model.Error{Class: model.ErrConfiguration, Attribute: "path",
			Message: fmt.Sprintf("%q is not an absolute file path", p), Fix: "upload to an absolute path such as /work/data.csv"}
	}
	p = path.Clean(p)
	if mode <= 0 {
		mode = 0o644
	}
	f, err := s.sb.Open(ctx, p, "w")
	if err == nil {
		_, err = f.Write(content)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		if isNotFound(err) || s.gone(context.WithoutCancel(ctx)) {
			return &model.Error{Class: model.ErrSandboxGone, Message: "the Modal sandbox " + s.id + " has ended", Fix: "open a new sandbox"}
		}
		return classify("upload", redact(err, s.secrets))
	}
	if mode == 0o644 {
		return nil
	}
	res, err := s.Run(ctx, []string{"chmod", fmt.Sprintf("%o", mode&0o7777), p}, backends.RunOptions{})
	if err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("upload: chmod: %s", strings.TrimSpace(string(res.Stderr)))
	}
	return nil
}

// Kill terminates the sandbox; terminating one that has ended is no error.
func (s *sandbox) Kill(ctx context.Context) error {
	_, err := s.sb.Terminate(ctx, nil)
	var closed modalsdk.ClientClosedError
	if err != nil && !isNotFound(err) && !errors.As(err, &closed) {
		return classify("terminate", err)
	}
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return nil
}

// Close kills the sandbox within the teardown grace, shielded from ctx's
// cancellation; past the grace it reports the sandbox orphaned (its
// lifetime still ends it on Modal's side).
func (s *sandbox) Close(ctx context.Context) error {
	if s.isClosed() {
		return nil
	}
	return backends.CloseWithin(ctx, model.TeardownGrace, s.Kill, model.Warning{SandboxID: s.id, Labels: s.labels,
		Message: "the Modal sandbox could not be confirmed terminated; Modal ends it when its lifetime passes",
		Fix:     "run `sandboxio reap`, or terminate it in Modal's dashboard"}, s.onWarning)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
