//go:build linux

package nodump

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Apply sets RLIMIT_CORE to 0 and makes the process non-dumpable.
func Apply() error {
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{Cur: 0, Max: 0}); err != nil {
		return fmt.Errorf("setrlimit RLIMIT_CORE 0: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl PR_SET_DUMPABLE 0: %w", err)
	}
	return nil
}
