package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
)

// maxOutput bounds what one command may print on each stream, buffered or
// streamed. Untrusted code could otherwise exhaust the caller's memory or
// disk; past it the command is stopped and ResourceLimitExceeded(output)
// returned, never silently truncated output.
const maxOutput = 64 << 20

// sinkGrace is how long a timeout waits for a caller's sink that blocks.
const sinkGrace = 250 * time.Millisecond

// wrapperScript runs every command: it reports its own pid on stderr, then
// replaces itself with the command. Every exec is started as a session and
// process group leader, so the pid is also the id of the session and group
// the command's processes belong to, which is what a timeout kills.
const wrapperScript = `printf '\036sandboxio-pid:%s\036' "$$" >&2; exec "$@"`

// probeScript inspects the sandbox from inside, and with "kill" first kills
// a command's session. Only shell builtins run, so it works at the process
// ceiling. It prints one line:
//
//	<RS>sandboxio-probe<RS> left=N procs=N peak=N pids_max=N oom_kill=N
//
// (live processes of the session, all, all before any kill, the pids and
// memory cgroups' counts, empty where not visible). A count no scan could
// establish is -1, never 0: under gVisor a fork bomb can empty /proc's listing.
const probeScript = `sid=$1; mode=$2; root=${3:-/proc}
scan() {
  all=0; sess=0
  for d in "$root"/[0-9]*; do
    read -r st 2>/dev/null <"$d/stat" || continue
    st=${st##*) }
    set -- $st
    [ "$1" = Z ] && continue
    all=$((all+1))
    if [ -n "$sid" ] && { [ "$3" = "$sid" ] || [ "$4" = "$sid" ]; }; then
      [ "$mode" = kill ] && kill -9 "${d##*/}" 2>/dev/null
      sess=$((sess+1))
    fi
  done
}
count() {
  tries=0
  while :; do
    scan
    [ $all -gt 0 ] && return
    tries=$((tries+1))
    [ $tries -ge 3 ] && { all=-1; sess=-1; return; }
  done
}
kill_=$mode; mode=
count; peak=$all
mode=$kill_
left=0
if [ -n "$sid" ]; then
  n=0
  while :; do
    [ "$mode" = kill ] && kill -9 -"$sid" 2>/dev/null
    scan
    if [ $all -eq 0 ]; then left=-1; else left=$sess; fi
    [ "$mode" = kill ] || { [ $left -ge 0 ] || { count; left=$sess; }; break; }
    [ $left -eq 0 ] && break
    n=$((n+1))
    [ $n -ge 40 ] && break
  done
fi
mode=
count; procs=$all
pm=
for f in /sys/fs/cgroup/pids/pids.events /sys/fs/cgroup/pids.events; do
  [ -r "$f" ] || continue
  while read -r k v; do [ "$k" = max ] && pm=$v; done <"$f"
  break
done
oom=
for f in /sys/fs/cgroup/memory/memory.oom_control /sys/fs/cgroup/memory.events; do
  [ -r "$f" ] || continue
  while read -r k v; do [ "$k" = oom_kill ] && oom=$v; done <"$f"
  break
done
printf '\036sandboxio-probe\036 left=%s procs=%s peak=%s pids_max=%s oom_kill=%s\n' "$left" "$procs" "$peak" "$pm" "$oom"`

// probeMarker starts the probe's report. The script writes its separators
// as escapes, so the marker appears only in what the script printed, never
// in a daemon error that quotes the command line (the script included):
// CI once read such an error as a report of zero processes.
const probeMarker = "\x1esandboxio-probe\x1e "

// execResult is one exec as it happened.
type execResult struct {
	exitCode int
	// stdout and stderr are what the command printed on the streams that
	// were not streamed to a sink (execOut), and, on a streamed stdout,
	// what the daemon wrote before the command started (see gateWriter).
	stdout []byte
	stderr []byte
	// errSeen is stderr as far as the classification of a failure needs
	// it: all of it when buffered, its first and last stderrKeep bytes when
	// streamed.
	errSeen []byte
	pid     int   // in-sandbox pid (= session id) the wrapper reported; 0 if unknown
	ran     bool  // the wrapper's marker was seen: the command itself started
	stopped error // why the exec was cut short: ctx error, errOverflow or a sinkError; nil if it ended
}

