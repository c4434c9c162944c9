package vercelserver

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// maxUpload bounds one fs/write, compressed and extracted.
const maxUpload = 64 << 20

// exitKilled is the exit code of a command killed by a signal (a timeout,
// a kill), as a shell reports SIGKILL.
const exitKilled = 137

// command is one command of a session.
type command struct {
	sb       *sbx
	id       string
	name     string
	args     []string
	cwd      string
	started  time.Time
	done     chan struct{}
	pidCh    chan struct{} // closed once pid is known
	killedCh chan struct{} // closed once a kill was delivered
	pid      int

	mu       sync.Mutex
	exitCode *int
	duration time.Duration
	killed   bool
	killOnce sync.Once
	stopErr  string // set when the session ended under the command
}

func (c *command) json() map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := map[string]any{"id": c.id, "name": c.name, "args": c.args, "cwd": c.cwd, "sessionId": c.sb.sessionID,
		"exitCode": nil, "startedAt": c.started.UnixMilli()}
	if c.exitCode != nil {
		m["exitCode"] = *c.exitCode
		m["durationMs"] = c.duration.Milliseconds()
	}
	return m
}

// cmdReq is the body of POST .../cmd (api-client runCommand).
type cmdReq struct {
	Command *string           `json:"command"`
	Args    []string          `json:"args"`
	Cwd     *string           `json:"cwd"`
	Env     map[string]string `json:"env"`
	Sudo    *bool             `json:"sudo"`
	Wait    *bool             `json:"wait"`
	Logs    *bool             `json:"logs"`
	Timeout *int64            `json:"timeout"`
}

// startWrapper reports the command's pid on stderr, then execs it, which
// keeps the pid; the Docker backend's exec wrapper has made that pid a
// session leader, so killing its process group kills the command and what
// it started. The server kills that way, in a command of its own, rather
// than by cancelling the exec, which would make the Docker backend take the
// whole sandbox down: a Vercel session outlives a command that timed out.
const startWrapper = `printf '\036vercelserver-pid:%s\036' "$$" >&2; exec "$@"`

const pidMarker = "\x1evercelserver-pid:"

// killScript kills the process group of $1.
const killScript = `kill -9 -- "-$1" 2>/dev/null; kill -9 "$1" 2>/dev/null; true`

func (s *Server) runCmd(w http.ResponseWriter, r *http.Request, sb *sbx) {
	var req cmdReq
	if err := decodeStrict(r, &req); err != nil {
		apiError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	switch {
	case req.Command == nil || *req.Command == "":
		apiError(w, http.StatusBadRequest, "bad_request", "command is required")
		return
	case req.Sudo != nil && *req.Sudo:
		apiError(w, http.StatusBadRequest, "bad_request", "sudo is not supported by this conformance server")
		return
	case req.Timeout != nil && *req.Timeout < 1:
		apiError(w, http.StatusBadRequest, "bad_request", "timeout must be a positive number of milliseconds")
		return
	}
	for k := range req.Env {
		if !envName.MatchString(k) {
			apiError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("env key %q is not a variable name", k))
			return
		}
	}
	if !sb.running() {
		gone(w, sb)
		return
	}
	cwd := WorkDir
	if req.Cwd != nil && *req.Cwd != "" {
		cwd = *req.Cwd
	}
	c := &command{sb: sb, id: randomID("cmd_", 12), name: *req.Command, args: append([]string{}, req.Args...), cwd: cwd,
		started: time.Now(), done: make(chan struct{}), pidCh: make(chan struct{}), killedCh: make(chan struct{})}
	sb.mu.Lock()
	sb.cmds[c.id] = c
	sb.mu.Unlock()
	s.updateRecord(sb.name, func(rec *Record) { rec.CommandEnvs = append(rec.CommandEnvs, maps.Clone(req.Env)) })
	var timeout time.Duration
	if req.Timeout != nil {
		timeout = time.Duration(*req.Timeout) * time.Millisecond
	}
	if req.Wait == nil || !*req.Wait {
		go c.run(req.Env, timeout, io.Discard, io.Discard)
		writeJSON(w, http.StatusOK, map[string]any{"command": c.json()})
		return
	}
	st := &ndjson{w: w}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	st.line(map[string]any{"command": c.json()})
	c.run(req.Env, timeout, logWriter{st, "stdout"}, logWriter{st, "stderr"})
	c.mu.Lock()
	stopErr := c.stopErr
	c.mu.Unlock()
	if stopErr != "" {
		st.line(map[string]any{"stream": "error", "data": map[string]any{"code": "sandbox_stopped", "message": stopErr}})
		return
	}
	st.line(map[string]any{"command": c.json()})
}

