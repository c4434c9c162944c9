package backends

import (
	"bytes"
	"io"
	"strconv"
	"strings"
	"sync"
)

// PidMarker starts what the exec wrappers of the Docker and Kubernetes
// backends write first on stderr: their pid (the command's session), then
// an RS byte. The wrapper then replaces itself with the command.
const PidMarker = "\x1esandboxio-pid:"

// MarkerWriter strips the wrapper's pid marker from the front of stderr and
// passes everything else on to Next. Output that does not start with the
// marker (the runtime's own words when the wrapper could not start) goes
// through unchanged.
type MarkerWriter struct {
	Next io.Writer
	// Done: no marker is expected (the command runs without the wrapper).
	Done bool
	// OnPid, if set, is called once the marker was read; its error fails
	// that Write.
	OnPid func() error

	pending []byte
	mu      sync.Mutex
	pid     int
}

func (m *MarkerWriter) Write(p []byte) (int, error) {
	if m.Done {
		return m.Next.Write(p)
	}
	m.pending = append(m.pending, p...)
	if len(m.pending) < len(PidMarker) {
		if !strings.HasPrefix(PidMarker, string(m.pending)) {
			return len(p), m.flush(m.pending)
		}
		return len(p), nil
	}
	if !bytes.HasPrefix(m.pending, []byte(PidMarker)) {
		return len(p), m.flush(m.pending)
	}
	rest := m.pending[len(PidMarker):]
	end := bytes.IndexByte(rest, '\x1e')
	if end < 0 {
		if len(rest) > 20 {
			return len(p), m.flush(m.pending)
		}
		return len(p), nil
	}
	if pid, err := strconv.Atoi(string(rest[:end])); err == nil {
		m.mu.Lock()
		m.pid = pid
		m.mu.Unlock()
		if m.OnPid != nil {
			if err := m.OnPid(); err != nil {
				return 0, err
			}
		}
	}
	return len(p), m.flush(rest[end+1:])
}

func (m *MarkerWriter) flush(b []byte) error {
	m.Done = true
	m.pending = nil
	if len(b) == 0 {
		return nil
	}
	_, err := m.Next.Write(b)
	return err
}

// PID is the pid the marker reported; 0 when none was read.
func (m *MarkerWriter) PID() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pid
}
