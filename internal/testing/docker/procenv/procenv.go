// Package procenv finds processes by their environment (Linux /proc), for
// tests that must kill outright a process they did not start themselves:
// the watcher a sandbox owner detached (it carries the owner's id in its
// environment, see the Docker backend's reaperEnv). It imports nothing of
// this module, so that every test package can use it.
package procenv

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// WithEnv returns the pids of the processes whose environment holds the
// entry kv ("NAME=value") exactly.
func WithEnv(kv string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		for _, v := range bytes.Split(env, []byte{0}) {
			if string(v) == kv {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// KillAll sends SIGKILL to every process whose environment holds kv and
// waits, up to within, until none is left (a zombie counts as gone). It
// returns the pids it killed and those still alive.
func KillAll(kv string, within time.Duration) (killed, alive []int) {
	killed = WithEnv(kv)
	for _, pid := range killed {
		kill(pid)
	}
	deadline := time.Now().Add(within)
	for {
		alive = alive[:0]
		for _, pid := range killed {
			if running(pid) {
				alive = append(alive, pid)
			}
		}
		if len(alive) == 0 || time.Now().After(deadline) {
			return killed, alive
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// running says pid exists and is not a zombie.
func running(pid int) bool {
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(st, ')')
	return i < 0 || i+2 >= len(st) || st[i+2] != 'Z'
}
