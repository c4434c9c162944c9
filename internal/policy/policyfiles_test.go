//go:build unix

package policy_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
)

// Team policy paths are read only as regular files of bounded size: a
// device (--policy /dev/zero ran out of memory) or a FIFO (blocks forever)
// is refused, in a directory walk or named directly.
func TestTeamPolicyFiles_RegularAndBounded(t *testing.T) {
	dir := t.TempDir()
	fifoDir := filepath.Join(dir, "fifo")
	if err := os.Mkdir(fifoDir, 0o755); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(fifoDir, "team.rego")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	bigDir := filepath.Join(dir, "big")
	if err := os.Mkdir(bigDir, 0o755); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(bigDir, "big.rego")
	if err := os.WriteFile(big, []byte("package team.big\n"+strings.Repeat("# padding\n", 500_000)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, path, want string }{
		{"device", "/dev/zero", "not a regular file"},
		{"fifo named directly", fifo, "not a regular file"},
		{"fifo in a directory", fifoDir, "not a regular file"},
		{"over the size limit", bigDir, "limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := policy.New(t.Context(), []string{tc.path})
			assertRule(t, err, "SBX-POL-001")
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want it to say %q", err, tc.want)
			}
		})
	}
}
