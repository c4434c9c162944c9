package docker

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/docker/docker/pkg/stdcopy"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
)

// Under load the daemon may deliver more than gateHold bytes of stdout
// before the wrapper's marker on stderr. The gate then lets everything it
// held through in one write, and must still report the count it was given:
// StdCopy ends with io.ErrShortWrite on any other count, which once left a
// command blocked on its pipe until its timeout (TestOutputCap, under load).
func TestGateWriter_OutputBeforeTheMarker(t *testing.T) {
	var stream bytes.Buffer
	out := stdcopy.NewStdWriter(&stream, stdcopy.Stdout)
	errw := stdcopy.NewStdWriter(&stream, stdcopy.Stderr)
	chunk := []byte(strings.Repeat("y\n", 2048)) // 4 KiB frames, as the daemon sends them
	var want bytes.Buffer
	for want.Len() <= 2*gateHold {
		if _, err := out.Write(chunk); err != nil {
			t.Fatal(err)
		}
		want.Write(chunk)
	}
	if _, err := errw.Write([]byte(backends.PidMarker + "7\x1e")); err != nil {
		t.Fatal(err)
	}
	if _, err := out.Write([]byte("after\n")); err != nil {
		t.Fatal(err)
	}
	want.WriteString("after\n")

	var got bytes.Buffer
	stdout := &capWriter{max: maxOutput, sink: &got}
	errCap := &capWriter{max: maxOutput}
	gate := &gateWriter{next: stdout}
	stderr := &backends.MarkerWriter{Next: errCap, OnPid: gate.release}
	if _, err := stdcopy.StdCopy(gate, stderr, &stream); err != nil {
		t.Fatalf("StdCopy: %v (a writer reported a count it was not given?)", err)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("got %d bytes, want %d in order", got.Len(), want.Len())
	}
	if stderr.PID() != 7 || errCap.buf.Len() != 0 {
		t.Fatalf("marker: pid %d, stderr %q", stderr.PID(), errCap.buf.String())
	}
}

// Every Write of the gate reports what it was given, held or forwarded.
func TestGateWriter_CountsWhatItIsGiven(t *testing.T) {
	g := &gateWriter{next: io.Discard}
	p := make([]byte, 4096)
	for i := 0; i < 40; i++ {
		if n, err := g.Write(p); err != nil || n != len(p) {
			t.Fatalf("write %d: n=%d err=%v, want %d", i, n, err, len(p))
		}
	}
}
