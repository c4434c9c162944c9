//go:build !linux

package main

import "errors"

func reexec(*handoff, []string) error {
	return errors.New("re-execution is implemented on Linux only")
}