// ndjson writes JSON lines and flushes each.
type ndjson struct {
	mu  sync.Mutex
	w   http.ResponseWriter
	err error
}

func (n *ndjson) line(v any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.err != nil {
		return
	}
	b, _ := json.Marshal(v)
	if _, n.err = n.w.Write(append(b, '\n')); n.err == nil {
		if f, ok := n.w.(http.Flusher); ok {
			f.Flush()
		}
	}
}

// logWriter turns output into log lines; a client gone does not stop the
// command (a Vercel command outlives its request).
type logWriter struct {
	n      *ndjson
	stream string
}

func (l logWriter) Write(b []byte) (int, error) {
	l.n.line(map[string]any{"stream": l.stream, "data": string(b)})
	return len(b), nil
}

// run runs the command to its end, killing it at its timeout.
func (c *command) run(env map[string]string, timeout time.Duration, stdout, stderr io.Writer) {
	defer close(c.done)
	if timeout > 0 {
		t := time.AfterFunc(timeout, c.kill)
		defer t.Stop()
	}
	marker := &markerStrip{next: stderr, found: func(pid int) { c.pid = pid; close(c.pidCh) }}
	argv := append([]string{"/bin/sh", "-c", startWrapper, "sh", c.name}, c.args...)
	res, err := c.sb.docker.Run(context.Background(), argv, backends.RunOptions{
		Env: env, Workdir: c.cwd, Timeout: c.sb.srv.cfg.MaxTimeout, Stdout: stdout, Stderr: marker})
	c.mu.Lock()
	defer c.mu.Unlock()
	c.duration = time.Since(c.started)
	code := res.ExitCode
	switch {
	case c.stopErr != "":
		return
	case err != nil && errors.Is(err, model.ErrSandboxGone):
		c.stopErr = fmt.Sprintf("the sandbox session %s stopped while the command ran", c.sb.sessionID)
		return
	case c.killed:
		code = exitKilled
	case err != nil:
		// The command could not start (a missing program, a bad cwd): a
		// shell would report 127.
		code = 127
	}
	c.exitCode = &code
}

