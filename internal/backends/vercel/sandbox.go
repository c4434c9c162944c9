package vercel

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/vendorapi"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// maxOutput is the cap on what one command may print on each stream.
const maxOutput = 64 << 20

// maxLine bounds one line of a command's stream.
const maxLine = 16 << 20

// killBudget bounds the kill of a command that timed out.
const killBudget = 5 * time.Second

type sandbox struct {
	b         *backend
	name      string
	sessionID string
	runtime   string
	vcpus     int
	secrets   map[string]string
	call      time.Duration
	labels    map[string]string
	created   time.Time
	expires   time.Time
	onWarning func(model.Warning)

	mu    sync.Mutex
	gone  error
	kills []chan struct{} // kills of timed-out commands not yet confirmed
}

// killLater kills a timed-out command in the background: the call that
// timed out returns at once, and the sandbox's next call waits until the
// kill was delivered (settle), so that it never sees the command's
// processes.
func (s *sandbox) killLater(ctx context.Context, id string) {
	done := make(chan struct{})
	s.mu.Lock()
	s.kills = append(s.kills, done)
	s.mu.Unlock()
	go func() {
		defer close(done)
		s.killCommand(ctx, id)
	}()
}

// settle waits, within killBudget, for the kills killLater started.
func (s *sandbox) settle(ctx context.Context) {
	s.mu.Lock()
	kills := s.kills
	s.kills = nil
	s.mu.Unlock()
	if len(kills) == 0 {
		return
	}
	t := time.NewTimer(killBudget)
	defer t.Stop()
	for _, k := range kills {
		select {
		case <-k:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

func (b *backend) newSandbox(p plan, r *withSession, onWarning func(model.Warning)) *sandbox {
	created := time.Now()
	if r.Session.StartedAt > 0 {
		created = time.UnixMilli(r.Session.StartedAt)
	}
	return &sandbox{b: b, name: r.Sandbox.Name, sessionID: r.Session.ID, runtime: p.spec.Image, vcpus: p.body.Resources.VCPUs,
		secrets: maps.Clone(p.secrets), call: p.call, labels: maps.Clone(p.spec.Labels), created: created,
		expires: created.Add(time.Duration(r.Session.Timeout) * time.Millisecond), onWarning: onWarning}
}

// ID is the sandbox's name, which Vercel's dashboard and API show.
func (s *sandbox) ID() string { return s.name }

// String never shows a secret.
func (s *sandbox) String() string   { return "vercel sandbox " + s.name }
func (s *sandbox) GoString() string { return s.String() }

func (s *sandbox) Info() backends.Info {
	s.mu.Lock()
	running := s.gone == nil
	s.mu.Unlock()
	return backends.Info{ID: s.name, Backend: Name, Tier: model.TierMicroVM, Labels: maps.Clone(s.labels),
		Created: s.created, Expires: s.expires, Running: running && time.Now().Before(s.expires),
		DiskCapStrategy: diskStrategy, PidsCapStrategy: pidsStrategy}
}

func (s *sandbox) goneError(why string, cause error) *model.Error {
	return &model.Error{Class: model.ErrSandboxGone, Err: cause, Message: fmt.Sprintf("Vercel sandbox %s is gone: %s", s.name, why),
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

// stopped records that the session has ended and returns SandboxGone. A
// stopped session is never resumed: that would start a new session past
// the lifetime the spec gave.
func (s *sandbox) stopped(cause error) error {
	why := "its session was stopped"
	if !time.Now().Before(s.expires) {
		why = "its lifetime ended at " + s.expires.UTC().Format(time.RFC3339)
	}
	g := s.goneError(why, cause)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone == nil {
		s.gone = g
	}
	return s.gone
}

func (s *sandbox) sessionPath(suffix string) string {
	return "/v2/sandboxes/sessions/" + url.PathEscape(s.sessionID) + suffix
}

// Run runs a command as the NDJSON stream of POST .../cmd with wait: the
// command, its log lines, then the command with its exit code. Vercel
// kills it at the timeout sent with it; the adapter also stops waiting
// then and kills it itself.
func (s *sandbox) Run(ctx context.Context, cmd []string, opts backends.RunOptions) (backends.Result, error) {
	if len(cmd) == 0 {
		return backends.Result{}, &model.Error{Class: model.ErrConfiguration, Message: "empty command", Fix: "pass the command and its arguments"}
	}
	if err := s.usable(); err != nil {
		return backends.Result{}, err
	}
	s.settle(ctx)
	env := maps.Clone(opts.Env)
	if env == nil {
		env = map[string]string{}
	}
	for k, v := range s.secrets { // per command only: never in the create request
		env[k] = v
	}
	if opts.Stdin != nil {
		// The command API has no standard input: it is uploaded to a file
		// the command reads, removed once opened.
		file := "/tmp/.sandboxio-stdin-" + nonce()
		if err := s.Upload(ctx, file, opts.Stdin, 0o600); err != nil {
			return backends.Result{}, err
		}
		cmd = append([]string{"/bin/sh", "-c", `exec 0<"$0" && rm -f "$0" && exec "$@"`, file}, cmd...)
	}
	timeout := model.EffectiveTimeout(opts.Timeout, s.call)
	body := map[string]any{"command": cmd[0], "args": append([]string{}, cmd[1:]...), "env": env, "sudo": false,
		"wait": true, "logs": true, "timeout": max(timeout.Milliseconds(), 1)}
	if opts.Workdir != "" {
		body["cwd"] = opts.Workdir
	}
	return s.run(ctx, body, opts, timeout)
}

// runState is one command's output and outcome.
type runState struct {
	stdout, stderr bytes.Buffer
	nOut, nErr     int
	cmdID          string
	exit           *int
	over           bool
	streamErr      string
	streamCode     string // the code of the stream's error line
}

func (r *runState) take(stream string, data string, opts backends.RunOptions) error {
	buf, n, sink := &r.stdout, &r.nOut, opts.Stdout
	if stream == "stderr" {
		buf, n, sink = &r.stderr, &r.nErr, opts.Stderr
	}
	if *n+len(data) > maxOutput {
		r.over = true
		return errors.New("output cap")
	}
	*n += len(data)
	if sink != nil {
		_, err := io.WriteString(sink, data)
		return err
	}
	buf.WriteString(data)
	return nil
}

func (s *sandbox) run(ctx context.Context, body map[string]any, opts backends.RunOptions, timeout time.Duration) (backends.Result, error) {
	started := time.Now()
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	payload, err := json.Marshal(body)
	if err != nil {
		return backends.Result{}, fmt.Errorf("vercel run: %w", err)
	}
	u := *s.b.base
	u.Path = strings.TrimSuffix(u.Path, "/") + s.sessionPath("/cmd")
	u.RawQuery = s.b.query().Encode()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, u.String(), bytes.NewReader(payload))
	if err != nil {
		return backends.Result{}, fmt.Errorf("vercel run: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "sandboxio")
	req.Header.Set("Authorization", "Bearer "+s.b.api.Credential.Reveal())
	resp, err := s.b.stream.Do(req)
	if err != nil {
		return backends.Result{}, s.cutShort(ctx, rctx, &runState{}, err, timeout)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return backends.Result{}, s.callError(s.b.statusError("run command", resp, data))
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		return backends.Result{}, fmt.Errorf("vercel run: the answer is %q, not the command's NDJSON stream", ct)
	}
	var st runState
	rerr := s.read(resp.Body, &st, opts, cancel)
	if st.exit != nil && !st.over && rerr == nil {
		if time.Since(started) >= timeout {
			// Vercel killed it at the timeout: never a partial result.
			return backends.Result{}, s.timedOut(timeout)
		}
		return backends.Result{ExitCode: *st.exit, Stdout: st.stdout.Bytes(), Stderr: st.stderr.Bytes(), Duration: time.Since(started)}, nil
	}
	return backends.Result{}, s.cutShort(ctx, rctx, &st, rerr, timeout)
}

// read consumes the stream until the command's last line.
func (s *sandbox) read(r io.Reader, st *runState, opts backends.RunOptions, cancel func()) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := readLine(br)
		if len(bytes.TrimSpace(line)) > 0 {
			var l streamLine
			if jerr := json.Unmarshal(line, &l); jerr != nil {
				return fmt.Errorf("vercel run: a line of the stream is not JSON: %w", jerr)
			}
			switch {
			case l.Command != nil && st.cmdID == "":
				st.cmdID = l.Command.ID
			case l.Command != nil:
				if l.Command.ExitCode == nil {
					return errors.New("vercel run: the command's last line has no exit code")
				}
				st.exit = l.Command.ExitCode
				return nil
			case l.Stream == "stdout" || l.Stream == "stderr":
				var data string
				if json.Unmarshal(l.Data, &data) != nil {
					return errors.New("vercel run: a log line's data is not a string")
				}
				if werr := st.take(l.Stream, data, opts); werr != nil {
					cancel()
					return werr
				}
			case l.Stream == "error":
				var e struct{ Code, Message string }
				_ = json.Unmarshal(l.Data, &e)
				st.streamErr, st.streamCode = e.Code+": "+e.Message, e.Code
				return errors.New("vercel run: " + st.streamErr)
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return errors.New("vercel run: the stream ended before the command's end")
			}
			return err
		}
	}
}

func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		part, err := br.ReadSlice('\n')
		line = append(line, part...)
		if len(line) > maxLine {
			return nil, fmt.Errorf("vercel run: a line of the stream exceeds %d bytes", maxLine)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
	}
}

// cutShort kills a command that did not end by itself and says why.
func (s *sandbox) cutShort(ctx, rctx context.Context, st *runState, err error, timeout time.Duration) error {
	if st.cmdID != "" && st.exit == nil {
		s.killLater(ctx, st.cmdID)
	}
	switch {
	case st.over:
		return &model.Error{Class: model.ErrResourceLimitExceeded, Limit: model.LimitOutput,
			Message: fmt.Sprintf("the command printed more than %d MiB on one stream (the output cap); it was stopped and killed", maxOutput>>20),
			Fix:     "print less: write bulky results to a file in the sandbox and print a summary"}
	case ctx.Err() != nil:
		return fmt.Errorf("vercel run: %w", ctx.Err())
	case errors.Is(rctx.Err(), context.DeadlineExceeded):
		if uerr := s.usable(); uerr != nil {
			return uerr
		}
		return s.timedOut(timeout)
	case st.streamCode == "sandbox_stopped":
		// Vercel said so in the stream itself: no second call is needed
		// (CI saw that call fail under load, and the error pass for a
		// plain failure).
		return s.stopped(err)
	case st.streamErr != "" || st.cmdID != "":
		// The stream broke off: the session has stopped (its lifetime, a
		// stop elsewhere), or something else failed.
		if gone, _ := s.sessionStopped(ctx); gone {
			return s.stopped(err)
		}
	}
	if err == nil {
		err = errors.New("the stream ended without the command's end")
	}
	return fmt.Errorf("vercel run: %w", err)
}

func (s *sandbox) timedOut(timeout time.Duration) error {
	return &model.Error{Class: model.ErrExecutionTimeout,
		Message: fmt.Sprintf("the command did not finish within %s; it was killed", timeout),
		Fix:     "raise timeout_seconds, or pass a longer timeout to this call"}
}

// sessionStopped asks Vercel whether the session still runs.
func (s *sandbox) sessionStopped(ctx context.Context) (bool, error) {
	if !time.Now().Before(s.expires) {
		return true, nil
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killBudget)
	defer cancel()
	var r struct {
		Session sessionJSON `json:"session"`
	}
	_, err := s.b.api.Do(cctx, vendorapi.Request{Op: "get session", Method: http.MethodGet, Path: s.sessionPath(""), Query: s.b.query(), Sandbox: true}, &r)
	if err != nil {
		return goneStatus(err), err
	}
	return !active(r.Session.Status), nil
}

// killCommand sends SIGKILL to a command, bounded and shielded from the
// caller's cancellation; Vercel's own timeout kills it otherwise.
func (s *sandbox) killCommand(ctx context.Context, id string) {
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killBudget)
	defer cancel()
	_, _ = s.b.api.Do(kctx, vendorapi.Request{Op: "kill command", Method: http.MethodPost, Path: s.sessionPath("/cmd/" + url.PathEscape(id) + "/kill"),
		Query: s.b.query(), JSON: map[string]int{"signal": 9}, Idempotent: true}, nil)
}

// callError classifies the error of a session call: gone (404, 410), the
// token refused, or the vendor's failure.
func (s *sandbox) callError(err error) error {
	if goneStatus(err) {
		return s.stopped(err)
	}
	return typedStatus(err)
}

var interpreters = map[string][]string{
	"python": {"python3", "-c"}, "python3": {"python3", "-c"}, "sh": {"sh", "-c"}, "shell": {"sh", "-c"},
	"bash": {"bash", "-c"}, "node": {"node", "-e"}, "javascript": {"node", "-e"}, "js": {"node", "-e"},
}

// maxInlineCode is the longest program passed as an argument (Linux takes
// 128 KiB per argument); a longer one is uploaded first.
const maxInlineCode = 96 << 10

// RunCode runs a program in an interpreter of the runtime.
func (s *sandbox) RunCode(ctx context.Context, lang, code string, opts backends.RunOptions) (backends.Result, error) {
	argv, ok := interpreters[strings.ToLower(lang)]
	if !ok {
		return backends.Result{}, &model.Error{Class: model.ErrConfiguration, Attribute: "lang",
			Message: fmt.Sprintf("language %q is not supported", lang), Fix: "use one of " + strings.Join(slices.Sorted(maps.Keys(interpreters)), ", ")}
	}
	if len(code) <= maxInlineCode {
		return s.Run(ctx, []string{argv[0], argv[1], code}, opts)
	}
	file := "/tmp/sandboxio-code-" + nonce()
	if err := s.Upload(ctx, file, []byte(code), 0o600); err != nil {
		return backends.Result{}, err
	}
	return s.Run(ctx, []string{argv[0], file}, opts)
}

// Upload writes a file through fs/write: a gzipped tar extracted at /,
// carrying the file's mode.
func (s *sandbox) Upload(ctx context.Context, p string, content []byte, mode int64) error {
	if !strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") || strings.Contains("/"+p+"/", "/../") {
		return &model.Error{Class: model.ErrConfiguration, Attribute: "path",
			Message: fmt.Sprintf("%q is not an absolute file path", p), Fix: "upload to an absolute path such as /tmp/data.csv"}
	}
	if err := s.usable(); err != nil {
		return err
	}
	s.settle(ctx)
	if mode == 0 {
		mode = 0o644
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(p, "/"), Mode: mode & 0o7777, Size: int64(len(content)), ModTime: time.Now()})
	if err == nil {
		_, err = tw.Write(content)
	}
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = zw.Close()
	}
	if err != nil {
		return fmt.Errorf("vercel upload: %w", err)
	}
	uctx, cancel := context.WithTimeout(ctx, s.call)
	defer cancel()
	_, err = s.b.api.Do(uctx, vendorapi.Request{Op: "write file", Method: http.MethodPost, Path: s.sessionPath("/fs/write"), Query: s.b.query(),
		Body: buf.Bytes(), ContentType: "application/gzip", Header: http.Header{"X-Cwd": {"/"}}, Idempotent: true, Sandbox: true}, nil)
	switch {
	case err == nil:
		return nil
	case uctx.Err() != nil && ctx.Err() == nil:
		return &model.Error{Class: model.ErrExecutionTimeout, Message: fmt.Sprintf("the upload did not finish within %s", s.call), Fix: "upload less, or raise timeout_seconds"}
	}
	return s.callError(err)
}

// Kill stops the session and deletes the sandbox; one already gone is
// success.
func (s *sandbox) Kill(ctx context.Context) error {
	if err := s.b.remove(ctx, s.name, s.sessionID); err != nil {
		return typedStatus(err)
	}
	s.mu.Lock()
	if s.gone == nil {
		s.gone = s.goneError("it was killed", nil)
	}
	s.mu.Unlock()
	return nil
}

// Close kills the sandbox within the teardown grace, shielded from ctx's
// cancellation; when that fails, it reports the sandbox orphaned (Vercel
// still stops it at its lifetime).
func (s *sandbox) Close(ctx context.Context) error {
	return backends.CloseWithin(ctx, model.TeardownGrace, s.Kill, model.Warning{SandboxID: s.name, Labels: s.labels,
		Message: fmt.Sprintf("the Vercel sandbox could not be confirmed stopped within %s; Vercel stops it at its lifetime (%s)", model.TeardownGrace, s.expires.UTC().Format(time.RFC3339)),
		Fix:     "run `sandboxio reap`, or stop it in Vercel's dashboard"}, s.onWarning)
}
