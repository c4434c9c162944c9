package daytonaserver

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"time"

	backendtest "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/conformance"
)

// faultState is the server's fault injection (backendtest.Faults).
type faultState struct {
	mu     sync.Mutex
	armed  *backendtest.Fault
	left   int
	counts map[backendtest.Op]int
}

var _ backendtest.Faults = (*Server)(nil)

// Inject arms f, replacing what was armed, and resets the counts.
func (s *Server) Inject(f backendtest.Fault) {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	s.faults.armed = &f
	s.faults.left = max(f.Times, 1)
	s.faults.counts = map[backendtest.Op]int{}
}

// Requests counts the requests of op received since the last Inject.
func (s *Server) Requests(op backendtest.Op) int {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	return s.faults.counts[op]
}

// Clear disarms every fault.
func (s *Server) Clear() {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	s.faults.armed = nil
}

// fault counts the request and, when a fault is armed for op, answers in
// its place; it reports whether it did.
func (s *Server) fault(w http.ResponseWriter, r *http.Request, op backendtest.Op, h http.HandlerFunc) bool {
	s.faults.mu.Lock()
	s.faults.counts[op]++
	f := s.faults.armed
	if f == nil || f.Op != op || s.faults.left <= 0 {
		s.faults.mu.Unlock()
		return false
	}
	s.faults.left--
	fc := *f
	s.faults.mu.Unlock()
	if fc.Delay > 0 {
		select {
		case <-time.After(fc.Delay):
		case <-r.Context().Done():
			return true
		}
	}
	if fc.Applied {
		// the create happens; the caller only sees the failure
		h(httptest.NewRecorder(), r)
	}
	if fc.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((fc.RetryAfter+time.Second-1)/time.Second)))
	}
	if fc.Status == 0 {
		fc.Status = http.StatusServiceUnavailable
	}
	apiError(w, fc.Status, "injected fault: "+http.StatusText(fc.Status))
	return true
}
