package docker

import (
	"strings"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// A killer slower than its wait (a loaded host can take longer than
// killBudget to start an exec) is not a failed killer: the timeout is
// reported in time, the killer goes on, the next command waits for it, and
// the sandbox survives with none of the timed-out command's processes
// left. Before, a slow killer killed the whole sandbox, so a busy host lost
// users their sandboxes (CI: TestDocker_TypedErrors got SandboxGone).
func TestSlowKillerKeepsTheSandbox(t *testing.T) {
	needDocker(t)
	t.Parallel()
	for _, rt := range []string{"runc", "runsc"} {
		t.Run(rt, func(t *testing.T) {
			needRuntime(t, rt)
			t.Parallel()
			b := newTestBackend(t)
			sb := open(t, b, testSpec(t, withRuntime(rt)))
			sb.killWait = time.Nanosecond // every killer is slow
			// A process of another command, which the killer must spare;
			// it also shows that the counter sees live processes.
			sh(t, sb, "sleep 5350 >/dev/null 2>&1 &")
			if n := countProcs(t, sb, "535"); n != 1 {
				t.Fatalf("counted %d background sleeps, want 1", n)
			}

			start := time.Now()
			_, err := sb.Run(t.Context(), []string{"sh", "-c", "sleep 5351 & sleep 5352 & wait"}, backends.RunOptions{Timeout: time.Second})
			took := time.Since(start)
			e := classError(t, err, model.ErrExecutionTimeout, "")
			if !strings.Contains(e.Message, "being killed") {
				t.Fatalf("the error should say the processes are still being killed: %v", err)
			}
			// The caller is not held for the killer: the timeout plus the
			// clean-up's budget, with room for a loaded host.
			if bound := time.Second + cleanupBudget + 2*time.Second; took > bound {
				t.Errorf("the timeout was reported after %s, want within %s", took, bound)
			}
			if err := sb.usable(); err != nil {
				t.Fatalf("a slow killer cost the sandbox: %v", err)
			}
			// The next command runs after the killer, in the same sandbox,
			// and sees none of the processes it killed, only the other
			// command's.
			if n := countProcs(t, sb, "535"); n != 1 {
				t.Fatalf("%d marked processes left, want only the other command's sleep", n)
			}
			if got := sh(t, sb, "echo still here"); got != "still here" {
				t.Fatalf("next command: %q", got)
			}
		})
	}
}
