//go:build unix

package safefile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestOpenAppend_RefusesSymlinkFIFOAndDirectory(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenAppend(link, 0o600); !errors.Is(err, ErrSymlink) || !strings.Contains(err.Error(), link) {
		t.Errorf("symlink: %v", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// No reader: a blocking open would hang here.
	if _, err := OpenAppend(fifo, 0o600); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("FIFO: %v", err)
	}
	if _, err := OpenAppend(dir, 0o600); err == nil {
		t.Error("a directory was opened for appending")
	}
	f, err := OpenAppend(filepath.Join(dir, "new"), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
}

// A reopen writes only to the file first opened: not through a symlink
// put in its place, not to a file created again under its name.
func TestReopenAppend_ChecksIdentity(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "audit.jsonl")
	f, err := OpenAppend(p, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	id := ID(fi)
	if id == "" {
		t.Fatal("no identity on unix")
	}
	g, err := ReopenAppend(p, id)
	if err != nil {
		t.Fatalf("same file: %v", err)
	}
	_ = g.Close()
	if _, err := ReopenAppend(p, ""); err == nil {
		t.Error("an unknown identity was reopened")
	}

	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p, p+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, p); err != nil {
		t.Fatal(err)
	}
	if _, err := ReopenAppend(p, id); !errors.Is(err, ErrSymlink) {
		t.Errorf("symlink in its place: %v", err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReopenAppend(p, id); err == nil || !strings.Contains(err.Error(), "no longer the file first opened") {
		t.Errorf("another file under its name: %v", err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if _, err := ReopenAppend(p, id); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a removed file was created again: %v", err)
	}
}
