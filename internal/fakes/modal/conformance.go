package modalserver

import (
	"context"
	"strconv"
	"time"

	pb "github.com/modal-labs/libmodal/modal-go/proto/modal_proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	backendtest "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/conformance"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// opMethods maps the conformance suite's operations to the RPCs that carry
// them on Modal.
var opMethods = map[backendtest.Op]string{
	backendtest.OpCreate: "SandboxCreate",
	backendtest.OpList:   "SandboxList",
	backendtest.OpGet:    "SandboxGetFromName",
	backendtest.OpKill:   "SandboxTerminate",
	backendtest.OpRun:    "TaskExecStart",
	backendtest.OpUpload: "ContainerFilesystemExec",
}

// httpToCode is the gRPC code of the same meaning as an HTTP status.
func httpToCode(st int) codes.Code {
	switch st {
	case 400:
		return codes.InvalidArgument
	case 401:
		return codes.Unauthenticated
	case 403:
		return codes.PermissionDenied
	case 404:
		return codes.NotFound
	case 409:
		return codes.AlreadyExists
	case 429:
		return codes.ResourceExhausted
	case 502, 503, 504:
		return codes.Unavailable
	}
	return codes.Internal
}

// conformanceFaults is the suite's fault injection on this server.
type conformanceFaults struct{ s *Server }

// Faults is the server's fault injection as the conformance suite drives it.
func (s *Server) Faults() backendtest.Faults { return conformanceFaults{s} }

func (f conformanceFaults) Inject(bf backendtest.Fault) {
	method := opMethods[bf.Op] // an unknown operation arms nothing
	fault := Fault{Code: httpToCode(bf.Status), Message: "injected " + strconv.Itoa(bf.Status), After: bf.Applied, Delay: bf.Delay}
	if bf.RetryAfter > 0 {
		secs := int((bf.RetryAfter + time.Second - 1) / time.Second)
		fault.Trailer = map[string]string{"retry-after": strconv.Itoa(secs)}
	}
	n := max(bf.Times, 1)
	faults := make([]Fault, n)
	for i := range faults {
		faults[i] = fault
	}
	f.s.SetFaults(method, faults...)
}

func (f conformanceFaults) Requests(op backendtest.Op) int {
	return f.s.CountCallsSinceMark(opMethods[op])
}

func (f conformanceFaults) Clear() { f.s.SetFaults("") }

// Observe is what the server recorded for a sandbox: its tags, the network
// control and caps asked for, and its timeout. Modal has no plain
// environment: the SDK sends a sandbox's env as a Secret.
func (s *Server) Observe(_ context.Context, id string) (backendtest.Observed, error) {
	r, ok := s.Sandbox(id)
	if !ok {
		return backendtest.Observed{}, status.Errorf(codes.NotFound, "no sandbox %s", id)
	}
	net := &backendtest.ObservedNetwork{
		Denied: r.LegacyBlock || r.Network == pb.NetworkAccess_BLOCKED.String() ||
			(r.Network == pb.NetworkAccess_ALLOWLIST.String() && len(r.CIDRs) == 0),
	}
	if r.Network == pb.NetworkAccess_ALLOWLIST.String() {
		net.Allow = append([]string{}, r.CIDRs...)
	}
	caps := &model.Caps{CPU: float64(r.MilliCPUMax) / 1000, MemoryMB: int64(r.MemoryMBMax)}
	return backendtest.Observed{Labels: r.Tags, PlainEnv: map[string]string{}, Network: net, Caps: caps,
		Lifetime: time.Duration(r.TimeoutSecs) * time.Second}, nil
}
