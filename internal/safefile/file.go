// Package safefile opens the files a user names for sandboxio to write to
// or to read a credential from, refusing a symbolic link in the last
// component and anything that is not a regular file, and gives a file an
// identity (device and inode) that a later reopen by name is checked
// against. A path the user names may be replaced between two opens (by
// a symlink to another file, say); the identity check makes a reopen
// write to the file first opened or to nothing.
package safefile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// ErrSymlink is matched (errors.Is) by the error of an open that found a
// symbolic link where the file should be.
var ErrSymlink = errors.New("is a symbolic link")

// OpenAppend opens path for appending, creating it with perm when it does
// not exist. A symbolic link (the last component) and anything but a
// regular file are refused: a FIFO or a device is never opened for
// writing, so it can neither block the caller nor receive records.
func OpenAppend(path string, perm fs.FileMode) (*os.File, error) {
	return open(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, perm)
}

// OpenRead opens a regular file that is no symbolic link for reading, and
// returns what fstat says of the file opened (not of the name).
func OpenRead(path string) (*os.File, fs.FileInfo, error) {
	f, err := open(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// ReopenAppend opens path again for appending, never creating it, and
// only when it is still the file of identity id (ID of the file first
// opened): a name now pointing at another file, a symlink, or a file
// removed and created again is refused.
func ReopenAppend(path, id string) (*os.File, error) {
	if id == "" {
		return nil, fmt.Errorf("%s: the file's identity is unknown, so it is not reopened", path)
	}
	f, err := open(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && ID(fi) != id {
		err = fmt.Errorf("%s is no longer the file first opened (it was replaced); nothing is written to it", path)
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// checkRegular refuses a file that is not a regular one.
func checkRegular(path string, f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file (%s)", path, fi.Mode().Type())
	}
	return nil
}

func symlinkError(path string) error {
	return fmt.Errorf("%s %w: give the file itself, not a link to it", path, ErrSymlink)
}