// execOut are the sinks of one exec: a nil one is buffered into execResult.
type execOut struct {
	stdout, stderr io.Writer
}

var errOverflow = errors.New("output limit exceeded")

// sinkError is a sink that refused the command's output (the caller's
// writer failed): the command is stopped, as for errOverflow.
type sinkError struct{ err error }

func (e sinkError) Error() string { return "writing the command's output: " + e.err.Error() }
func (e sinkError) Unwrap() error { return e.err }

// streamError is an exec's output stream that failed while the command
// ran: the command is stopped and the call fails, never returning what
// came before as all of its output.
type streamError struct{ err error }

func (e streamError) Error() string { return "reading the command's output: " + e.err.Error() }
func (e streamError) Unwrap() error { return e.err }

// stderrKeep is how much of a streamed stderr is kept, at its start and at
// its end, for recognising a cap that was hit (fork refusals, ENOSPC).
const stderrKeep = 32 << 10

// capWriter counts what one stream printed and refuses to go past max. With
// a sink it forwards every write as it comes (keeping only the start and end
// of it when keep is set); without one it buffers.
type capWriter struct {
	max  int
	sink io.Writer
	keep bool

	mu       sync.Mutex
	n        int
	buf      bytes.Buffer // everything (no sink), or the first stderrKeep bytes (keep)
	tail     []byte       // keep: the last stderrKeep bytes past buf
	tailCut  bool         // keep: bytes were dropped between buf and tail
	detached bool         // the exec is over: write nothing more to the sink
}

func (c *capWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.n+len(p) > c.max {
		c.mu.Unlock()
		return 0, errOverflow
	}
	c.n += len(p)
	if c.sink == nil {
		defer c.mu.Unlock()
		return c.buf.Write(p)
	}
	if c.keep {
		c.remember(p)
	}
	detached := c.detached
	c.mu.Unlock()
	if detached {
		return len(p), nil
	}
	if _, err := c.sink.Write(p); err != nil {
		return 0, sinkError{err}
	}
	return len(p), nil
}

// remember keeps the first and the last stderrKeep bytes; mu is held.
func (c *capWriter) remember(p []byte) {
	if room := stderrKeep - c.buf.Len(); room > 0 {
		n := min(room, len(p))
		c.buf.Write(p[:n])
		p = p[n:]
	}
	if len(p) == 0 {
		return
	}
	c.tail = append(c.tail, p...)
	if over := len(c.tail) - stderrKeep; over > 0 {
		c.tail = append(c.tail[:0], c.tail[over:]...)
		c.tailCut = true
	}
}

// detach stops forwarding to the sink, for a copy still running after the
// exec ended (a sink that blocks).
func (c *capWriter) detach() {
	c.mu.Lock()
	c.detached = true
	c.mu.Unlock()
}

// bytes returns the buffer (no sink), or what was kept of the stream (keep).
func (c *capWriter) bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sink == nil || !c.keep {
		if c.sink != nil {
			return nil
		}
		return c.buf.Bytes()
	}
	out := append([]byte(nil), c.buf.Bytes()...)
	if c.tailCut {
		out = append(out, "\n[...]\n"...)
	}
	return append(out, c.tail...)
}

// gateHold bounds what gateWriter holds back while it waits for the marker.
const gateHold = 64 << 10

// gateWriter holds a streamed stdout back until the wrapper's marker shows
// that the command itself started: until then only the daemon writes on
// the stream (why it could not start the process), which is classified, not
// handed to the caller. The marker normally comes first; held output is let
// through as soon as it does, or once more than gateHold bytes wait.
type gateWriter struct {
	next io.Writer
	mu   sync.Mutex
	held []byte
	open bool
}

