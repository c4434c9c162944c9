package vercelserver

import backendtest "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/conformance"

// Op names a server operation for fault injection (fakeserver.Faults).
type Op = backendtest.Op

// Fault is what the server answers instead of serving the next Times
// requests of Op.
type Fault = backendtest.Fault

var _ backendtest.Faults = (*Server)(nil)

// The operations: the conformance suite's, and the server's own.
const (
	OpCreate     = backendtest.OpCreate // POST /v2|v3/sandboxes
	OpList       = backendtest.OpList   // GET /v2/sandboxes
	OpGet        = backendtest.OpGet    // GET a sandbox, a session or a command
	OpKill       = backendtest.OpKill   // DELETE /v2/sandboxes/{name}
	OpRun        = backendtest.OpRun    // POST .../cmd
	OpUpload     = backendtest.OpUpload // POST .../fs/write
	OpStop    Op = "stop"               // POST .../stop
	OpKillCmd Op = "killcmd"            // POST .../cmd/{cid}/kill
)
