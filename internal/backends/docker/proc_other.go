//go:build !unix

package docker

import (
	"os/exec"
	"syscall"
)

// detach starts the watcher in a process group of its own, so that Ctrl-C in
// the owner's console does not reach it.
func detach(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: 0x00000200} // CREATE_NEW_PROCESS_GROUP
}

// lockFile does nothing here: the in-process lock still serialises one
// process's creates, and duplicates from other processes are removed after.
func lockFile(string) (release func()) { return func() {} }