func (g *gateWriter) Write(p []byte) (int, error) {
	n := len(p) // what this call was given, whatever it forwards
	g.mu.Lock()
	if !g.open {
		g.held = append(g.held, p...)
		if len(g.held) <= gateHold {
			g.mu.Unlock()
			return n, nil
		}
		g.open = true
		p, g.held = g.held, nil
	}
	g.mu.Unlock()
	if _, err := g.next.Write(p); err != nil {
		return 0, err
	}
	// Not len(p): after releasing what it held, p is more than it was
	// given, and io.Writer's contract (StdCopy checks it) wants n. A larger
	// count ended the copy with io.ErrShortWrite while the command kept
	// running, blocked on a pipe nobody read, until its timeout.
	return n, nil
}

// release lets held output through: the command started.
func (g *gateWriter) release() error {
	g.mu.Lock()
	if g.open {
		g.mu.Unlock()
		return nil
	}
	g.open = true
	p := g.held
	g.held = nil
	g.mu.Unlock()
	if len(p) == 0 {
		return nil
	}
	_, err := g.next.Write(p)
	return err
}

// withheld returns what never got through: the daemon's own words.
func (g *gateWriter) withheld() []byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open {
		return nil
	}
	return g.held
}

// exec runs one command and collects its output. API failures are returned as
// errors; a ctx that ends first or an output overflow is reported in
// execResult.stopped, with the exec's processes left for the caller to kill.
func (s *sandbox) exec(ctx context.Context, cmd []string, stdin []byte, env []string, workdir string, wrap bool, out execOut) (execResult, error) {
	// The container's death cancels every call of the exec: the daemon does
	// not always end an exec's stream, or answer about it, when the
	// container dies under it (gVisor).
	dctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if died := s.b.events.died(s.id); died != nil {
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			select {
			case <-died:
				cancel(errContainerDied)
			case <-stop:
			}
		}()
	}
	res, err := s.execIn(dctx, cmd, stdin, env, workdir, wrap, out)
	if (err != nil || res.stopped != nil) && errors.Is(context.Cause(dctx), errContainerDied) && ctx.Err() == nil {
		return res, fmt.Errorf("exec: container %s: %w", short(s.id), errContainerDied)
	}
	return res, err
}

var errContainerDied = errors.New("the container is not running")

func (s *sandbox) execIn(ctx context.Context, cmd []string, stdin []byte, env []string, workdir string, wrap bool, out execOut) (execResult, error) {
	var res execResult
	if wrap {
		// $0 of the wrapper is "sh": a shell error about the command
		// ("sh: exec: line 0: python3: not found") reads as the command's
		// own, never as a line of the sandboxio CLI.
		cmd = append([]string{"/bin/sh", "-c", wrapperScript, "sh"}, cmd...)
	}
	cli := s.b.cli
	cr, err := cli.ContainerExecCreate(ctx, s.id, container.ExecOptions{
		AttachStdin: stdin != nil, AttachStdout: true, AttachStderr: true,
		Env: env, WorkingDir: workdir, Cmd: cmd,
	})
	if err != nil {
		return stoppedOr(ctx, res, "exec create", err)
	}
	hj, err := cli.ContainerExecAttach(ctx, cr.ID, container.ExecAttachOptions{})
	if err != nil {
		return stoppedOr(ctx, res, "exec start", err)
	}
	defer hj.Close()

	st := newExecStreams(out, wrap)
	copied := make(chan error, 1)
	go func() {
		if stdin != nil {
			go func() {
				_, _ = hj.Conn.Write(stdin)
				_ = hj.CloseWrite()
			}()
		}
		_, err := stdcopy.StdCopy(st.stdoutW, st.stderr, hj.Reader)
		copied <- err
	}()
	stopped := st.await(ctx, hj.Close, copied)
	st.collect(&res)
	if stopped != nil {
		res.stopped = stopped
		return res, nil
	}
	return s.awaitExit(ctx, cr.ID, res)
}

// stoppedOr reports a failed API call of an exec: as the exec's stop when
// ctx ended first, else as an error.
func stoppedOr(ctx context.Context, res execResult, what string, err error) (execResult, error) {
	if ctx.Err() != nil {
		res.stopped = ctx.Err()
		return res, nil
	}
	return res, fmt.Errorf("%s: %w", what, err)
}

