package sandbox

import (
	"bytes"
	"io"
	"sync"
	"sync/atomic"
)

// streamWriter redacts secret values from a stream of output before passing
// it on. A value split over two writes is still caught: the end of what has
// arrived is held back while it could be the beginning of a value (at most
// len(longest value)-1 bytes), until the next write shows whether it is,
// or Close. Everything else is passed on at once. Writes after Close are
// dropped.
type streamWriter struct {
	next   io.Writer
	values [][]byte // longest first

	mu      sync.Mutex
	stuck   atomic.Bool // Close found a write in progress: drop everything after it
	pending []byte
	closed  bool
	err     error // the first error of next; later writes are refused with it
}

func newStreamWriter(next io.Writer, secrets Secrets) *streamWriter {
	w := &streamWriter{next: next}
	for _, v := range secrets.sortedValues() {
		w.values = append(w.values, []byte(v))
	}
	return w
}

// holdFrom returns where the held-back end of pending starts: the earliest
// position from which the rest of pending is a proper beginning of a value.
func (w *streamWriter) holdFrom() int {
	cut := len(w.pending)
	for _, v := range w.values {
		for p := max(0, len(w.pending)-(len(v)-1)); p < cut; p++ {
			if w.pending[p] == v[0] && bytes.HasPrefix(v, w.pending[p:]) {
				cut = p
				break
			}
		}
	}
	return cut
}

func (w *streamWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return 0, w.err
	}
	if w.closed || w.stuck.Load() {
		return len(p), nil
	}
	if len(w.values) == 0 {
		if _, err := w.next.Write(p); err != nil {
			w.err = err
			return 0, err
		}
		return len(p), nil
	}
	w.pending = append(w.pending, p...)
	if err := w.emit(w.holdFrom()); err != nil {
		return 0, err
	}
	return len(p), nil
}

// emit writes out pending up to cut, redacted. A value that starts before
// cut lies wholly in pending (holdFrom keeps back any beginning of one), so
// it is replaced whole, even where it reaches past cut.
func (w *streamWriter) emit(cut int) error {
	if cut <= 0 {
		return nil
	}
	var out bytes.Buffer
	// next[k] is where values[k] next occurs at or after i (-1: nowhere), so
	// that each value is searched for once per occurrence, not per step.
	next := make([]int, len(w.values))
	find := func(k, from int) {
		if j := bytes.Index(w.pending[from:], w.values[k]); j >= 0 {
			next[k] = from + j
		} else {
			next[k] = -1
		}
	}
	for k := range w.values {
		find(k, 0)
	}
	i := 0
	for i < cut {
		at, n := -1, 0
		for k, v := range w.values {
			if next[k] >= 0 && next[k] < i {
				find(k, i)
			}
			if next[k] >= 0 && (at < 0 || next[k] < at) {
				at, n = next[k], len(v)
			}
		}
		if at < 0 || at >= cut {
			out.Write(w.pending[i:cut])
			i = cut
			break
		}
		out.Write(w.pending[i:at])
		out.WriteString(Redacted)
		i = at + n
	}
	w.pending = append(w.pending[:0], w.pending[i:]...)
	if out.Len() == 0 {
		return nil
	}
	if _, err := w.next.Write(out.Bytes()); err != nil {
		w.err = err
		return err
	}
	return nil
}

// Close writes what is held back, redacted, and drops any later write. It
// does not wait for a write stuck in next (a sink that blocks, which the
// backend stopped waiting for at a timeout): what is held back is dropped
// then.
func (w *streamWriter) Close() error {
	if !w.mu.TryLock() {
		w.stuck.Store(true)
		return nil
	}
	defer w.mu.Unlock()
	if w.closed {
		return w.err
	}
	w.closed = true
	if w.err == nil {
		_ = w.emit(len(w.pending))
	}
	return w.err
}
