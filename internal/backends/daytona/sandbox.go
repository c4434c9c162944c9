package daytona

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"mime/multipart"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/vendorapi"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

type sandbox struct {
	b         *backend
	id        string
	toolbox   *vendorapi.Client
	labels    map[string]string
	created   time.Time
	expires   time.Time
	call      time.Duration
	onWarning func(model.Warning)

	// pending are the session deletions of finished and timed-out
	// commands (a deletion kills what the command left running): the call
	// returns at once, the next call waits for them, and Kill cancels them
	// (deleting the sandbox kills everything).
	pending  pendingSet
	bg       context.Context
	cancelBg context.CancelFunc

	mu     sync.Mutex
	gone   error
	timer  *time.Timer
	closed bool
}

func newSandbox(b *backend, d sandboxDTO, s model.Spec, life time.Duration, onWarning func(model.Warning), _ map[string]string) *sandbox {
	tb := *b.api.BaseURL
	if u, err := url.Parse(strings.TrimRight(d.ToolboxProxyURL, "/")); err == nil && u.Host != "" {
		tb = *u
	}
	tb.Path = strings.TrimRight(tb.Path, "/") + "/" + url.PathEscape(d.ID)
	tc := *b.api
	tc.BaseURL = &tb
	call, _, _ := model.Durations(s.TimeoutSeconds, s.LifetimeSeconds)
	sb := &sandbox{b: b, id: d.ID, toolbox: &tc, labels: maps.Clone(d.Labels), created: time.Now(),
		expires: time.Now().Add(life), call: call, onWarning: onWarning}
	sb.bg, sb.cancelBg = context.WithCancel(context.Background())
	// Daytona's own bound is an idle one (autoStopInterval); while this
	// process runs, the lifetime is also a deadline.
	sb.timer = time.AfterFunc(life, func() {
		sb.markGone("its lifetime ended")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = sb.Kill(ctx)
	})
	return sb
}

// waitStarted polls until Daytona reports the sandbox started.
func (s *sandbox) waitStarted(ctx context.Context, d sandboxDTO) error {
	for wait := 100 * time.Millisecond; d.State != "started"; wait = min(wait*2, time.Second) {
		switch d.State {
		case "error", "build_failed", "destroyed", "destroying":
			return fmt.Errorf("the Daytona sandbox %s is %s: %s", s.id, d.State, d.ErrorReason)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		if _, err := s.b.api.Do(ctx, vendorapi.Request{Op: "get sandbox", Method: http.MethodGet, Path: "/sandbox/" + url.PathEscape(s.id), Sandbox: true}, &d); err != nil {
			return err
		}
	}
	return nil
}

func (s *sandbox) ID() string { return s.id }

func (s *sandbox) Info() backends.Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	return backends.Info{ID: s.id, Backend: Name, Tier: model.TierUnknown, Labels: maps.Clone(s.labels),
		Created: s.created, Expires: s.expires, Running: s.gone == nil}
}

func (s *sandbox) markGone(why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone == nil {
		s.gone = &model.Error{Class: model.ErrSandboxGone, Message: "the Daytona sandbox is gone: " + why,
			Fix: backends.GoneFix(s.expires, time.Now())}
	}
}

func (s *sandbox) goneErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gone
}

func quote(v string) string { return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'" }

// command is the shell line a session runs: workdir, env, stdin file, argv.
func command(argv []string, opts backends.RunOptions, stdinPath string) string {
	var b strings.Builder
	if opts.Workdir != "" {
		b.WriteString("cd " + quote(opts.Workdir) + " && ")
	}
	if len(opts.Env) > 0 {
		b.WriteString("env")
		keys := make([]string, 0, len(opts.Env))
		for k := range opts.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			b.WriteString(" " + quote(k+"="+opts.Env[k]))
		}
		b.WriteString(" ")
	}
	for i, a := range argv {
		if i > 0 {
			b.WriteString(" ")
		}
		b.WriteString(quote(a))
	}
	if stdinPath != "" {
		b.WriteString(" < " + quote(stdinPath))
	} else {
		b.WriteString(" < /dev/null")
	}
	return b.String()
}

