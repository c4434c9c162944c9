package daytonaserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// HomeDir is the default working directory of a session (the snapshot's
// user's home) and the base of relative upload paths.
const HomeDir = "/work"

type toolboxHandler func(w http.ResponseWriter, r *http.Request, sb *sbx)

// toolbox resolves the sandbox of a toolbox-proxy request and counts the
// request as activity (which is what keeps a sandbox from auto-stop).
func (s *Server) toolbox(h toolboxHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sb, ok := s.lookup(r.PathValue("id"))
		if !ok {
			apiError(w, http.StatusNotFound, fmt.Sprintf("Sandbox with ID or name %s not found", r.PathValue("id")))
			return
		}
		sb.mu.Lock()
		state := sb.state
		if state == "started" {
			sb.lastActivity = time.Now()
		}
		sb.mu.Unlock()
		if state != "started" {
			apiError(w, http.StatusBadRequest, "Sandbox is not running")
			return
		}
		h(w, r, sb)
	}
}

// session is a toolbox process session: deleting it kills what runs in it.
type session struct {
	ctx     context.Context
	cancel  context.CancelFunc
	n       int
	running sync.WaitGroup // the commands executing in it
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request, sb *sbx) {
	var req struct {
		SessionID *string `json:"sessionId"`
	}
	if err := decodeStrict(r, &req); err != nil || req.SessionID == nil || *req.SessionID == "" {
		apiError(w, http.StatusBadRequest, "sessionId is required")
		return
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if _, ok := sb.sessions[*req.SessionID]; ok {
		apiError(w, http.StatusConflict, "session already exists")
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	sb.sessions[*req.SessionID] = &session{ctx: ctx, cancel: cancel}
	w.WriteHeader(http.StatusCreated)
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request, sb *sbx) {
	sb.mu.Lock()
	ss, ok := sb.sessions[r.PathValue("sid")]
	delete(sb.sessions, r.PathValue("sid"))
	sb.mu.Unlock()
	if !ok {
		apiError(w, http.StatusNotFound, "session not found")
		return
	}
	ss.cancel() // kills what runs in it
	done := make(chan struct{})
	go func() { ss.running.Wait(); close(done) }()
	select { // answered once its commands are dead, as the daemon kills them before answering
	case <-done:
	case <-time.After(30 * time.Second):
	}
	w.WriteHeader(http.StatusNoContent)
}

// startWrapper reports the command's pid on stderr, then runs it; the
// Docker backend's exec wrapper made that pid a session leader, so killing
// its process group kills the command and all it started. The kill is a
// command of its own (cancelling the exec would have the Docker backend end
// the whole local sandbox, and a Daytona sandbox outlives a killed session).
const startWrapper = `printf '\036daytonaserver-pid:%s\036' "$$" >&2; exec /bin/sh -c "$1"`

const pidMarker = "\x1edaytonaserver-pid:"

const killScript = `kill -9 -- "-$1" 2>/dev/null; kill -9 "$1" 2>/dev/null; true`

func (s *Server) execSession(w http.ResponseWriter, r *http.Request, sb *sbx) {
	var req struct {
		Command           *string `json:"command"`
		RunAsync          *bool   `json:"runAsync"`
		Async             *bool   `json:"async"`
		SuppressInputEcho *bool   `json:"suppressInputEcho"`
	}
	if err := decodeStrict(r, &req); err != nil || req.Command == nil || *req.Command == "" {
		apiError(w, http.StatusBadRequest, "command is required")
		return
	}
	if (req.RunAsync != nil && *req.RunAsync) || (req.Async != nil && *req.Async) {
		apiError(w, http.StatusBadRequest, "asynchronous commands are not supported by this conformance server")
		return
	}
	sb.mu.Lock()
	ss, ok := sb.sessions[r.PathValue("sid")]
	if ok {
		ss.n++
		ss.running.Add(1)
	}
	sb.mu.Unlock()
	if !ok {
		apiError(w, http.StatusNotFound, "session not found")
		return
	}
	defer ss.running.Done()
	s.updateRecord(sb.id, func(rec *Record) { rec.Commands = append(rec.Commands, *req.Command) })
	cmdID := newID()
	var stdout bytes.Buffer
	marker := &markerStrip{started: make(chan struct{})}
	rctx, rcancel := context.WithCancel(context.Background())
	defer rcancel()
	go killWhen(ss.ctx, sb, marker, rctx.Done())
	res, err := sb.docker.Run(rctx, []string{"/bin/sh", "-c", startWrapper, "sh", *req.Command},
		backends.RunOptions{Workdir: HomeDir, Timeout: s.cfg.MaxCommand, Stdout: &stdout, Stderr: marker})
	rcancel()
	code := res.ExitCode
	switch {
	case err != nil && errors.Is(err, model.ErrSandboxGone):
		apiError(w, http.StatusNotFound, fmt.Sprintf("Sandbox with ID or name %s not found", sb.id))
		return
	case err != nil:
		apiError(w, http.StatusInternalServerError, "command failed: "+err.Error())
		return
	case ss.ctx.Err() != nil:
		code = 137 // killed with its session
	}
	writeJSON(w, http.StatusOK, map[string]any{"cmdId": cmdID, "exitCode": code, "stdout": stdout.String(),
		"stderr": marker.out.String(), "output": stdout.String() + marker.out.String()})
}

// killWhen kills the command's process group when its session ends, once
// the command has reported its pid; runDone ends the wait.
func killWhen(sessionCtx context.Context, sb *sbx, m *markerStrip, runDone <-chan struct{}) {
	select {
	case <-sessionCtx.Done():
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

// markerStrip takes the wrapper's pid marker off the front of stderr and
// keeps the rest.
type markerStrip struct {
	mu      sync.Mutex
	out     bytes.Buffer
	started chan struct{}
	pid     int
	buf     []byte
	done    bool
}

func (m *markerStrip) Write(b []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done {
		return m.out.Write(b)
	}
	m.buf = append(m.buf, b...)
	rest := m.buf
	if after, ok := bytes.CutPrefix(m.buf, []byte(pidMarker)); ok {
		end := bytes.IndexByte(after, 0x1e)
		if end < 0 && len(after) < 16 {
			return len(b), nil
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
	m.out.Write(rest)
	return len(b), nil
}

// bulkUpload takes the multipart form the SDK sends: files[i].path and
// files[i].file.
func (s *Server) bulkUpload(w http.ResponseWriter, r *http.Request, sb *sbx) {
	if err := r.ParseMultipartForm(32 << 20); err != nil {
		apiError(w, http.StatusBadRequest, "invalid multipart form: "+err.Error())
		return
	}
	defer func() { _ = r.MultipartForm.RemoveAll() }()
	for i := 0; ; i++ {
		key := fmt.Sprintf("files[%d]", i)
		paths := r.MultipartForm.Value[key+".path"]
		files := r.MultipartForm.File[key+".file"]
		if len(paths) == 0 && len(files) == 0 {
			if i == 0 {
				apiError(w, http.StatusBadRequest, "no files")
				return
			}
			break
		}
		if len(paths) != 1 || len(files) != 1 {
			apiError(w, http.StatusBadRequest, key+" needs one path and one file")
			return
		}
		f, err := files[0].Open()
		if err != nil {
			apiError(w, http.StatusBadRequest, err.Error())
			return
		}
		content, err := io.ReadAll(f)
		_ = f.Close()
		if err != nil {
			apiError(w, http.StatusBadRequest, err.Error())
			return
		}
		p := paths[0]
		if !path.IsAbs(p) {
			p = path.Join(HomeDir, p)
		}
		if err := sb.docker.Upload(r.Context(), p, content, 0o644); err != nil {
			apiError(w, http.StatusBadRequest, "upload "+paths[0]+": "+err.Error())
			return
		}
	}
	w.WriteHeader(http.StatusOK)
}

// permissions sets a file's mode (query path and mode, an octal string).
func (s *Server) permissions(w http.ResponseWriter, r *http.Request, sb *sbx) {
	q := r.URL.Query()
	p, mode := q.Get("path"), q.Get("mode")
	if p == "" {
		apiError(w, http.StatusBadRequest, "path is required")
		return
	}
	if !path.IsAbs(p) {
		p = path.Join(HomeDir, p)
	}
	if mode == "" {
		w.WriteHeader(http.StatusOK)
		return
	}
	if m, err := strconv.ParseUint(mode, 8, 32); err != nil || m > 0o7777 {
		apiError(w, http.StatusBadRequest, "invalid mode")
		return
	}
	res, err := sb.docker.Run(r.Context(), []string{"chmod", mode, p}, backends.RunOptions{Timeout: 30 * time.Second})
	if err != nil || res.ExitCode != 0 {
		apiError(w, http.StatusBadRequest, "chmod "+p+" failed: "+strings.TrimSpace(string(res.Stderr)))
		return
	}
	w.WriteHeader(http.StatusOK)
}
