package docker

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// ptraceProbeEnv turns the test binary, run inside a sandbox from the init's
// mount, into a probe that tries to ptrace each pid it names.
const ptraceProbeEnv = "SANDBOXIO_TEST_PTRACE_PROBE"

func init() {
	childModes[ptraceProbeEnv] = ptraceProbe
}

// ptraceProbe prints "PID ok" or "PID <errno>" for a PTRACE_ATTACH to each
// pid, detaching again from what it could attach to.
func ptraceProbe() int {
	runtime.LockOSThread()
	for _, f := range strings.Fields(os.Getenv(ptraceProbeEnv)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			fmt.Println(f, "not a pid")
			continue
		}
		if err := unix.PtraceAttach(pid); err != nil {
			fmt.Println(pid, err)
			continue
		}
		var ws unix.WaitStatus
		_, _ = unix.Wait4(pid, &ws, 0, nil)
		_ = unix.PtraceDetach(pid)
		fmt.Println(pid, "ok")
	}
	return 0
}

// PID 1 of a sandbox is sandboxio's init, and the sandbox's root can neither
// stop it, kill it, trace it nor read its /proc files; the init reaps the
// orphans of exec'd commands. Shown from inside, on runc and runsc.
func TestInitIsPID1AndShielded(t *testing.T) {
	for _, rt := range runtimes {
		t.Run(rt, func(t *testing.T) {
			needRuntime(t, rt)
			t.Parallel()
			b := newTestBackend(t)
			sb := open(t, b, testSpec(t, withRuntime(rt)))
			if got := sh(t, sb, "cat /proc/1/comm"); got != initComm {
				t.Fatalf("PID 1 is %q, want %q", got, initComm)
			}
			if got := sh(t, sb, `tr '\0' ' ' </proc/1/cmdline`); !strings.HasPrefix(got, initTarget+" "+initProto+" cold ") {
				t.Fatalf("PID 1's command line: %q", got)
			}
			t.Logf("PID 1: %s", sh(t, sb, `grep -E '^(Threads|VmRSS)' /proc/1/status | tr '\n' ' '`))

			// Not dumpable: under runc its /proc files are closed to the
			// sandbox's root and it cannot be traced, while a dumpable
			// process of the sandbox (the shell, a sleep) can. gVisor keeps
			// its own /proc and ptrace rules; what they give is logged, and
			// its lifetime does not rest on them (the backstop).
			proc := sh(t, sb, `cat /proc/1/environ >/dev/null 2>&1 && echo pid1-environ; readlink /proc/1/exe >/dev/null 2>&1 && echo pid1-exe; `+
				`readlink /proc/1/fd/0 >/dev/null 2>&1 && echo pid1-fd; cat /proc/$$/environ >/dev/null && echo own-environ; true`)
			trace := sh(t, sb, `sleep 30 & s=$!; `+ptraceProbeEnv+`="1 $s" `+initTarget+`; kill $s`)
			lines := strings.Split(trace, "\n")
			switch {
			case rt == "runsc":
				t.Logf("gVisor: /proc of PID 1 from inside: %q; ptrace (PID 1, then a sleep): %q", proc, trace)
			case proc != "own-environ":
				t.Fatalf("/proc files readable from inside: %q (want only the shell's own)", proc)
			case len(lines) != 2 || !strings.HasPrefix(lines[0], "1 ") || strings.HasSuffix(lines[0], " ok") || !strings.HasSuffix(lines[1], " ok"):
				t.Fatalf("ptrace from inside (PID 1, then a sleep): %q", trace)
			default:
				t.Logf("ptrace from inside (PID 1, then a sleep): %q", trace)
			}

			// Orphans are reaped.
			got := sh(t, sb, `sh -c 'sleep 0.2 & exit 0'; sleep 1; z=0; for s in /proc/[0-9]*/stat; do case $(cat $s 2>/dev/null) in *") Z "*) z=$((z+1));; esac; done; echo $z`)
			if got != "0" {
				t.Fatalf("%s zombies left: the init does not reap", got)
			}

			// Signals from inside: Linux does not deliver SIGSTOP or SIGKILL
			// from inside a PID namespace to its init. gVisor (this one at
			// least) does: a stopped init is what the host backstop is for
			// (TestLifetimeLockedWithOwnerKilled), a killed one ends the
			// sandbox (fail closed).
			res, err := sb.Run(t.Context(), []string{"sh", "-c", `kill -STOP 1; kill -STOP -1; sleep 0.5; sed -n 's/^State:[[:space:]]*//p' /proc/1/status; kill -CONT 1`},
				backends.RunOptions{Timeout: 30 * time.Second})
			state := strings.TrimSpace(string(res.Stdout))
			switch {
			case err != nil:
				t.Fatalf("SIGSTOP to PID 1: %v", err)
			case rt == "runsc":
				t.Logf("gVisor: PID 1 after SIGSTOP from inside: %q", state)
			case !strings.HasPrefix(state, "S") && !strings.HasPrefix(state, "R"):
				t.Fatalf("PID 1 after SIGSTOP from inside: state %q", state)
			}
			_, err = sb.Run(t.Context(), []string{"sh", "-c", "kill -KILL 1; sleep 0.5; echo alive"}, backends.RunOptions{Timeout: 30 * time.Second})
			switch {
			case rt == "runsc" && err != nil:
				wantClass(t, err, model.ErrSandboxGone, "")
				t.Logf("gVisor: SIGKILL from inside ended PID 1 and with it the sandbox: %v", err)
			case err != nil:
				t.Fatalf("SIGKILL to PID 1 from inside: %v", err)
			}
		})
	}
}