// kill kills the command's processes, once its pid is known; killed is
// closed when the signal was delivered (or the command had ended).
func (c *command) kill() {
	c.killOnce.Do(func() {
		c.mu.Lock()
		c.killed = true
		c.mu.Unlock()
		go func() {
			defer close(c.killedCh)
			select {
			case <-c.pidCh:
			case <-c.done:
				return
			}
			for {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				_, err := c.sb.docker.Run(ctx, []string{"/bin/sh", "-c", killScript, "sh", strconv.Itoa(c.pid)}, backends.RunOptions{Timeout: 30 * time.Second})
				cancel()
				if err == nil || errors.Is(err, model.ErrSandboxGone) {
					return
				}
				select {
				case <-c.done:
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		}()
	})
}

// sessionEnded marks the command cut short by the session's end.
func (c *command) sessionEnded() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.exitCode == nil && c.stopErr == "" {
		c.stopErr = fmt.Sprintf("the sandbox session %s stopped while the command ran", c.sb.sessionID)
	}
}

// markerStrip removes the wrapper's pid marker from the front of stderr.
type markerStrip struct {
	next  io.Writer
	found func(pid int)
	buf   []byte
	done  bool
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
				m.found(pid)
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

func (s *Server) lookupCmd(w http.ResponseWriter, r *http.Request, sb *sbx) (*command, bool) {
	sb.mu.Lock()
	c, ok := sb.cmds[r.PathValue("cid")]
	sb.mu.Unlock()
	if !ok {
		apiError(w, http.StatusNotFound, "not_found", fmt.Sprintf("Command %q not found", r.PathValue("cid")))
	}
	return c, ok
}

// getCmd serves GET .../cmd/{cid}, with ?wait=true until it finished.
func (s *Server) getCmd(w http.ResponseWriter, r *http.Request, sb *sbx) {
	c, ok := s.lookupCmd(w, r, sb)
	if !ok {
		return
	}
	if r.URL.Query().Get("wait") == "true" {
		select {
		case <-c.done:
		case <-r.Context().Done():
			return
		}
		c.mu.Lock()
		stopErr := c.stopErr
		c.mu.Unlock()
		if stopErr != "" {
			gone(w, sb)
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"command": c.json()})
}

// killCmd serves POST .../cmd/{cid}/kill: SIGTERM and SIGKILL both kill.
func (s *Server) killCmd(w http.ResponseWriter, r *http.Request, sb *sbx) {
	var req struct {
		Signal *int `json:"signal"`
	}
	if err := decodeStrict(r, &req); err != nil {
		apiError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	if req.Signal == nil || *req.Signal != 9 && *req.Signal != 15 {
		apiError(w, http.StatusBadRequest, "bad_request", "signal must be 9 (SIGKILL) or 15 (SIGTERM) here")
		return
	}
	c, ok := s.lookupCmd(w, r, sb)
	if !ok {
		return
	}
	if !sb.running() {
		gone(w, sb)
		return
	}
	c.kill()
	// The answer comes once the signal was delivered, so that a caller
	// that goes on finds the command's processes gone.
	select {
	case <-c.killedCh:
	case <-r.Context().Done():
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"command": c.json()})
}

// write serves POST .../fs/write: a gzipped tar extracted under the
// directory of the x-cwd header, each file with its mode.
func (s *Server) write(w http.ResponseWriter, r *http.Request, sb *sbx) {
	if ct := r.Header.Get("Content-Type"); ct != "application/gzip" {
		apiError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("content-type must be application/gzip, got %q", ct))
		return
	}
	dir := r.Header.Get("x-cwd")
	if !path.IsAbs(dir) {
		apiError(w, http.StatusBadRequest, "bad_request", "x-cwd must be an absolute directory")
		return
	}
	if !sb.running() {
		gone(w, sb)
		return
	}
	zr, err := gzip.NewReader(io.LimitReader(r.Body, maxUpload+1))
	if err != nil {
		apiError(w, http.StatusBadRequest, "bad_request", "the body is not gzip")
		return
	}
	tr := tar.NewReader(io.LimitReader(zr, maxUpload+1))
	total := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			apiError(w, http.StatusBadRequest, "bad_request", "the body is not a valid tar: "+err.Error())
			return
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(io.LimitReader(tr, maxUpload+1-int64(total)))
		total += len(data)
		if err != nil || total > maxUpload {
			apiError(w, http.StatusRequestEntityTooLarge, "payload_too_large", fmt.Sprintf("the files exceed %d bytes", maxUpload))
			return
		}
		p := path.Join(dir, h.Name)
		if err := sb.docker.Upload(r.Context(), p, data, h.Mode&0o7777); err != nil {
			if errors.Is(err, model.ErrSandboxGone) {
				gone(w, sb)
				return
			}
			apiError(w, http.StatusInternalServerError, "internal_error", "writing "+p+": "+err.Error())
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{})
}
