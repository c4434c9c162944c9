package e2b

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime/multipart"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/e2b/envd/process"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/e2b/envd/process/processconnect"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/vendorapi"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// envdPort is envd's port in an E2B sandbox.
const envdPort = 49983

// maxOutput is the cap on what one command may print on each stream.
const maxOutput = 64 << 20

// killBudget bounds the kill of a command that timed out.
const killBudget = 30 * time.Second

// killWait is how long a timed-out command's caller waits for its kill to
// be confirmed before the ExecutionTimeout is returned; the kill goes on,
// and the sandbox's next command waits for it (settle).
const killWait = 300 * time.Millisecond

type sandbox struct {
	b         *backend
	id        string
	template  string
	envdURL   string
	token     vendorapi.Credential
	http      *http.Client // carries the envd headers
	proc      processconnect.ProcessClient
	secrets   map[string]string
	call      time.Duration
	labels    map[string]string
	created   time.Time
	expires   time.Time
	onWarning func(model.Warning)

	mu   sync.Mutex
	gone error
	// kills are the kills of timed-out commands not yet confirmed.
	kills sync.WaitGroup
}

// envdTransport adds what envd and E2B's sandbox proxy need on every request:
// the sandbox and port (for sandbox.DOMAIN and E2B_SANDBOX_URL) and the
// sandbox's access token.
type envdTransport struct {
	next  http.RoundTripper
	id    string
	token vendorapi.Credential
}

func (t envdTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("E2b-Sandbox-Id", t.id)
	r.Header.Set("E2b-Sandbox-Port", strconv.Itoa(envdPort))
	r.Header.Set("X-Access-Token", t.token.Reveal())
	resp, err := t.next.RoundTrip(r)
	if err == nil && (resp.StatusCode == http.StatusBadGateway || resp.StatusCode == http.StatusNotFound) {
		// E2B's sandbox proxy answers 502 for a sandbox that is not running
		// (and a 404 for one it does not know); to a Connect client either
		// would look like an unimplemented method or a bad gateway.
		_ = resp.Body.Close()
		return nil, errEnvdGone{status: resp.StatusCode}
	}
	return resp, err
}

// errEnvdGone is an envd answer that means the sandbox is not there.
type errEnvdGone struct{ status int }

func (e errEnvdGone) Error() string {
	return fmt.Sprintf("E2B's sandbox proxy answered %d %s", e.status, http.StatusText(e.status))
}

func (b *backend) newSandbox(p plan, resp *sandboxResp, labels map[string]string, created, expires time.Time, onWarning func(model.Warning)) *sandbox {
	base := b.sandboxURL
	if base == "" {
		domain := b.domain
		if resp.Domain != nil && *resp.Domain != "" {
			domain = *resp.Domain
		}
		if supportedDomains[domain] {
			base = "https://sandbox." + domain
		} else {
			base = fmt.Sprintf("https://%d-%s.%s", envdPort, resp.SandboxID, domain)
		}
	}
	hc := &http.Client{Transport: envdTransport{next: b.http.Transport, id: resp.SandboxID, token: vendorapi.NewCredential(resp.EnvdAccessToken)}}
	return &sandbox{b: b, id: resp.SandboxID, template: p.spec.Image, envdURL: base, token: vendorapi.NewCredential(resp.EnvdAccessToken), http: hc,
		// JSON, as the official SDK speaks to envd.
		proc:    processconnect.NewProcessClient(hc, base, connect.WithProtoJSON()),
		secrets: maps.Clone(p.secrets), call: p.call, labels: labels, created: created, expires: expires, onWarning: onWarning}
}

func (s *sandbox) ID() string { return s.id }

// String never shows the access token.
func (s *sandbox) String() string   { return "e2b sandbox " + s.id }
func (s *sandbox) GoString() string { return s.String() }

func (s *sandbox) Info() backends.Info {
	s.mu.Lock()
	running := s.gone == nil
	s.mu.Unlock()
	return backends.Info{ID: s.id, Backend: Name, Tier: model.TierMicroVM, Labels: maps.Clone(s.labels),
		Created: s.created, Expires: s.expires, Running: running && time.Now().Before(s.expires),
		DiskCapStrategy: fmt.Sprintf("fixed by the E2B template %q", s.template),
		PidsCapStrategy: fmt.Sprintf("fixed by the E2B template %q", s.template)}
}

func (s *sandbox) goneError(why string, cause error) *model.Error {
	return &model.Error{Class: model.ErrSandboxGone, Err: cause, Message: fmt.Sprintf("E2B sandbox %s is gone: %s", s.id, why),
		Fix: backends.GoneFix(s.expires, time.Now())}
}

