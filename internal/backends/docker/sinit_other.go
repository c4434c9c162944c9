//go:build !linux

package docker

// initMain runs only as PID 1 of a Linux container.
func initMain([]string) int { return 2 }
