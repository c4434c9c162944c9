//go:build unix

package procenv

import "syscall"

func kill(pid int) { _ = syscall.Kill(pid, syscall.SIGKILL) }