// usable refuses a sandbox known to be gone, or past its lifetime, without a call.
func (s *sandbox) usable() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone != nil {
		return s.gone
	}
	if !time.Now().Before(s.expires) {
		s.gone = s.goneError("its lifetime ended at "+s.expires.UTC().Format(time.RFC3339), nil)
		return s.gone
	}
	return nil
}

func (s *sandbox) markGone(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone == nil {
		s.gone = err
	}
}

// envdError classifies an error of an envd call: the sandbox gone (E2B's
// proxy answers 502 for a sandbox that is not running), the token refused.
func (s *sandbox) envdError(op string, err error) error {
	code := connect.CodeOf(err)
	if errors.As(err, new(errEnvdGone)) {
		code = connect.CodeNotFound
	}
	switch code {
	case connect.CodeUnavailable, connect.CodeNotFound:
		why := "it was killed, or its lifetime ended"
		if !time.Now().Before(s.expires) {
			why = "its lifetime ended at " + s.expires.UTC().Format(time.RFC3339)
		}
		g := s.goneError(why, err)
		s.markGone(g)
		return g
	case connect.CodeUnauthenticated, connect.CodePermissionDenied:
		return &model.Error{Class: model.ErrConfiguration, Attribute: "backend", Err: err,
			Message: "envd refused the sandbox's access token", Fix: "open a new sandbox"}
	}
	return fmt.Errorf("e2b %s: %w", op, err)
}

// Run runs a command through envd's process API.
func (s *sandbox) Run(ctx context.Context, cmd []string, opts backends.RunOptions) (backends.Result, error) {
	if len(cmd) == 0 {
		return backends.Result{}, &model.Error{Class: model.ErrConfiguration, Message: "empty command", Fix: "pass the command and its arguments"}
	}
	if err := s.usable(); err != nil {
		return backends.Result{}, err
	}
	if err := s.settle(ctx); err != nil {
		return backends.Result{}, err
	}
	env := maps.Clone(opts.Env)
	if env == nil {
		env = map[string]string{}
	}
	for k, v := range s.secrets { // exec-only: never in the create request
		env[k] = v
	}
	cfg := &process.ProcessConfig{Cmd: cmd[0], Args: cmd[1:], Envs: env}
	if opts.Workdir != "" {
		cfg.Cwd = &opts.Workdir
	}
	stdin := opts.Stdin != nil
	timeout := model.EffectiveTimeout(opts.Timeout, s.call)
	return s.run(ctx, &process.StartRequest{Process: cfg, Stdin: &stdin}, opts, timeout)
}

// runState is one command's output and outcome.
type runState struct {
	stdout, stderr bytes.Buffer
	nOut, nErr     int // bytes seen per stream, streamed or kept
	pid            uint32
	end            *process.ProcessEvent_EndEvent
	over           bool
}

func (r *runState) take(ev *process.ProcessEvent_DataEvent, opts backends.RunOptions) error {
	var b []byte
	var buf *bytes.Buffer
	var n *int
	var sink io.Writer
	switch o := ev.GetOutput().(type) {
	case *process.ProcessEvent_DataEvent_Stdout:
		b, buf, n, sink = o.Stdout, &r.stdout, &r.nOut, opts.Stdout
	case *process.ProcessEvent_DataEvent_Stderr:
		b, buf, n, sink = o.Stderr, &r.stderr, &r.nErr, opts.Stderr
	default:
		return nil
	}
	if *n+len(b) > maxOutput {
		r.over = true
		return errors.New("output cap")
	}
	*n += len(b)
	if sink != nil {
		_, err := sink.Write(b)
		return err
	}
	buf.Write(b)
	return nil
}

func (s *sandbox) run(ctx context.Context, req *process.StartRequest, opts backends.RunOptions, timeout time.Duration) (backends.Result, error) {
	started := time.Now()
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stream, err := s.proc.Start(rctx, connect.NewRequest(req))
	if err != nil {
		return backends.Result{}, s.envdError("run", err)
	}
	defer stream.Close()
	var st runState
	var sinkErr error
	for stream.Receive() {
		switch ev := stream.Msg().GetEvent().GetEvent().(type) {
		case *process.ProcessEvent_Start:
			st.pid = ev.Start.GetPid()
			if req.GetStdin() {
				go s.feed(rctx, st.pid, opts.Stdin)
			}
		case *process.ProcessEvent_Data:
			if err := st.take(ev.Data, opts); err != nil {
				sinkErr = err
				cancel()
			}
		case *process.ProcessEvent_End:
			st.end = ev.End
		}
		if st.end != nil || sinkErr != nil {
			break
		}
	}
	if st.end != nil {
		return s.result(st, started), nil
	}
	return backends.Result{}, s.cutShort(ctx, rctx, stream.Err(), &st, sinkErr, timeout)
}

