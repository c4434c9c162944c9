//go:build unix

package safefile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

func open(path string, flag int, perm fs.FileMode) (*os.File, error) {
	// O_NONBLOCK: opening a FIFO for writing with no reader would block;
	// it fails instead, and regular files ignore the flag.
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, perm)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, symlinkError(path)
		}
		if errors.Is(err, syscall.ENXIO) {
			return nil, fmt.Errorf("%s is not a regular file (a FIFO or socket)", path)
		}
		return nil, err
	}
	if err := checkRegular(path, f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// ID is the identity of a file: its device and inode, "" when unknown.
func ID(fi fs.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st == nil {
		return ""
	}
	return fmt.Sprintf("%d:%d", uint64(st.Dev), uint64(st.Ino)) //nolint:unconvert // Dev is not uint64 on every unix
}

// Owner is the uid that owns a file, and whether it is known.
func Owner(fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st == nil {
		return 0, false
	}
	return int(st.Uid), true
}
