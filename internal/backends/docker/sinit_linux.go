package docker

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// wallMargin keeps the wall-clock end just after the expiry the backend
// computed, never before it, should the sandbox's clock (gVisor's own) read
// a little ahead of the host's.
const wallMargin = 100 * time.Millisecond

// reapEvery is how long an orphan of the sandbox may stay a zombie (holding
// a slot of the process cap) before the init collects it.
const reapEvery = 50 * time.Millisecond

// initMain is PID 1 of a sandbox (see sinit.go). It returns the exit status.
func initMain(args []string) int {
	// First: until this returns, a process of the sandbox running as the
	// same uid could ptrace the init or open /proc/1/mem; from now on that
	// needs CAP_SYS_PTRACE, which no sandbox has. (No tenant code runs yet:
	// the backend execs nothing before the start returns.)
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "sandboxio-init: PR_SET_DUMPABLE:", err)
		return 2 // fail closed: the container ends
	}
	a, err := parseInitArgs(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandboxio-init:", err)
		return 2
	}
	// The init takes little of the sandbox's process and memory caps: one P,
	// and what the other packages' inits allocated given back.
	runtime.GOMAXPROCS(1)
	debug.FreeOSMemory()

	// The kernel drops a signal sent from inside the namespace to its init
	// when the init has no handler for it: SIGKILL, SIGSTOP and every signal
	// left at its default action. The Go runtime handles most signals itself
	// and exits on those it would die by (SIGTERM, SIGQUIT, SIGSEGV sent with
	// kill, ...): the sandbox ends early, which is fail-closed. Nothing
	// received can make it run on past the deadline. There is no
	// signal.Notify: its receiving goroutine makes the runtime start a thread
	// at each signal, and at the process ceiling (a fork bomb's SIGCHLD
	// storm) the runtime dies when it cannot. Children are reaped on a tick.
	start := boottime()
	deadline, wall := start+a.lifetime, a.wall
	var claim chan bool
	if a.warm {
		deadline, wall = start+a.idle, a.idleWall
		claim = make(chan bool, 1)
		go readClaim(os.Stdin, claim)
	}
	for {
		reapAll()
		// Both clocks: the boot-time one counts from the init's own start
		// and cannot be set from a sandbox (nor can the wall clock: no
		// CAP_SYS_TIME); the wall-clock expiry is the label's, so the
		// container ends when the reaper and the backstop expect it.
		left := min(deadline-boottime(), time.Until(wall.Add(wallMargin)))
		if left <= 0 {
			return 0
		}
		t := time.NewTimer(min(left, reapEvery)) // re-read both clocks and reap on each tick
		select {
		case <-t.C:
		case ok := <-claim:
			if !ok {
				return 0 // not the claim line, or the pool's input closed
			}
			deadline, wall, claim = boottime()+a.lifetime, a.wall, nil
			if _, err := fmt.Fprintln(os.Stdout, claimedLine); err != nil {
				return 0
			}
		}
		t.Stop()
	}
}

// readClaim reads the first line of the warm sandbox's input: true for the
// claim line, false for anything else or the end of the input.
func readClaim(in io.Reader, claim chan<- bool) {
	line, err := bufio.NewReaderSize(io.LimitReader(in, 64), 64).ReadString('\n')
	claim <- err == nil && strings.TrimSuffix(line, "\n") == claimLine
}

// reapAll collects every exited child: the orphans of exec'd commands are
// the init's, and would otherwise fill the process cap as zombies.
func reapAll() {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
	}
}

// boottime is CLOCK_BOOTTIME: monotonic, counting suspend, set by nobody.
func boottime() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 1<<63 - 1 // no clock: the deadline has passed
	}
	return time.Duration(ts.Nano())
}