// Run runs argv in a session of its own: a timeout deletes the session,
// which kills the command and what it started.
func (s *sandbox) Run(ctx context.Context, argv []string, opts backends.RunOptions) (backends.Result, error) {
	s.pending.wait()
	if err := s.goneErr(); err != nil {
		return backends.Result{}, err
	}
	if len(argv) == 0 {
		return backends.Result{}, &model.Error{Class: model.ErrConfiguration, Attribute: "command", Message: "no command", Fix: "pass a command"}
	}
	timeout := opts.Timeout
	if timeout <= 0 || timeout > s.call {
		timeout = s.call
	}
	start := time.Now()
	sid := "sandboxio-" + nonce()
	stdinPath := ""
	if opts.Stdin != nil {
		stdinPath = "/tmp/." + sid + ".stdin"
		if err := s.Upload(ctx, stdinPath, opts.Stdin, 0o600); err != nil {
			return backends.Result{}, err
		}
	}
	if _, err := s.toolbox.Do(ctx, vendorapi.Request{Op: "create session", Method: http.MethodPost, Path: "/process/session",
		JSON: map[string]string{"sessionId": sid}, Sandbox: true}, nil); err != nil {
		return backends.Result{}, s.runErr(err)
	}
	defer func() {
		done := s.pending.add()
		go func() { defer done(); s.deleteSession(s.bg, sid) }()
	}()
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var out struct {
		ExitCode *int   `json:"exitCode"`
		Stdout   string `json:"stdout"`
		Stderr   string `json:"stderr"`
	}
	_, err := s.toolbox.Do(rctx, vendorapi.Request{Op: "run command", Method: http.MethodPost, Path: "/process/session/" + sid + "/exec",
		JSON: map[string]any{"command": command(argv, opts, stdinPath), "runAsync": false}, Sandbox: true}, &out)
	if g := s.goneErr(); err != nil && g != nil {
		return backends.Result{}, g // the lifetime ended (or Kill) while it ran
	}
	switch {
	case err != nil && ctx.Err() == nil && rctx.Err() != nil:
		// Deleting the session (deferred) kills the command; the next call
		// on this sandbox waits for it, this one returns now.
		return backends.Result{}, &model.Error{Class: model.ErrExecutionTimeout, Attribute: "timeout_seconds",
			Message: fmt.Sprintf("the command ran longer than %s and was killed", timeout), Fix: "raise the call timeout (up to timeout_seconds), or make the command faster"}
	case err != nil:
		return backends.Result{}, s.runErr(err)
	case out.ExitCode == nil:
		return backends.Result{}, fmt.Errorf("run: Daytona reported no exit code")
	}
	res := backends.Result{ExitCode: *out.ExitCode, Stdout: []byte(out.Stdout), Stderr: []byte(out.Stderr), Duration: time.Since(start)}
	if opts.Stdout != nil {
		_, _ = opts.Stdout.Write(res.Stdout)
		res.Stdout = nil
	}
	if opts.Stderr != nil {
		_, _ = opts.Stderr.Write(res.Stderr)
		res.Stderr = nil
	}
	return res, nil
}

// pendingSet is a set of background calls that later calls wait for; unlike
// a WaitGroup, adding while another goroutine waits is allowed.
type pendingSet struct {
	mu    sync.Mutex
	calls []chan struct{}
}

// add registers a call; the returned func marks it done.
func (p *pendingSet) add() func() {
	c := make(chan struct{})
	p.mu.Lock()
	p.calls = append(p.calls, c)
	p.mu.Unlock()
	return func() { close(c) }
}

// wait waits for the calls registered so far, and forgets the finished.
func (p *pendingSet) wait() {
	p.mu.Lock()
	calls := slices.Clone(p.calls)
	p.mu.Unlock()
	for _, c := range calls {
		<-c
	}
	p.mu.Lock()
	p.calls = slices.DeleteFunc(p.calls, func(c chan struct{}) bool {
		select {
		case <-c:
			return true
		default:
			return false
		}
	})
	p.mu.Unlock()
}

