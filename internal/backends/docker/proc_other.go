//go:build !unix

package docker

import (
	"fmt"
	"io/fs"
	"os"
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

func openNoFollow(path string) (*os.File, error) { return os.Open(path) }

// checkKeyFile: file ownership and modes are not checked here.
func checkKeyFile(fi fs.FileInfo) error {
	if !fi.Mode().IsRegular() || fi.Size() != reapKeySize {
		return fmt.Errorf("not a regular file of %d bytes", reapKeySize)
	}
	return nil
}
