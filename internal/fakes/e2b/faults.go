package e2bserver

import backendtest "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/conformance"

// Op names a server operation for fault injection (fakeserver.Faults).
type Op = backendtest.Op

// Fault is what the server answers instead of serving the next Times
// requests of Op.
type Fault = backendtest.Fault

var _ backendtest.Faults = (*Server)(nil)

// The operations: the conformance suite's, and the server's own.
const (
	OpCreate        = backendtest.OpCreate
	OpList          = backendtest.OpList
	OpGet           = backendtest.OpGet
	OpKill          = backendtest.OpKill
	OpRun           = backendtest.OpRun
	OpUpload        = backendtest.OpUpload
	OpSetTimeout Op = "set-timeout"
)