// deleteSession kills what runs in the session; bounded, and cancelled
// only by Kill.
func (s *sandbox) deleteSession(ctx context.Context, sid string) {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, _ = s.toolbox.Do(dctx, vendorapi.Request{Op: "delete session", Method: http.MethodDelete, Path: "/process/session/" + sid, Sandbox: true}, nil)
}

func (s *sandbox) runErr(err error) error {
	if g := s.goneErr(); g != nil {
		return g
	}
	var me *model.Error
	if errors.As(err, &me) && me.Class == model.ErrSandboxGone {
		s.markGone("Daytona no longer has it (stopped after its idle limit, or deleted)")
	}
	return fmt.Errorf("run: %w", err)
}

var interpreters = map[string][]string{"sh": {"sh", "-s"}, "shell": {"sh", "-s"}, "bash": {"bash", "-s"},
	"python": {"python3", "-"}, "python3": {"python3", "-"}, "node": {"node", "-"}, "javascript": {"node", "-"}}

// RunCode feeds code to the language's interpreter on stdin.
func (s *sandbox) RunCode(ctx context.Context, lang, code string, opts backends.RunOptions) (backends.Result, error) {
	argv, ok := interpreters[strings.ToLower(lang)]
	if !ok {
		return backends.Result{}, &model.Error{Class: model.ErrConfiguration, Attribute: "lang",
			Message: fmt.Sprintf("language %q is not supported", lang), Fix: "use sh, bash, python or node"}
	}
	opts.Stdin = []byte(code)
	return s.Run(ctx, argv, opts)
}

// Upload writes a file through the toolbox's bulk upload, then sets its mode.
func (s *sandbox) Upload(ctx context.Context, p string, content []byte, mode int64) error {
	if err := s.goneErr(); err != nil {
		return err
	}
	if !strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") {
		return &model.Error{Class: model.ErrConfiguration, Attribute: "path",
			Message: fmt.Sprintf("%q is not an absolute file path", p), Fix: "upload to an absolute path such as /tmp/data.csv"}
	}
	if mode <= 0 {
		mode = 0o644
	}
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	_ = mw.WriteField("files[0].path", p)
	fw, _ := mw.CreateFormFile("files[0].file", p)
	_, _ = fw.Write(content)
	_ = mw.Close()
	if _, err := s.toolbox.Do(ctx, vendorapi.Request{Op: "upload file", Method: http.MethodPost, Path: "/files/bulk-upload",
		Body: buf.Bytes(), ContentType: mw.FormDataContentType(), Sandbox: true}, nil); err != nil {
		return fmt.Errorf("upload: %w", s.runErr(err))
	}
	q := url.Values{"path": {p}, "mode": {fmt.Sprintf("%o", mode&0o7777)}}
	if _, err := s.toolbox.Do(ctx, vendorapi.Request{Op: "set file mode", Method: http.MethodPost, Path: "/files/permissions",
		Query: q, Idempotent: true, Sandbox: true}, nil); err != nil {
		return fmt.Errorf("upload: %w", s.runErr(err))
	}
	return nil
}

// Kill deletes the sandbox; one already gone is success.
func (s *sandbox) Kill(ctx context.Context) error {
	s.markGone("it was killed")
	s.cancelBg()
	s.mu.Lock()
	if s.timer != nil {
		s.timer.Stop()
	}
	s.mu.Unlock()
	_, err := s.b.api.Do(ctx, vendorapi.Request{Op: "delete sandbox", Method: http.MethodDelete, Path: "/sandbox/" + url.PathEscape(s.id), Sandbox: true}, nil)
	var me *model.Error
	if err != nil && (!errors.As(err, &me) || me.Class != model.ErrSandboxGone) {
		return fmt.Errorf("sandbox kill: %w", err)
	}
	return nil
}

// Close kills within the teardown grace, shielded from ctx's cancellation.
func (s *sandbox) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	return backends.CloseWithin(ctx, model.TeardownGrace, s.Kill, model.Warning{SandboxID: s.id, Labels: s.labels,
		Message: "the Daytona sandbox could not be confirmed deleted; Daytona deletes it after its idle limit, or run sandboxio reap"}, s.onWarning)
}
