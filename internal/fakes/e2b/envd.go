package e2bserver

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/e2b/envd/process"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/e2b/envd/process/processconnect"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Limits of envd requests.
const (
	maxUpload = 64 << 20 // one uploaded file
	maxStdin  = 16 << 20 // what one process may be sent on stdin
)

type ctxKey struct{}

// envdRoutes serves envd: the process service over Connect RPC, the file
// upload and the health check. The sandbox is named by the E2b-Sandbox-Id
// header (E2B_SANDBOX_URL, or sandbox.DOMAIN) or by the host name
// PORT-ID.DOMAIN, as the SDK addresses it.
func (s *Server) envdRoutes(mux *http.ServeMux) {
	p, h := processconnect.NewProcessHandler(&processService{srv: s})
	mux.Handle(p, s.envd(OpRun, h))
	mux.Handle("POST /files", s.envd(OpUpload, http.HandlerFunc(s.upload)))
	mux.Handle("GET /health", s.envd("", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })))
}

// sandboxOf names the sandbox an envd request is for.
func sandboxOf(r *http.Request) string {
	if id := r.Header.Get("E2b-Sandbox-Id"); id != "" {
		return id
	}
	host, _, _ := strings.Cut(r.Host, ".")
	if _, id, ok := strings.Cut(host, "-"); ok {
		return id
	}
	return ""
}

// envd resolves the sandbox and checks its access token.
func (s *Server) envd(op Op, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := sandboxOf(r)
		sb, ok := s.lookup(id)
		if !ok {
			// What E2B's sandbox proxy answers for a sandbox that is not
			// running: killed, or past its timeout.
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadGateway)
			_ = json.NewEncoder(w).Encode(map[string]any{"sandboxId": id, "message": "The sandbox was not found", "code": http.StatusBadGateway})
			return
		}
		if p := r.Header.Get("E2b-Sandbox-Port"); p != "" && p != strconv.Itoa(EnvdPort) {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		if !constantEq(r.Header.Get("X-Access-Token"), sb.token) {
			http.Error(w, "unauthorized access, please provide a valid access token", http.StatusUnauthorized)
			return
		}
		serve := func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, sb)))
		}
		if op != "" && (op != OpRun || strings.HasSuffix(r.URL.Path, "/Start")) && s.Intercept(w, r, op, serve) {
			return
		}
		serve(w, r)
	})
}

// proc is one process started through envd.
type proc struct {
	pid       uint32
	stopCh    chan struct{} // closed by stop
	mu        sync.Mutex
	signalled bool
	wantStdin bool
	stdin     bytes.Buffer
	stdinDone chan struct{}
	closed    bool
	// done is closed when the process has ended (its kill, if any, landed).
	done chan struct{}
}

func (sb *sbx) newProc(wantStdin bool) (*proc, error) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.ended {
		return nil, errors.New("sandbox ended")
	}
	sb.nextPID++
	p := &proc{pid: sb.nextPID, stopCh: make(chan struct{}), wantStdin: wantStdin, stdinDone: make(chan struct{}), done: make(chan struct{})}
	sb.procs[p.pid] = p
	return p, nil
}

func (p *proc) stopped() bool {
	select {
	case <-p.stopCh:
		return true
	default:
		return false
	}
}

// stop kills the process (signalled: by SendSignal).
func (p *proc) stop(signalled bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.signalled = p.signalled || signalled
	select {
	case <-p.stopCh:
	default:
		close(p.stopCh)
	}
}

func (sb *sbx) proc(pid uint32) (*proc, bool) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	p, ok := sb.procs[pid]
	return p, ok
}

func (sb *sbx) dropProc(pid uint32) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	delete(sb.procs, pid)
}

type processService struct {
	processconnect.UnimplementedProcessHandler
	srv *Server
}

func sandboxFrom(ctx context.Context) *sbx { sb, _ := ctx.Value(ctxKey{}).(*sbx); return sb }

// streamSender serialises sends on one server stream (output and keepalives).
type streamSender struct {
	mu     sync.Mutex
	stream *connect.ServerStream[process.StartResponse]
	err    error
}

func (s *streamSender) send(ev *process.ProcessEvent) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = s.stream.Send(&process.StartResponse{Event: ev})
	}
	return s.err
}

// outWriter turns a stream of the command's output into data events.
type outWriter struct {
	s      *streamSender
	stderr bool
}