// execStreams are the writers one exec's output is copied into: stdout
// capped (behind a gate while the wrapper has not started the command and
// stdout goes to a sink), stderr capped behind the wrapper's pid marker.
type execStreams struct {
	out     execOut
	stdout  *capWriter
	errCap  *capWriter
	stderr  *backends.MarkerWriter
	stdoutW io.Writer
	gate    *gateWriter
}

func newExecStreams(out execOut, wrap bool) *execStreams {
	st := &execStreams{out: out}
	st.stdout = &capWriter{max: maxOutput, sink: out.stdout}
	st.errCap = &capWriter{max: maxOutput, sink: out.stderr, keep: out.stderr != nil}
	st.stderr = &backends.MarkerWriter{Next: st.errCap, Done: !wrap}
	st.stdoutW = st.stdout
	if wrap && out.stdout != nil {
		st.gate = &gateWriter{next: st.stdout}
		st.stdoutW = st.gate
		st.stderr.OnPid = func() error {
			if err := st.gate.release(); err != nil {
				return sinkError{err}
			}
			return nil
		}
	}
	return st
}

// await waits for the copy of the output to end, or for ctx. It returns why
// the exec was cut short (an overflow, a sink's error or ctx's), or nil when
// the stream ended by itself; cut short, the connection is closed.
func (st *execStreams) await(ctx context.Context, closeConn func(), copied <-chan error) error {
	select {
	case err := <-copied:
		var se sinkError
		if errors.Is(err, errOverflow) || errors.As(err, &se) {
			closeConn()
			return err
		}
		if err != nil {
			// The stream broke while the command ran: what it prints
			// next goes nowhere and it would block until its timeout, and
			// what came so far is not all of its output. It is stopped.
			closeConn()
			return streamError{err}
		}
		return nil
	case <-ctx.Done():
		// Closing the connection ends the copy; the exec's processes keep
		// running until the caller kills them.
		closeConn()
		if st.out.stdout == nil && st.out.stderr == nil {
			if err := <-copied; err != nil { // ends with the closed connection
				tracef("exec stream after %v: %v", ctx.Err(), err)
			}
		} else {
			// A caller's sink may block (a pipe nobody reads): the timeout
			// does not wait for it. What the copy still has is dropped.
			select {
			case err := <-copied:
				if err != nil { // ends with the closed connection
					tracef("exec stream after %v: %v", ctx.Err(), err)
				}
			case <-time.After(sinkGrace):
				st.stdout.detach()
				st.errCap.detach()
				tracef("exec stream: a sink still blocks %s after %v", sinkGrace, ctx.Err())
			}
		}
		return ctx.Err()
	}
}

// collect puts what the streams hold into res.
func (st *execStreams) collect(res *execResult) {
	res.stdout, res.stderr = st.stdout.bytes(), st.errCap.bytes()
	res.errSeen = res.stderr
	if st.out.stderr != nil {
		res.stderr = nil
	}
	if st.gate != nil {
		res.stdout = st.gate.withheld()
	}
	res.pid = st.stderr.PID()
	res.ran = res.pid != 0
}

// awaitExit waits for the daemon to record the exec's exit code.
//
// The stream ends when the last holder of the exec's stdout and stderr
// closes them; the daemon may take a moment more to record the exit.
// When the whole sandbox died under the exec (gVisor's sentry killed
// for memory), the daemon keeps reporting the exec as running, so after
// a while the container itself is asked.
func (s *sandbox) awaitExit(ctx context.Context, execID string, res execResult) (execResult, error) {
	cli := s.b.cli
	streamEnd := time.Now()
	for {
		ins, err := cli.ContainerExecInspect(ctx, execID)
		if err != nil {
			return stoppedOr(ctx, res, "exec inspect", err)
		}
		if !ins.Running {
			res.exitCode = ins.ExitCode
			return res, nil
		}
		wait := 2 * time.Millisecond
		if time.Since(streamEnd) > 100*time.Millisecond {
			c, err := cli.ContainerInspect(ctx, s.id)
			switch {
			case cerrdefs.IsNotFound(err):
				return res, fmt.Errorf("exec inspect: %w", err)
			case err == nil && c.State != nil && !c.State.Running:
				return res, fmt.Errorf("exec inspect: container %s is not running", short(s.id))
			}
			wait = 50 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			res.stopped = ctx.Err()
			return res, nil
		case <-time.After(wait):
		}
	}
}

