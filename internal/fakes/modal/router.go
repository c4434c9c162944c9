package modalserver

import (
	"context"
	"errors"
	"path"
	"strings"
	"sync"
	"time"

	pb "github.com/modal-labs/libmodal/modal-go/proto/modal_proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// TaskGetCommandRouterAccess hands out the command router's address and a
// JWT scoped to the task.
func (s *Server) TaskGetCommandRouterAccess(_ context.Context, req *pb.TaskGetCommandRouterAccessRequest) (*pb.TaskGetCommandRouterAccessResponse, error) {
	sb, err := s.byTask(req.GetTaskId())
	if err != nil {
		return nil, err
	}
	if sb.finished() {
		return nil, status.Errorf(codes.FailedPrecondition, "task %s has finished", req.GetTaskId())
	}
	return pb.TaskGetCommandRouterAccessResponse_builder{Jwt: s.issueJWT("router", req.GetTaskId()), Url: s.routerURL()}.Build(), nil
}

// routerServer is the TaskCommandRouter service: commands run in the
// task's Docker sandbox.
type routerServer struct {
	pb.UnimplementedTaskCommandRouterServer
	s *Server
}

// stream is one output stream of an exec, readable from any offset.
type stream struct {
	mu      sync.Mutex
	buf     []byte
	changed chan struct{}
	closed  bool
}

func newStream() *stream { return &stream{changed: make(chan struct{})} }

func (st *stream) Write(p []byte) (int, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.buf = append(st.buf, p...)
	close(st.changed)
	st.changed = make(chan struct{})
	return len(p), nil
}

func (st *stream) close() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.closed {
		st.closed = true
		close(st.changed)
	}
}

// from returns what follows offset, whether the stream has ended, and a
// channel closed on the next change.
func (st *stream) from(off uint64) ([]byte, bool, <-chan struct{}) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if off > uint64(len(st.buf)) {
		off = uint64(len(st.buf))
	}
	return st.buf[off:], st.closed, st.changed
}

type exec struct {
	id, task       string
	sb             *sandbox
	stdout, stderr *stream
	pipeOut        bool
	pipeErr        bool
	done           chan struct{}
	code           int32
	signal         int32 // nonzero: killed by this signal
	failure        error // a gRPC status for Wait: timed out, sandbox gone
}

func (r *routerServer) sandboxOf(task string) (*sandbox, error) {
	sb, err := r.s.byTask(task)
	if err != nil {
		return nil, err
	}
	if sb.finished() {
		return nil, status.Errorf(codes.FailedPrecondition, "task %s has finished", task)
	}
	return sb, nil
}

// TaskExecStart starts a command in the task's sandbox.
func (r *routerServer) TaskExecStart(_ context.Context, req *pb.TaskExecStartRequest) (*pb.TaskExecStartResponse, error) {
	sb, err := r.sandboxOf(req.GetTaskId())
	if err != nil {
		return nil, err
	}
	args := req.GetCommandArgs()
	n := 0
	for _, a := range args {
		n += len(a)
	}
	switch {
	case req.GetExecId() == "":
		return nil, invalid("exec_id is required")
	case len(args) == 0:
		return nil, invalid("command_args is required")
	case n > MaxExecArgs:
		return nil, invalid("command arguments exceed %d bytes", MaxExecArgs)
	case req.HasPtyInfo():
		return nil, status.Error(codes.Unimplemented, "this server has no PTY")
	case req.HasWorkdir() && !path.IsAbs(req.GetWorkdir()):
		return nil, invalid("workdir must be an absolute path")
	case req.GetStderrConfig() == pb.TaskExecStderrConfig_TASK_EXEC_STDERR_CONFIG_STDOUT:
		return nil, status.Error(codes.Unimplemented, "this server keeps stderr separate")
	}
	env := map[string]string{}
	r.s.mu.Lock()
	for _, id := range req.GetSecretIds() {
		sec, ok := r.s.secrets[id]
		if !ok {
			r.s.mu.Unlock()
			return nil, status.Errorf(codes.NotFound, "Secret %s not found", id)
		}
		for k, v := range sec.values {
			env[k] = v
		}
	}
	if _, dup := r.s.execs[req.GetExecId()]; dup {
		r.s.mu.Unlock()
		return nil, status.Errorf(codes.AlreadyExists, "exec %s already exists", req.GetExecId())
	}
	e := &exec{id: req.GetExecId(), task: req.GetTaskId(), sb: sb, stdout: newStream(), stderr: newStream(), done: make(chan struct{}),
		pipeOut: req.GetStdoutConfig() == pb.TaskExecStdoutConfig_TASK_EXEC_STDOUT_CONFIG_PIPE,
		pipeErr: req.GetStderrConfig() == pb.TaskExecStderrConfig_TASK_EXEC_STDERR_CONFIG_PIPE}
	r.s.execs[e.id] = e
	r.s.mu.Unlock()
	workdir := req.GetWorkdir()
	if workdir == "" {
		workdir = sb.workdir
	}
	var timeout time.Duration
	if req.HasTimeoutSecs() && req.GetTimeoutSecs() > 0 {
		timeout = time.Duration(req.GetTimeoutSecs()) * time.Second
	}
	go e.run(args, backends.RunOptions{Timeout: timeout, Env: env, Workdir: workdir, Stdout: e.stdout, Stderr: e.stderr})
	return &pb.TaskExecStartResponse{}, nil
}