func (o outWriter) Write(b []byte) (int, error) {
	data := &process.ProcessEvent_DataEvent{}
	c := bytes.Clone(b)
	if o.stderr {
		data.Output = &process.ProcessEvent_DataEvent_Stderr{Stderr: c}
	} else {
		data.Output = &process.ProcessEvent_DataEvent_Stdout{Stdout: c}
	}
	if err := o.s.send(&process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: data}}); err != nil {
		return 0, err
	}
	return len(b), nil
}

// startWrapper runs every command: it reports its pid on stderr, then execs
// the command, which keeps the pid. The Docker backend's own exec wrapper
// has made that pid a session leader, so killing its process group kills
// the command and what it started. The server kills that way, in a command
// of its own, rather than by cancelling the exec: a cancelled exec makes the
// Docker backend stop the session within its tight budget or else kill the
// whole sandbox, and an E2B sandbox outlives a command that timed out.
const startWrapper = `printf '\036e2bserver-pid:%s\036' "$$" >&2; exec "$@"`

const pidMarker = "\x1ee2bserver-pid:"

// killScript kills the process group of $1.
const killScript = `kill -9 -- "-$1" 2>/dev/null; kill -9 "$1" 2>/dev/null; true`

// Start runs a process in the sandbox and streams its events: start, data,
// end. A request whose deadline passes (Connect-Timeout-Ms) or whose client
// goes away has its process killed, as does SendSignal.
func (ps *processService) Start(ctx context.Context, req *connect.Request[process.StartRequest], stream *connect.ServerStream[process.StartResponse]) error {
	sb := sandboxFrom(ctx)
	cfg := req.Msg.GetProcess()
	switch {
	case cfg == nil || cfg.GetCmd() == "":
		return connect.NewError(connect.CodeInvalidArgument, errors.New("process.cmd is required"))
	case req.Msg.Pty != nil:
		return connect.NewError(connect.CodeUnimplemented, errors.New("pty is not supported by this conformance server"))
	}
	p, err := sb.newProc(req.Msg.GetStdin())
	if err != nil {
		return connect.NewError(connect.CodeUnavailable, err)
	}
	defer sb.dropProc(p.pid)
	defer close(p.done)
	ps.srv.updateRecord(sb.id, func(r *Record) { r.ProcessEnvs = append(r.ProcessEnvs, cfg.GetEnvs()) })
	out := &streamSender{stream: stream}
	if err := out.send(&process.ProcessEvent{Event: &process.ProcessEvent_Start{Start: &process.ProcessEvent_StartEvent{Pid: p.pid}}}); err != nil {
		return err
	}
	kctx, kcancel := context.WithCancel(ctx)
	defer kcancel()
	if iv, err := strconv.Atoi(req.Header().Get("Keepalive-Ping-Interval")); err == nil && iv > 0 {
		go keepalive(kctx, out, time.Duration(iv)*time.Second)
	}
	var stdin []byte
	if p.wantStdin {
		select {
		case <-p.stdinDone: // the program runs once its input is complete
		case <-ctx.Done():
			return ps.ended(ctx, sb, p)
		case <-p.stopCh:
			return out.send(endEvent(-1, false, "signal: killed"))
		}
		stdin = p.stdin.Bytes()
	}
	workdir := homeDir
	if cfg.Cwd != nil && *cfg.Cwd != "" {
		workdir = *cfg.Cwd
	}
	// The run outlives the request only until the kill below lands.
	rctx, rcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer rcancel()
	marker := &markerStrip{next: outWriter{s: out, stderr: true}, started: make(chan struct{})}
	go ps.stopWhen(ctx, sb, p, marker, rctx.Done())
	argv := append([]string{"/bin/sh", "-c", startWrapper, "sh", cfg.GetCmd()}, cfg.GetArgs()...)
	res, err := sb.docker.Run(rctx, argv, backends.RunOptions{
		Env: cfg.GetEnvs(), Workdir: workdir, Stdin: stdin, Timeout: ps.srv.cfg.MaxTimeout,
		Stdout: outWriter{s: out}, Stderr: marker,
	})
	rcancel()
	switch {
	case err != nil && errors.Is(err, model.ErrSandboxGone):
		return connect.NewError(connect.CodeUnavailable, fmt.Errorf("sandbox %s ended", sb.id))
	case err != nil:
		return connect.NewError(connect.CodeInternal, fmt.Errorf("process: %w", err))
	case p.stopped():
		if e := ps.ended(ctx, sb, p); e != nil {
			return e
		}
		return out.send(endEvent(-1, false, "signal: killed"))
	}
	return out.send(endEvent(int32(res.ExitCode), true, "exit status "+strconv.Itoa(res.ExitCode)))
}

