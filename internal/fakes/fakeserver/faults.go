package fakeserver

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	backendtest "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/conformance"
)

// Faults is a fake's fault injection (backendtest.Faults). A server embeds
// it, sets Answer, and lets each handler pass through Intercept.
type Faults struct {
	// Answer writes an error in the vendor's shape.
	Answer func(w http.ResponseWriter, status int, msg string)

	mu     sync.Mutex
	armed  *backendtest.Fault
	left   int
	counts map[backendtest.Op]int
}

var _ backendtest.Faults = (*Faults)(nil)

// Inject arms f, replacing what was armed, and resets the counts.
func (s *Faults) Inject(f backendtest.Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed = &f
	s.left = max(f.Times, 1)
	s.counts = map[backendtest.Op]int{}
}

// Requests counts the requests of op received since the last Inject.
func (s *Faults) Requests(op backendtest.Op) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[op]
}

// Clear disarms every fault.
func (s *Faults) Clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed = nil
	s.left = 0
}

// Take counts a request of op and returns the fault to apply to it, if any.
func (s *Faults) Take(op backendtest.Op) *backendtest.Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.counts == nil {
		s.counts = map[backendtest.Op]int{}
	}
	s.counts[op]++
	f := s.armed
	if f == nil || f.Op != op || s.left <= 0 {
		return nil
	}
	s.left--
	c := *f
	return &c
}

// Intercept counts the request and, when a fault is armed for op, answers
// in h's place (after serving h unseen if the fault is Applied); it
// reports whether it did.
func (s *Faults) Intercept(w http.ResponseWriter, r *http.Request, op backendtest.Op, h http.HandlerFunc) bool {
	f := s.Take(op)
	if f == nil {
		return false
	}
	if f.Applied {
		// the call takes effect; the caller only sees the failure
		h(discard{}, r)
	}
	if f.Delay > 0 {
		select {
		case <-time.After(f.Delay):
		case <-r.Context().Done():
			return true
		}
	}
	if f.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((f.RetryAfter+time.Second-1)/time.Second)))
	}
	status := f.Status
	if status == 0 {
		status = http.StatusServiceUnavailable
	}
	s.Answer(w, status, "injected fault: "+http.StatusText(status))
	return true
}

// discard swallows the answer of a call made under an Applied fault.
type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}
