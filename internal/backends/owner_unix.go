//go:build unix

package backends

import (
	"errors"
	"strconv"
	"syscall"
)

// nsID is a namespace's identity, "DEV:INODE" of its /proc/self/ns link
// (the nsfs device and the namespace's inode), or "" when it cannot be read.
func nsID(path string) string {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return ""
	}
	//nolint:unconvert // Stat_t.Dev is uint64 on Linux but int32 on Darwin
	return strconv.FormatUint(uint64(st.Dev), 10) + ":" + strconv.FormatUint(uint64(st.Ino), 10)
}

// procState looks a pid up in this process's PID namespace. kill(pid, 0)
// answers for the namespace itself (ESRCH: no such process), not for what
// /proc lets this user see (hidepid); the start time is read only for a
// process that exists, and a failure to read it leaves the answer unknown.
func procState(pid int) (start string, state procLookup) {
	err := syscall.Kill(pid, 0)
	switch {
	case errors.Is(err, syscall.ESRCH):
		return "", procGone
	case err != nil && !errors.Is(err, syscall.EPERM):
		return "", procUnknown
	}
	if start = statStart("/proc/" + strconv.Itoa(pid) + "/stat"); start == "" {
		return "", procUnknown
	}
	return start, procPresent
}
