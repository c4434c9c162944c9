package modalserver

import (
	"context"
	"path"

	pb "github.com/modal-labs/libmodal/modal-go/proto/modal_proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The filesystem API, the part of it that writes a file: open for writing,
// write, flush, close. The file is written into the sandbox when it is
// closed.

const maxFileBytes = 100 << 20

type openFile struct {
	task, path string
	data       []byte
}

type fsOp struct {
	task string
	fail *pb.SystemErrorMessage
}

// ContainerFilesystemExec starts one file operation; its outcome is read
// with ContainerFilesystemExecGetOutput.
func (s *Server) ContainerFilesystemExec(ctx context.Context, req *pb.ContainerFilesystemExecRequest) (*pb.ContainerFilesystemExecResponse, error) {
	sb, err := s.byTask(req.GetTaskId())
	if err != nil {
		return nil, err
	}
	if sb.finished() {
		return nil, status.Errorf(codes.FailedPrecondition, "task %s has finished", req.GetTaskId())
	}
	op := &fsOp{task: req.GetTaskId()}
	resp := pb.ContainerFilesystemExecResponse_builder{ExecId: "fe-" + randomID()}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case req.HasFileOpenRequest():
		o := req.GetFileOpenRequest()
		if o.GetMode() != "w" && o.GetMode() != "wb" {
			return nil, status.Error(codes.Unimplemented, "this server opens files for writing (w, wb) only")
		}
		if !path.IsAbs(o.GetPath()) || path.Clean(o.GetPath()) != o.GetPath() {
			return nil, invalid("path must be a clean absolute path")
		}
		fd := "fd-" + randomID()
		s.files[fd] = &openFile{task: req.GetTaskId(), path: o.GetPath()}
		resp.FileDescriptor = &fd
	case req.HasFileWriteRequest():
		w := req.GetFileWriteRequest()
		f, ok := s.files[w.GetFileDescriptor()]
		if !ok || f.task != req.GetTaskId() {
			return nil, invalid("unknown file descriptor")
		}
		if len(f.data)+len(w.GetData()) > maxFileBytes {
			return nil, status.Errorf(codes.ResourceExhausted, "file larger than %d bytes", maxFileBytes)
		}
		f.data = append(f.data, w.GetData()...)
	case req.HasFileFlushRequest():
		if f, ok := s.files[req.GetFileFlushRequest().GetFileDescriptor()]; !ok || f.task != req.GetTaskId() {
			return nil, invalid("unknown file descriptor")
		}
	case req.HasFileCloseRequest():
		fd := req.GetFileCloseRequest().GetFileDescriptor()
		f, ok := s.files[fd]
		if !ok || f.task != req.GetTaskId() {
			return nil, invalid("unknown file descriptor")
		}
		delete(s.files, fd)
		sb.mu.Lock()
		box := sb.box
		sb.mu.Unlock()
		s.mu.Unlock()
		err := box.Upload(ctx, f.path, f.data, 0o644)
		s.mu.Lock()
		if err != nil {
			op.fail = pb.SystemErrorMessage_builder{ErrorCode: pb.SystemErrorCode_SYSTEM_ERROR_CODE_IO,
				ErrorMessage: "write " + f.path + ": " + redactErr(err, sb.secrets)}.Build()
		}
	default:
		return nil, status.Error(codes.Unimplemented, "this server implements open, write, flush and close only")
	}
	r := resp.Build()
	s.fsOps[r.GetExecId()] = op
	return r, nil
}

// ContainerFilesystemExecGetOutput gives a file operation's outcome.
func (s *Server) ContainerFilesystemExecGetOutput(req *pb.ContainerFilesystemExecGetOutputRequest, out grpc.ServerStreamingServer[pb.FilesystemRuntimeOutputBatch]) error {
	if err := checkFields(req); err != nil {
		return err
	}
	s.mu.Lock()
	op, ok := s.fsOps[req.GetExecId()]
	delete(s.fsOps, req.GetExecId())
	s.mu.Unlock()
	if !ok {
		return status.Errorf(codes.NotFound, "filesystem exec %s not found", req.GetExecId())
	}
	return out.Send(pb.FilesystemRuntimeOutputBatch_builder{Eof: true, Error: op.fail}.Build())
}
