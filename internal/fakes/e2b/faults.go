package e2bserver

import (
	"net/http"
	"strconv"
	"time"
)

// Op names a server operation for fault injection.
type Op string

// The operations, as the conformance suite names them.
const (
	OpCreate     Op = "create"
	OpList       Op = "list"
	OpGet        Op = "get"
	OpKill       Op = "kill"
	OpSetTimeout Op = "set-timeout"
	OpRun        Op = "run"
	OpUpload     Op = "upload"
)

// Fault is what the server answers instead of serving the next Times
// requests of Op.
type Fault struct {
	Op         Op
	Status     int
	RetryAfter time.Duration // sent as Retry-After in whole seconds when positive
	Times      int           // consecutive requests that fail; 0 means 1
	// Applied (create only): the sandbox is created, then the answer is
	// Status, so the caller cannot know the outcome.
	Applied bool
	Delay   time.Duration // hold the answer back this long
}

type faultState struct {
	armed  *Fault
	left   int
	counts map[Op]int
}

// Inject arms f, replacing what was armed, and resets the counts.
func (s *Server) Inject(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.armed = &f
	s.faults.left = max(f.Times, 1)
	s.faults.counts = map[Op]int{}
}

// Requests counts the requests of op received since the last Inject.
func (s *Server) Requests(op Op) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults.counts[op]
}

// Clear disarms every fault.
func (s *Server) Clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.armed = nil
	s.faults.left = 0
}

// fault counts a request of op and returns the fault to apply to it, if any.
func (s *Server) fault(op Op) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.counts[op]++
	f := s.faults.armed
	if f == nil || f.Op != op || s.faults.left <= 0 {
		return nil
	}
	s.faults.left--
	c := *f
	return &c
}

// writeFault answers with the fault's status, in E2B's error shape.
func writeFault(w http.ResponseWriter, r *http.Request, f *Fault) {
	if f.Delay > 0 {
		select {
		case <-time.After(f.Delay):
		case <-r.Context().Done():
			return
		}
	}
	if f.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((f.RetryAfter+time.Second-1)/time.Second)))
	}
	apiError(w, f.Status, "injected fault: "+http.StatusText(f.Status))
}
