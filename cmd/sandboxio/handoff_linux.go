//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// reexec replaces this process with a new image of the CLI, environment
// env, handing h over through a memfd. It returns only on failure.
func reexec(h *handoff, env []string) error {
	data, err := json.Marshal(h)
	if err != nil {
		return err
	}
	// No MFD_CLOEXEC: the descriptor survives the exec, for the new image.
	fd, err := unix.MemfdCreate("sandboxio-handoff", 0)
	if err != nil {
		return fmt.Errorf("memfd_create: %w", err)
	}
	file := os.NewFile(uintptr(fd), "handoff")
	if _, err := file.Write(data); err != nil {
		_ = file.Close()
		return err
	}
	clear(data)
	if _, err := file.Seek(0, 0); err != nil {
		_ = file.Close()
		return err
	}
	env = append(env, handoffEnv+"="+strconv.Itoa(fd))
	err = syscall.Exec("/proc/self/exe", os.Args, env)
	_ = file.Close()
	return err
}