// probeResult is the parsed output of probeScript.
type probeResult struct {
	left, procs, peak int
	pidsMax, oomKil   int64 // -1 where not visible
}

// probe runs probeScript. With sid > 0 it counts that session's processes,
// and with kill first kills them. Its errors say why it could not run: the
// container is gone, or no process could be started (isExhausted).
func (s *sandbox) probe(ctx context.Context, sid int, kill bool) (probeResult, error) {
	arg, mode := "", ""
	if sid > 0 {
		arg = strconv.Itoa(sid)
	}
	if kill {
		mode = "kill"
	}
	res, err := s.exec(ctx, []string{"/bin/sh", "-c", probeScript, "sandboxio-probe", arg, mode}, nil, nil, "/", false, execOut{})
	if err != nil {
		return probeResult{}, err
	}
	if res.stopped != nil {
		return probeResult{}, fmt.Errorf("probe: %w", res.stopped)
	}
	pr, ok := parseProbe(res.stdout)
	if !ok {
		// The daemon writes an exec it could not start into the stream.
		out := strings.TrimSpace(string(res.stdout) + " " + string(res.stderr))
		if len(out) > 512 {
			// The daemon's reason comes last, after the command line.
			out = out[:128] + " ... " + out[len(out)-384:]
		}
		return probeResult{}, fmt.Errorf("probe: exit %d: %s", res.exitCode, out)
	}
	return pr, nil
}

// parseProbe reads the probe's report. Every count must be there and be a
// number: a report it cannot read in full is no report.
func parseProbe(stdout []byte) (probeResult, bool) {
	out := string(stdout)
	i := strings.LastIndex(out, probeMarker)
	if i < 0 {
		return probeResult{}, false
	}
	line, _, _ := strings.Cut(out[i+len(probeMarker):], "\n")
	pr := probeResult{pidsMax: -1, oomKil: -1}
	const need = 1<<0 | 1<<1 | 1<<2 // left, procs, peak
	seen := 0
	for _, f := range strings.Fields(line) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return probeResult{}, false
		}
		if v == "" && (k == "pids_max" || k == "oom_kill") {
			continue // not visible here
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < -1 {
			return probeResult{}, false
		}
		switch k {
		case "left":
			pr.left, seen = int(n), seen|1<<0
		case "procs":
			pr.procs, seen = int(n), seen|1<<1
		case "peak":
			pr.peak, seen = int(n), seen|1<<2
		case "pids_max":
			pr.pidsMax = n
		case "oom_kill":
			pr.oomKil = n
		default:
			return probeResult{}, false
		}
	}
	return pr, seen == need
}

// isExhausted recognizes the runtime failing to start a process because the
// sandbox is at its process ceiling: runc reports the cgroup's EAGAIN,
// gVisor's RLIMIT_NPROC "try again". These come from the daemon, not from the
// sandboxed code.
func isExhausted(err error) bool {
	if err == nil {
		return false
	}
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "resource temporarily unavailable") || strings.Contains(s, "try again") ||
		strings.Contains(s, "cannot allocate memory") && strings.Contains(s, "fork")
}

// isContainerGone recognizes an API error meaning the container no longer
// runs: removed (lifetime over, killed, reaped) or stopped.
func isContainerGone(err error) bool {
	if err == nil {
		return false
	}
	if cerrdefs.IsNotFound(err) || errors.Is(err, errContainerDied) {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "is not running") || strings.Contains(s, "No such container") ||
		strings.Contains(s, "No such exec") || strings.Contains(s, "is paused") ||
		strings.Contains(s, "marked for removal") || strings.Contains(s, "is restarting") ||
		strings.Contains(s, "stopped state") || strings.Contains(s, "state stopped") || strings.Contains(s, "deleted state")
}
