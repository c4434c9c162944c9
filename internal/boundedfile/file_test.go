package boundedfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Devices, FIFOs and directories are refused without being read (reading
// /dev/zero ran out of memory); a regular file over the limit is refused
// before it is read; a stream over the limit stops at limit+1 bytes.
func TestReadFile_RegularAndBounded(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/dev/zero", fifo, dir} {
		_, err := ReadFile(p, 1<<20)
		var fe *FileError
		if !errors.As(err, &fe) || !strings.Contains(fe.Msg, "not a regular file") {
			t.Errorf("%s: got %v, want a FileError (not a regular file)", p, err)
		}
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, 2048), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(big, 1024); !errors.Is(err, ErrTooLarge) {
		t.Errorf("over the limit: %v", err)
	}
	if data, err := ReadFile(big, 2048); err != nil || len(data) != 2048 {
		t.Errorf("at the limit: %d bytes, %v", len(data), err)
	}
	if _, err := ReadLimited(strings.NewReader(strings.Repeat("x", 11)), "<stdin>", 10); !errors.Is(err, ErrTooLarge) {
		t.Errorf("stream over the limit: %v", err)
	}
}