// stopWhen kills the process when the request ends or the process is
// stopped (SendSignal, the sandbox ending), once it has reported its pid;
// runDone ends the wait.
func (ps *processService) stopWhen(ctx context.Context, sb *sbx, p *proc, m *markerStrip, runDone <-chan struct{}) {
	select {
	case <-ctx.Done():
		p.stop(false)
	case <-p.stopCh:
	case <-runDone:
		return
	}
	select {
	case <-m.started:
	case <-runDone:
		return
	}
	for {
		kctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := sb.docker.Run(kctx, []string{"/bin/sh", "-c", killScript, "sh", strconv.Itoa(m.pid)}, backends.RunOptions{Timeout: 30 * time.Second})
		cancel()
		if err == nil || errors.Is(err, model.ErrSandboxGone) {
			return
		}
		select {
		case <-runDone:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// markerStrip removes the wrapper's pid marker from the front of stderr
// and reports the pid.
type markerStrip struct {
	next    io.Writer
	started chan struct{}
	pid     int // set before started is closed
	buf     []byte
	done    bool
}

func (m *markerStrip) Write(b []byte) (int, error) {
	if m.done {
		return m.next.Write(b)
	}
	m.buf = append(m.buf, b...)
	rest := m.buf
	if after, ok := bytes.CutPrefix(m.buf, []byte(pidMarker)); ok {
		end := bytes.IndexByte(after, 0x1e)
		if end < 0 && len(after) < 16 {
			return len(b), nil // the marker continues in the next write
		}
		if end >= 0 {
			if pid, err := strconv.Atoi(string(after[:end])); err == nil && pid > 0 {
				m.pid = pid
				close(m.started)
			}
			rest = after[end+1:]
		}
	} else if len(m.buf) < len(pidMarker) && strings.HasPrefix(pidMarker, string(m.buf)) {
		return len(b), nil
	}
	m.done = true
	m.buf = nil
	if len(rest) > 0 {
		if _, err := m.next.Write(rest); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}

// ended is the answer for a process cut short by something other than a
// signal: the request's deadline, its client gone, or the sandbox ended.
func (ps *processService) ended(ctx context.Context, sb *sbx, p *proc) error {
	p.mu.Lock()
	sig := p.signalled
	p.mu.Unlock()
	switch {
	case sig:
		return nil
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return connect.NewError(connect.CodeDeadlineExceeded, errors.New("the request deadline passed; the process was killed"))
	case ctx.Err() != nil:
		return connect.NewError(connect.CodeCanceled, ctx.Err())
	}
	return connect.NewError(connect.CodeUnavailable, fmt.Errorf("sandbox %s ended", sb.id))
}

func endEvent(code int32, exited bool, status string) *process.ProcessEvent {
	return &process.ProcessEvent{Event: &process.ProcessEvent_End{End: &process.ProcessEvent_EndEvent{ExitCode: code, Exited: exited, Status: status}}}
}

func keepalive(ctx context.Context, out *streamSender, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if out.send(&process.ProcessEvent{Event: &process.ProcessEvent_Keepalive{Keepalive: &process.ProcessEvent_KeepAlive{}}}) != nil {
				return
			}
		}
	}
}

func (ps *processService) selected(ctx context.Context, sel *process.ProcessSelector) (*proc, error) {
	sb := sandboxFrom(ctx)
	if sel == nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("process selector is required"))
	}
	if _, isTag := sel.Selector.(*process.ProcessSelector_Tag); isTag {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("selecting a process by tag is not supported by this conformance server"))
	}
	p, ok := sb.proc(sel.GetPid())
	if !ok {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with pid %d not found", sel.GetPid()))
	}
	return p, nil
}

// SendSignal kills a process (SIGKILL and SIGTERM both kill it here).
func (ps *processService) SendSignal(ctx context.Context, req *connect.Request[process.SendSignalRequest]) (*connect.Response[process.SendSignalResponse], error) {
	p, err := ps.selected(ctx, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	switch req.Msg.GetSignal() {
	case process.Signal_SIGNAL_SIGKILL, process.Signal_SIGNAL_SIGTERM:
	default:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("invalid signal %v", req.Msg.GetSignal()))
	}
	p.stop(true)
	// envd signals the process with a system call: once SendSignal has
	// answered, the process is dead. Here the kill is a command of its own,
	// so wait for it to land (the process's run to end).
	select {
	case <-p.done:
	case <-ctx.Done():
		return nil, connect.NewError(connect.CodeDeadlineExceeded, errors.New("the process did not end in time"))
	}
	return connect.NewResponse(&process.SendSignalResponse{}), nil
}

