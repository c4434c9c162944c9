//go:build unix

package docker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"syscall"
)

// detach gives the watcher a session of its own: a signal to the owner's
// process group (Ctrl-C, a CI step's timeout) does not take the watcher with
// it.
func detach(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} }

// lockFile takes an exclusive advisory lock on path, creating it, and returns
// its release. It is best effort: when the file cannot be opened or locked,
// the returned release does nothing and the caller goes on unlocked.
func lockFile(path string) (release func()) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return func() {}
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return func() {}
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	}
}

// openNoFollow opens path for reading, refusing a symbolic link.
func openNoFollow(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
}

// checkKeyFile accepts the reap key's file only as a regular file of this
// user, of the key's size, that no one else can read or write.
func checkKeyFile(fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.Mode().IsRegular():
		return errors.New("not a regular file")
	case !ok || int(st.Uid) != os.Geteuid():
		return errors.New("not owned by this user")
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("mode %v: others may read or write it; it must be 0600", fi.Mode().Perm())
	case fi.Size() != reapKeySize:
		return fmt.Errorf("%d bytes, not %d", fi.Size(), reapKeySize)
	}
	return nil
}
