//go:build unix

package docker

import (
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
