package kubernetes

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
)

// maxOutput bounds what one command may print on each stream (as on
// Docker): past it the command is stopped, never silently truncated.
const maxOutput = 64 << 20

var errOverflow = errors.New("output limit exceeded")

// capWriter buffers one stream (or forwards it to a sink) up to max.
type capWriter struct {
	max  int
	sink io.Writer
	stop func(error) // ends the stream on an overflow or a sink's error
	mu   sync.Mutex
	n    int
	buf  bytes.Buffer
	keep bytes.Buffer // a sink's first 32 KiB, for classifying failures
}

func (c *capWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n+len(p) > c.max {
		c.stop(errOverflow)
		return 0, errOverflow
	}
	c.n += len(p)
	if c.sink == nil {
		return c.buf.Write(p)
	}
	if room := 32<<10 - c.keep.Len(); room > 0 {
		c.keep.Write(p[:min(room, len(p))])
	}
	if _, err := c.sink.Write(p); err != nil {
		err = fmt.Errorf("writing the command's output: %w", err)
		c.stop(err)
		return 0, err
	}
	return len(p), nil
}

func (c *capWriter) bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sink != nil {
		return nil
	}
	return c.buf.Bytes()
}

func (c *capWriter) seen() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sink != nil {
		return c.keep.Bytes()
	}
	return c.buf.Bytes()
}

// execBlock is what the wrapper reads first on stdin: the working
// directory and the environment, secrets included. It never appears in the
// exec's URL or argv (which the API server logs), only in the stream.
func execBlock(workdir string, env []string) []byte {
	body := workdir + "\x00" + strings.Join(env, "\x00")
	out := make([]byte, 4, 4+len(body))
	binary.BigEndian.PutUint32(out, uint32(len(body)))
	return append(out, body...)
}

// execResult is one exec as it happened.
type execResult struct {
	exitCode int
	stdout   []byte
	stderr   []byte
	errSeen  []byte
	pid      int   // the session the wrapper reported; 0 if unknown
	stopped  error // why the stream was cut short: ctx, overflow, a sink; nil if it ended
}

type execOut struct{ stdout, stderr io.Writer }

// executor opens an exec's streams: the WebSocket protocol first, SPDY where
// the API server refuses the upgrade.
func (b *k8sBackend) executor(pod string, cmd []string, stdin bool) (remotecommand.Executor, error) {
	req := b.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(b.namespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: sandboxCtr, Command: cmd, Stdin: stdin, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(b.rc, http.MethodGet, req.URL().String())
	if err != nil {
		return nil, fmt.Errorf("exec websocket: %w", err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(b.rc, http.MethodPost, req.URL())
	if err != nil {
		return nil, fmt.Errorf("exec spdy: %w", err)
	}
	return remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		var uf *httpstream.UpgradeFailureError
		if errors.As(err, &uf) {
			// A pod (or container) that is not there is not there for
			// SPDY either, whose error would lose the status.
			return !apierrors.IsNotFound(uf.Cause)
		}
		return httpstream.IsHTTPSProxyError(err)
	})
}

// exec runs cmd in the sandbox container. wrap runs it under the wrapper,
// with the block (workdir, env) ahead of stdin. API failures are errors;
// a ctx that ends first or an overflow is execResult.stopped, with the
// command's processes left for the caller to kill.
func (b *k8sBackend) exec(ctx context.Context, pod string, cmd []string, stdin []byte, block []byte, out execOut) (execResult, error) {
	var res execResult
	wrapped := block != nil
	if wrapped {
		cmd = append([]string{wrapBin, "run", "--"}, cmd...)
	}
	var in io.Reader
	if wrapped {
		in = io.MultiReader(bytes.NewReader(block), bytes.NewReader(stdin))
	} else if stdin != nil {
		in = bytes.NewReader(stdin)
	}
	ex, err := b.executor(pod, cmd, in != nil)
	if err != nil {
		return res, err
	}
	// A writer's error does not end remotecommand's stream (it logs it and
	// goes on reading): an overflow or a failing sink cancels the stream.
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	so := &capWriter{max: maxOutput, sink: out.stdout, stop: cancel}
	se := &capWriter{max: maxOutput, sink: out.stderr, stop: cancel}
	mw := &backends.MarkerWriter{Next: se, Done: !wrapped}
	err = ex.StreamWithContext(sctx, remotecommand.StreamOptions{Stdin: in, Stdout: so, Stderr: mw})
	res.stdout, res.stderr, res.errSeen, res.pid = so.bytes(), se.bytes(), se.seen(), mw.PID()
	var code utilexec.CodeExitError
	switch {
	case err == nil:
		return res, nil
	case errors.As(err, &code):
		res.exitCode = code.ExitStatus()
		return res, nil
	case ctx.Err() != nil:
		res.stopped = ctx.Err()
		return res, nil
	case context.Cause(sctx) != nil:
		res.stopped = context.Cause(sctx)
		return res, nil
	}
	// The API server's answer to a refused upgrade, not the wrapper's text.
	var uf *httpstream.UpgradeFailureError
	var st apierrors.APIStatus
	if errors.As(err, &uf) && errors.As(uf.Cause, &st) {
		err = uf.Cause
	}
	return res, apiError("exec", err)
}