// cutShort kills a command that did not end by itself and says why.
func (s *sandbox) cutShort(ctx, rctx context.Context, err error, st *runState, sinkErr error, timeout time.Duration) error {
	if st.pid != 0 {
		s.killAsync(ctx, st.pid)
	}
	switch {
	case st.over:
		return &model.Error{Class: model.ErrResourceLimitExceeded, Limit: model.LimitOutput,
			Message: fmt.Sprintf("the command printed more than %d MiB on one stream (the output cap); it was stopped and its process killed", maxOutput>>20),
			Fix:     "print less: write bulky results to a file in the sandbox and print a summary"}
	case sinkErr != nil:
		return fmt.Errorf("e2b run: writing the output: %w; the command was stopped", sinkErr)
	case ctx.Err() != nil:
		return fmt.Errorf("e2b run: %w", ctx.Err())
	case errors.Is(rctx.Err(), context.DeadlineExceeded) || connect.CodeOf(err) == connect.CodeDeadlineExceeded:
		if uerr := s.usable(); uerr != nil {
			return uerr
		}
		return &model.Error{Class: model.ErrExecutionTimeout,
			Message: fmt.Sprintf("the command did not finish within %s; its process was killed", timeout),
			Fix:     "raise timeout_seconds, or pass a longer timeout to this call"}
	case err == nil:
		return fmt.Errorf("e2b run: the process stream ended without the process's end")
	}
	return s.envdError("run", err)
}

// killAsync kills a command's process and waits a moment for the kill to
// be confirmed; past that the caller gets its answer while the kill goes
// on, and the sandbox's next command waits for it (settle), so no later
// command sees a process of this one.
func (s *sandbox) killAsync(ctx context.Context, pid uint32) {
	done := make(chan struct{})
	s.kills.Add(1)
	go func() {
		defer s.kills.Done()
		defer close(done)
		s.killProcess(ctx, pid)
	}()
	select {
	case <-done:
	case <-time.After(killWait):
	}
}

// settle waits, within ctx, for the kills of timed-out commands.
func (s *sandbox) settle(ctx context.Context) error {
	done := make(chan struct{})
	go func() { s.kills.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("e2b: waiting for the kill of a timed-out command: %w", ctx.Err())
	}
}

// killProcess sends SIGKILL to a command's process, bounded and shielded
// from the caller's cancellation.
func (s *sandbox) killProcess(ctx context.Context, pid uint32) {
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killBudget)
	defer cancel()
	_, _ = s.proc.SendSignal(kctx, connect.NewRequest(&process.SendSignalRequest{
		Process: &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}, Signal: process.Signal_SIGNAL_SIGKILL}))
}

// feed sends a command's standard input and closes it.
func (s *sandbox) feed(ctx context.Context, pid uint32, data []byte) {
	sel := &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}
	for len(data) > 0 {
		n := min(len(data), 1<<20)
		if _, err := s.proc.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: sel,
			Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: data[:n]}}})); err != nil {
			return
		}
		data = data[n:]
	}
	_, _ = s.proc.CloseStdin(ctx, connect.NewRequest(&process.CloseStdinRequest{Process: sel}))
}

func (s *sandbox) result(st runState, started time.Time) backends.Result {
	code := int(st.end.GetExitCode())
	if !st.end.GetExited() && strings.HasPrefix(st.end.GetStatus(), "signal:") {
		code = 128 + 9 // killed by a signal, as a shell reports it
	}
	return backends.Result{ExitCode: code, Stdout: st.stdout.Bytes(), Stderr: st.stderr.Bytes(), Duration: time.Since(started)}
}

var interpreters = map[string][]string{
	"python": {"python3", "-"}, "python3": {"python3", "-"}, "sh": {"sh", "-s"}, "shell": {"sh", "-s"},
	"bash": {"bash", "-s"}, "node": {"node", "-"}, "javascript": {"node", "-"}, "js": {"node", "-"},
}

// RunCode runs a program in an interpreter of the template, the program on
// standard input; when the caller needs stdin, it is uploaded to a file.
func (s *sandbox) RunCode(ctx context.Context, lang, code string, opts backends.RunOptions) (backends.Result, error) {
	argv, ok := interpreters[strings.ToLower(lang)]
	if !ok {
		return backends.Result{}, &model.Error{Class: model.ErrConfiguration, Attribute: "lang",
			Message: fmt.Sprintf("language %q is not supported", lang), Fix: "use one of " + strings.Join(slices.Sorted(maps.Keys(interpreters)), ", ")}
	}
	if opts.Stdin == nil {
		opts.Stdin = []byte(code)
		return s.Run(ctx, argv, opts)
	}
	file := "/tmp/sandboxio-code-" + nonce()
	if err := s.Upload(ctx, file, []byte(code), 0o600); err != nil {
		return backends.Result{}, err
	}
	return s.Run(ctx, []string{argv[0], file}, opts)
}