// run runs the command; the exec's timeout (or, without one, the
// sandbox's lifetime) is enforced by the Docker backend, which kills the
// command's processes.
func (e *exec) run(args []string, opts backends.RunOptions) {
	defer close(e.done)
	defer e.stdout.close()
	defer e.stderr.close()
	e.sb.mu.Lock()
	box := e.sb.box
	e.sb.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-e.sb.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	res, err := box.Run(ctx, args, opts)
	if !box.Info().Running && !e.sb.finished() {
		// The local sandbox ended under the command (its backend killed it
		// whole when it could not stop the command's processes one by
		// one): on Modal the sandbox would have ended with its container.
		_ = e.sb.finish(pb.GenericResult_GENERIC_STATUS_FAILURE, "the sandbox's container ended")
	}
	switch {
	case err == nil:
		e.code = int32(res.ExitCode)
	case errors.Is(err, model.ErrExecutionTimeout):
		e.failure = status.Errorf(codes.DeadlineExceeded, "exec %s timed out", e.id)
	case errors.Is(err, model.ErrResourceLimitExceeded):
		e.signal = 9 // the sandbox's limit killed it
	case e.sb.finished() || errors.Is(err, model.ErrSandboxGone) || ctx.Err() != nil:
		e.failure = status.Errorf(codes.FailedPrecondition, "task %s has finished", e.task)
	default:
		e.failure = status.Errorf(codes.Internal, "exec failed: %v", redactErr(err, e.sb.secrets))
	}
}

func (r *routerServer) execOf(task, id string) (*exec, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	e, ok := r.s.execs[id]
	if !ok || e.task != task {
		return nil, status.Errorf(codes.NotFound, "exec %s not found", id)
	}
	return e, nil
}

// TaskExecWait waits for the command to end: its exit code, or the signal
// that killed it; a command past its timeout is DeadlineExceeded.
func (r *routerServer) TaskExecWait(ctx context.Context, req *pb.TaskExecWaitRequest) (*pb.TaskExecWaitResponse, error) {
	e, err := r.execOf(req.GetTaskId(), req.GetExecId())
	if err != nil {
		return nil, err
	}
	select {
	case <-e.done:
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	if e.failure != nil {
		return nil, e.failure
	}
	if e.signal != 0 {
		return pb.TaskExecWaitResponse_builder{Signal: &e.signal}.Build(), nil
	}
	return pb.TaskExecWaitResponse_builder{Code: &e.code}.Build(), nil
}

// TaskExecPoll answers at once: the exit status once the command ended.
func (r *routerServer) TaskExecPoll(_ context.Context, req *pb.TaskExecPollRequest) (*pb.TaskExecPollResponse, error) {
	e, err := r.execOf(req.GetTaskId(), req.GetExecId())
	if err != nil {
		return nil, err
	}
	select {
	case <-e.done:
	default:
		return &pb.TaskExecPollResponse{}, nil
	}
	if e.failure != nil {
		return nil, e.failure
	}
	if e.signal != 0 {
		return pb.TaskExecPollResponse_builder{Signal: &e.signal}.Build(), nil
	}
	return pb.TaskExecPollResponse_builder{Code: &e.code}.Build(), nil
}

const stdioChunk = 1 << 20

// TaskExecStdioRead streams one output stream from an offset until the
// command ends.
func (r *routerServer) TaskExecStdioRead(req *pb.TaskExecStdioReadRequest, out grpc.ServerStreamingServer[pb.TaskExecStdioReadResponse]) error {
	if err := checkFields(req); err != nil {
		return err
	}
	e, err := r.execOf(req.GetTaskId(), req.GetExecId())
	if err != nil {
		return err
	}
	st, piped := e.stdout, e.pipeOut
	switch req.GetFileDescriptor() {
	case pb.TaskExecStdioFileDescriptor_TASK_EXEC_STDIO_FILE_DESCRIPTOR_STDOUT:
	case pb.TaskExecStdioFileDescriptor_TASK_EXEC_STDIO_FILE_DESCRIPTOR_STDERR:
		st, piped = e.stderr, e.pipeErr
	default:
		return invalid("unknown file descriptor")
	}
	if !piped {
		return nil
	}
	off := req.GetOffset()
	for {
		data, ended, changed := st.from(off)
		for len(data) > 0 {
			n := min(len(data), stdioChunk)
			if err := out.Send(pb.TaskExecStdioReadResponse_builder{Data: data[:n]}.Build()); err != nil {
				return err
			}
			off += uint64(n)
			data = data[n:]
		}
		if ended {
			if d, _, _ := st.from(off); len(d) == 0 {
				return nil
			}
			continue
		}
		select {
		case <-changed:
		case <-out.Context().Done():
			return status.FromContextError(out.Context().Err()).Err()
		}
	}
}

// TaskExecStdinWrite accepts the end of input. The local Docker backend
// takes a command's input whole when it starts, so input written to a
// running command is refused, not dropped.
func (r *routerServer) TaskExecStdinWrite(_ context.Context, req *pb.TaskExecStdinWriteRequest) (*pb.TaskExecStdinWriteResponse, error) {
	if _, err := r.execOf(req.GetTaskId(), req.GetExecId()); err != nil {
		return nil, err
	}
	if len(req.GetData()) > 0 {
		return nil, status.Error(codes.Unimplemented, "this server does not stream input into a running command")
	}
	return &pb.TaskExecStdinWriteResponse{}, nil
}

// redactErr renders an error with the sandbox's secret values replaced.
func redactErr(err error, secrets map[string]string) string {
	msg := err.Error()
	for _, v := range secrets {
		if len(v) >= 4 {
			msg = strings.ReplaceAll(msg, v, "[REDACTED]")
		}
	}
	return msg
}
