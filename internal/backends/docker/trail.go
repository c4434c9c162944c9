package docker

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/safefile"
)

// The owner tells its watcher, over the pipe the watcher waits on, the final
// audit record of each sandbox (SetTrail) and withdraws it when the sandbox
// is closed. The watcher writes the records it still holds once the owner
// is gone and it has swept: the owner died without closing those sandboxes.

// watcherMsg is one message on the pipe, a JSON object per line.
type watcherMsg struct {
	ID     string          `json:"id"`
	Trail  *backends.Trail `json:"trail,omitempty"`
	Forget bool            `json:"forget,omitempty"`
}

var watcherSendMu sync.Mutex

// sendWatcher writes a message to the watcher, if one runs. A watcher that
// does not read within a second loses it rather than hold up the owner.
func sendWatcher(m watcherMsg) bool {
	b, err := json.Marshal(m)
	if err != nil {
		return false
	}
	b = append(b, '\n')
	watcherSendMu.Lock()
	defer watcherSendMu.Unlock()
	if watcherPipe == nil {
		return false
	}
	_ = watcherPipe.SetWriteDeadline(time.Now().Add(time.Second))
	_, err = watcherPipe.Write(b)
	return err == nil
}

// SetTrail implements backends.Trailer.
func (s *sandbox) SetTrail(t backends.Trail) {
	if !s.b.cfg.watcher {
		return
	}
	if sendWatcher(watcherMsg{ID: s.id, Trail: &t}) {
		s.trailed.Store(true)
	}
}

// forgetTrail withdraws the trail: the owner closed the sandbox and audited
// that itself.
func (s *sandbox) forgetTrail() {
	if s.trailed.CompareAndSwap(true, false) {
		sendWatcher(watcherMsg{ID: s.id, Forget: true})
	}
}

// readTrails reads the owner's messages until the owner is gone (EOF: every
// write end is closed) and returns the trails still held. A message it
// cannot read ends the reading, not the wait.
func readTrails(owner io.Reader, logf func(string, ...any)) map[string]backends.Trail {
	trails := map[string]backends.Trail{}
	dec := json.NewDecoder(owner)
	for {
		var m watcherMsg
		if err := dec.Decode(&m); err != nil {
			if err != io.EOF {
				logf("owner message: %v", err)
				_, _ = io.Copy(io.Discard, owner)
			}
			return trails
		}
		switch {
		case m.Forget:
			delete(trails, m.ID)
		case m.Trail != nil:
			trails[m.ID] = *m.Trail
		}
	}
}

// writeTrail appends one of a trail's records to its audit file, with the
// time of now.
func writeTrail(t backends.Trail, line []byte, now time.Time, logf func(string, ...any)) {
	if len(line) == 0 || t.Path == "" {
		return
	}
	ts, err := json.Marshal(now.UTC())
	if err != nil {
		return
	}
	if t.RedactTime {
		ts = []byte(`"[REDACTED]"`)
	}
	placeholder, _ := json.Marshal(backends.TrailTime)
	line = bytes.Replace(line, append([]byte(`"time":`), placeholder...), append([]byte(`"time":`), ts...), 1)
	// The path may have been replaced since the owner opened it (by a
	// symlink to another file, say): only the owner's file is written to.
	f, err := safefile.ReopenAppend(t.Path, t.FileID)
	if err != nil {
		logf("audit: %v", err)
		return
	}
	if _, err := f.Write(line); err != nil {
		logf("audit: %v", err)
	}
	_ = f.Close()
}