// Upload writes a file through envd's file API, then sets its mode.
func (s *sandbox) Upload(ctx context.Context, p string, content []byte, mode int64) error {
	if !path.IsAbs(p) || strings.HasSuffix(p, "/") {
		return &model.Error{Class: model.ErrConfiguration, Attribute: "path",
			Message: fmt.Sprintf("%q is not an absolute file path", p), Fix: "upload to an absolute path such as /home/user/data.csv"}
	}
	if err := s.usable(); err != nil {
		return err
	}
	if err := s.settle(ctx); err != nil {
		return err
	}
	uctx, cancel := context.WithTimeout(ctx, s.call)
	defer cancel()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, err := mw.CreateFormFile("file", p)
	if err == nil {
		_, err = fw.Write(content)
	}
	if err == nil {
		err = mw.Close()
	}
	if err != nil {
		return fmt.Errorf("e2b upload: %w", err)
	}
	req, err := http.NewRequestWithContext(uctx, http.MethodPost, s.envdURL+"/files?"+url.Values{"path": {p}}.Encode(), &body)
	if err != nil {
		return fmt.Errorf("e2b upload: %w", err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := s.http.Do(req)
	if err != nil {
		if uctx.Err() != nil && ctx.Err() == nil {
			return &model.Error{Class: model.ErrExecutionTimeout, Message: fmt.Sprintf("the upload did not finish within %s", s.call), Fix: "upload less, or raise timeout_seconds"}
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL says nothing the caller needs
		}
		if errors.As(err, new(errEnvdGone)) {
			g := s.goneError("it was killed, or its lifetime ended", err)
			s.markGone(g)
			return g
		}
		return fmt.Errorf("e2b upload: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return s.uploadError(resp)
	}
	if mode == 0 || mode == 0o644 {
		return nil
	}
	res, err := s.Run(ctx, []string{"chmod", strconv.FormatInt(mode&0o7777, 8), p}, backends.RunOptions{})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("e2b upload: chmod %o %s: exit %d: %s", mode, p, res.ExitCode, bytes.TrimSpace(res.Stderr))
	}
	return nil
}

// uploadError types a non-200 answer of envd's file upload.
func (s *sandbox) uploadError(resp *http.Response) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<12))
	se := &vendorapi.StatusError{Vendor: "E2B envd", Op: "upload", Method: http.MethodPost, Path: "/files", Status: resp.StatusCode,
		Message: strings.Join(strings.Fields(strings.ToValidUTF8(string(data), "")), " ")}
	switch resp.StatusCode {
	case http.StatusInsufficientStorage:
		return &model.Error{Class: model.ErrResourceLimitExceeded, Limit: model.LimitDisk, Err: se,
			Message: "the template's disk is full", Fix: "upload less, or use a template with a larger disk"}
	case http.StatusUnauthorized, http.StatusForbidden:
		return &model.Error{Class: model.ErrConfiguration, Attribute: "backend", Err: se,
			Message: "envd refused the sandbox's access token", Fix: "open a new sandbox"}
	case http.StatusBadRequest:
		return &model.Error{Class: model.ErrConfiguration, Attribute: "path", Err: se,
			Message: "envd refused the upload (400)", Fix: "check the path: an absolute file path the template's user may write"}
	}
	return se
}

// Kill ends the sandbox (DELETE); a sandbox already gone is success.
func (s *sandbox) Kill(ctx context.Context) error {
	if err := s.b.api.kill(ctx, s.id); err != nil {
		return err
	}
	s.markGone(s.goneError("it was killed", nil))
	return nil
}

// Close kills the sandbox within the teardown grace, shielded from ctx's
// cancellation; when that fails, it reports the sandbox orphaned (E2B still
// ends it at its lifetime).
func (s *sandbox) Close(ctx context.Context) error {
	return backends.CloseWithin(ctx, model.TeardownGrace, s.Kill, model.Warning{SandboxID: s.id, Labels: s.labels,
		Message: fmt.Sprintf("the E2B sandbox could not be confirmed killed within %s; E2B ends it at its lifetime (%s)", model.TeardownGrace, s.expires.UTC().Format(time.RFC3339)),
		Fix:     "run `sandboxio reap`, or kill it in E2B's dashboard"}, s.onWarning)
}
