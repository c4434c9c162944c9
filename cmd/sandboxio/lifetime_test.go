package main

import (
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	backendtest "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/conformance"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/testing/docker/procenv"
)

// `sandboxio run` end to end: the command stops every process it can see in
// its sandbox (the conformance suite's script), then the CLI and its watcher
// are killed with SIGKILL. The sandbox is still gone within its lifetime
// plus the stated bound (15 s), on runc and runsc.
func TestRunLifetimeLockedWithCLIKilled(t *testing.T) {
	needDocker(t)
	for _, rt := range []string{"runc", "runsc"} {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			const lifetime, bound = 8 * time.Second, 15 * time.Second
			session := "locked-" + rt + "-" + runID
			spec, sum := specFile(t, "acme", session, func(x *inputs.Template) {
				secs := int64(lifetime / time.Second)
				x.Runtime, x.LifetimeSeconds, x.TimeoutSeconds = rt, &secs, &secs
			})
			// The watcher would sweep only a minute after its owner died:
			// it is killed long before, and could not rescue the test.
			p := startCLIProc(t, []string{"SANDBOXIO_DOCKER_REAPER_GRACE=60s"}, "run", "--spec", spec, "--spec-sha256", sum,
				"--tenant", "acme", "--session", session, "--",
				"sh", "-c", backendtest.SwitchOffScript+"; exec sleep 60")
			labels := []string{"test_run=" + runID, "sandboxio.session_id=" + session}
			var owner string
			for deadline := time.Now().Add(90 * time.Second); owner == ""; time.Sleep(100 * time.Millisecond) {
				if cs := labelled(t, labels...); len(cs) == 1 && cs[0].State == "running" {
					owner = cs[0].Labels["sandboxio.owner"]
				}
				select {
				case <-p.exited:
					t.Fatalf("the CLI exited (%d) before its sandbox ran: %s", p.code, p.stderrText())
				default:
				}
				if time.Now().After(deadline) {
					t.Fatalf("no running sandbox after 90 s: %s", p.stderrText())
				}
			}
			started := time.Now()
			time.Sleep(3 * time.Second) // the script's loop starts 2 s after the command
			_ = p.cmd.Process.Kill()
			<-p.exited
			killed, alive := procenv.KillAll("SANDBOXIO_DOCKER_REAPER="+owner, 5*time.Second)
			if len(killed) == 0 || len(alive) > 0 {
				t.Fatalf("the CLI's watcher: killed %v, alive %v", killed, alive)
			}
			t.Logf("CLI pid %d and its watcher %v killed with SIGKILL", p.cmd.Process.Pid, killed)
			for deadline := started.Add(lifetime + bound); countLabelled(t, labels...) > 0; time.Sleep(200 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the sandbox is still there %s after it started (lifetime %s, bound %s)", time.Since(started).Round(time.Millisecond), lifetime, bound)
				}
			}
			t.Logf("gone %s after it was seen running (lifetime %s)", time.Since(started).Round(10*time.Millisecond), lifetime)
		})
	}
}
