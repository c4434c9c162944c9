package docker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/safefile"
)

// The watcher keeps the trails the owner set and did not withdraw, and
// writes a record with the time of the event in place of TrailTime.
func TestTrailProtocol(t *testing.T) {
	line := func(event string) []byte {
		b, _ := json.Marshal(map[string]any{"time": backends.TrailTime, "event": event})
		return append(b, '\n')
	}
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	tr := backends.Trail{Path: path, FileID: fileID(t, path), Removed: line("orphaned"), Gone: line("gone")}
	var pipe bytes.Buffer
	for _, m := range []watcherMsg{{ID: "a", Trail: &tr}, {ID: "b", Trail: &tr}, {ID: "a", Forget: true}} {
		b, _ := json.Marshal(m)
		pipe.Write(append(b, '\n'))
	}
	trails := readTrails(&pipe, t.Logf)
	if _, ok := trails["a"]; ok || len(trails) != 1 {
		t.Fatalf("trails: %v", trails)
	}
	now := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	writeTrail(trails["b"], trails["b"].Removed, now, t.Logf)
	redacted := trails["b"]
	redacted.RedactTime = true
	writeTrail(redacted, redacted.Gone, now, t.Logf)
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"event":"orphaned","time":"2030-01-02T03:04:05.000000006Z"}` + "\n" + `{"event":"gone","time":"[REDACTED]"}` + "\n"
	if string(got) != want {
		t.Fatalf("audit file:\n%s\nwant:\n%s", got, want)
	}
	// A message that cannot be read ends the reading, not the wait.
	trails = readTrails(strings.NewReader(`{"id":"c","trail":{"Path":"x"}}`+"\nnot json\n"), t.Logf)
	if _, ok := trails["c"]; !ok {
		t.Fatalf("trails: %v", trails)
	}
}

// fileID creates path and returns its identity, as the owner's audit log
// gives it in a trail.
func fileID(t *testing.T, path string) string {
	t.Helper()
	f, err := safefile.OpenAppend(path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return safefile.ID(fi)
}

// A trail is written only to the file the owner opened: the path replaced
// by a symlink to another file gets nothing, nor does the file it points to.
func TestWriteTrail_ReplacedPathGetsNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	tr := backends.Trail{Path: path, FileID: fileID(t, path), Removed: []byte(`{"event":"orphaned"}` + "\n")}
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path, path+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, path); err != nil {
		t.Fatal(err)
	}
	var logged strings.Builder
	writeTrail(tr, tr.Removed, time.Now(), func(f string, a ...any) { fmt.Fprintf(&logged, f+"\n", a...) })
	if b, _ := os.ReadFile(victim); len(b) != 0 {
		t.Fatalf("the trail went through the symlink: %s", b)
	}
	if !strings.Contains(logged.String(), "symbolic link") {
		t.Errorf("log: %q", logged.String())
	}
}
