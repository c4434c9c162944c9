package verdict

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
)

// A waiver file that is a FIFO or a device is refused without being read:
// the provider, the run-time helper and policy check all load waivers here.
func TestLoadWaivers_RegularFilesOnly(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "waivers.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, "/dev/zero"} {
		_, err := LoadWaivers(p)
		var fe *inputs.FileError
		if !errors.As(err, &fe) {
			t.Errorf("%s: got %v, want a refusal of a file that is not regular", p, err)
		}
	}
}