// SendInput buffers input for a process started with stdin.
func (ps *processService) SendInput(ctx context.Context, req *connect.Request[process.SendInputRequest]) (*connect.Response[process.SendInputResponse], error) {
	p, err := ps.selected(ctx, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	in := req.Msg.GetInput()
	if _, pty := in.GetInput().(*process.ProcessInput_Pty); pty {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("the process has no pty"))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case !p.wantStdin || p.closed:
		return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("the process's stdin is not open"))
	case p.stdin.Len()+len(in.GetStdin()) > maxStdin:
		return nil, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("stdin exceeds %d bytes", maxStdin))
	}
	p.stdin.Write(in.GetStdin())
	return connect.NewResponse(&process.SendInputResponse{}), nil
}

// CloseStdin ends a process's input; the program then runs.
func (ps *processService) CloseStdin(ctx context.Context, req *connect.Request[process.CloseStdinRequest]) (*connect.Response[process.CloseStdinResponse], error) {
	p, err := ps.selected(ctx, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.wantStdin {
		return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("the process was started without stdin"))
	}
	if !p.closed {
		p.closed = true
		close(p.stdinDone)
	}
	return connect.NewResponse(&process.CloseStdinResponse{}), nil
}

// List lists the running processes.
func (ps *processService) List(ctx context.Context, _ *connect.Request[process.ListRequest]) (*connect.Response[process.ListResponse], error) {
	sb := sandboxFrom(ctx)
	sb.mu.Lock()
	defer sb.mu.Unlock()
	out := &process.ListResponse{}
	for pid := range sb.procs {
		out.Processes = append(out.Processes, &process.ProcessInfo{Pid: pid, Config: &process.ProcessConfig{}})
	}
	return connect.NewResponse(out), nil
}

type entryInfo struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Path string `json:"path"`
}

// upload serves POST /files: multipart form data (field "file", the path
// in the query or the part's file name) or an octet-stream body, gzip or not.
func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	sb := sandboxFrom(r.Context())
	q := r.URL.Query()
	ct, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var files []entryInfo
	put := func(p string, body io.Reader) bool {
		if p == "" {
			http.Error(w, `{"code":400,"message":"path is required"}`, http.StatusBadRequest)
			return false
		}
		if !path.IsAbs(p) {
			p = path.Join(homeDir, p)
		}
		data, err := io.ReadAll(io.LimitReader(body, maxUpload+1))
		switch {
		case err != nil:
			http.Error(w, `{"code":400,"message":"reading the upload failed"}`, http.StatusBadRequest)
			return false
		case len(data) > maxUpload:
			http.Error(w, `{"code":507,"message":"not enough disk space"}`, http.StatusInsufficientStorage)
			return false
		}
		if err := sb.docker.Upload(r.Context(), path.Clean(p), data, 0o644); err != nil {
			http.Error(w, fmt.Sprintf(`{"code":500,"message":%q}`, "error writing file: "+err.Error()), http.StatusInternalServerError)
			return false
		}
		files = append(files, entryInfo{Name: path.Base(p), Type: "file", Path: path.Clean(p)})
		return true
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, `{"code":400,"message":"invalid gzip body"}`, http.StatusBadRequest)
			return
		}
		body = zr
	}
	switch ct {
	case "application/octet-stream":
		if !put(q.Get("path"), body) {
			return
		}
	case "multipart/form-data":
		mr, err := r.MultipartReader()
		if err != nil || params["boundary"] == "" {
			http.Error(w, `{"code":400,"message":"invalid multipart body"}`, http.StatusBadRequest)
			return
		}
		for {
			part, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				http.Error(w, `{"code":400,"message":"invalid multipart body"}`, http.StatusBadRequest)
				return
			}
			if part.FormName() != "file" {
				continue
			}
			p := q.Get("path")
			if p == "" {
				// The raw file name: Part.FileName drops the directories.
				_, cd, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
				p = cd["filename"]
			}
			if !put(p, part) {
				return
			}
		}
	default:
		http.Error(w, `{"code":400,"message":"unsupported content type"}`, http.StatusBadRequest)
		return
	}
	writeJSON(w, http.StatusOK, files)
}
