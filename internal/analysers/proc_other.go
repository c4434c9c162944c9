//go:build !unix

package analysers

import "os/exec"

func setProcessGroup(*exec.Cmd) {}
