//go:build !unix

package safefile

import (
	"io/fs"
	"os"
)

// open refuses a symbolic link by looking before and after: this platform
// has no O_NOFOLLOW.
func open(path string, flag int, perm fs.FileMode) (*os.File, error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return nil, symlinkError(path)
	}
	f, err := os.OpenFile(path, flag, perm)
	if err != nil {
		return nil, err
	}
	if err := checkRegular(path, f); err != nil {
		_ = f.Close()
		return nil, err
	}
	fi, err1 := os.Lstat(path)
	st, err2 := f.Stat()
	if err1 != nil || err2 != nil || fi.Mode()&fs.ModeSymlink != 0 || !os.SameFile(fi, st) {
		_ = f.Close()
		return nil, symlinkError(path)
	}
	return f, nil
}

// ID is unknown here: a file is never reopened by name.
func ID(fs.FileInfo) string { return "" }

// Owner is unknown here.
func Owner(fs.FileInfo) (int, bool) { return 0, false }
