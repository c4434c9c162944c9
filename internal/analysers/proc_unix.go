//go:build unix

package analysers

import (
	"os/exec"
	"syscall"
)

// setProcessGroup puts the analyser in its own process group and kills the
// whole group at the bound: bandit's interpreter must not outlive it.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
