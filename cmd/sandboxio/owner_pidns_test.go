package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	dockertest "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/docker"
)

// A `sandboxio run` whose CLI lives in another PID namespace (here
// `unshare --pid --fork --mount-proc`, as in a container or under systemd's
// PrivatePIDs) holds its session like any other: a second run for the same
// tenant and session from the host's namespace cannot see that process, so
// it counts it as alive and is refused with SBX-RUN-005 naming the holder
// (its owner id, pid and PID namespace); `sandboxio reap` leaves it too; and
// the first run finishes normally. On runc and on runsc.
func TestOwnerInAnotherPIDNamespaceHoldsTheSession(t *testing.T) {
	needDocker(t)
	if os.Geteuid() != 0 {
		t.Skip("unshare --pid needs root")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare")
	}
	for _, rt := range []string{"runc", "runsc"} {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			session := "pidns-" + rt + "-" + runID
			removeLeftovers(t, "test_run="+runID, "sandboxio.session_id="+session)
			spec, sum := specFile(t, "acme", session, func(x *inputs.Template) { x.Runtime = rt })
			first := startCLIProcUnder(t, []string{"unshare", "--pid", "--fork", "--mount-proc", "--kill-child"}, nil,
				"run", "--spec", spec, "--spec-sha256", sum, "--tenant", "acme", "--session", session, "--", "sleep", "25")
			holder := waitRunning(t, first, "test_run="+runID, "sandboxio.session_id="+session)
			ownerID, ownerPID, ownerNS := holder.Labels["sandboxio.owner"], holder.Labels["sandboxio.owner.pid"], holder.Labels["sandboxio.owner.pidns"]
			if ownerID == "" || ownerPID == "" {
				t.Fatalf("holder without owner labels: %v", holder.Labels)
			}

			second := startCLIProc(t, nil, "run", "--spec", spec, "--spec-sha256", sum, "--tenant", "acme", "--session", session, "--", "true")
			waitExit(t, second, 90*time.Second)
			errOut := second.stderrText()
			t.Logf("second run (exit %d):\n%s", second.code, errOut)
			if second.code != exitConfiguration || !strings.Contains(errOut, "SBX-RUN-005") ||
				!strings.Contains(errOut, holder.ID[:12]) || !strings.Contains(errOut, ownerID) ||
				!strings.Contains(errOut, "pid "+ownerPID) || (ownerNS != "" && !strings.Contains(errOut, ownerNS)) {
				t.Errorf("second run: exit %d, want %d with SBX-RUN-005 naming container %s, owner %s, pid %s, PID namespace %s:\n%s",
					second.code, exitConfiguration, holder.ID[:12], ownerID, ownerPID, ownerNS, errOut)
			}

			reap := startCLIProc(t, nil, "reap", "--label", "test_run="+runID, "--label", "sandboxio.session_id="+session)
			waitExit(t, reap, 90*time.Second)
			if reap.code != exitOK || !strings.Contains(reap.stderrText(), "nothing to reap") {
				t.Errorf("reap: exit %d, want %d and nothing reaped:\n%s", reap.code, exitOK, reap.stderrText())
			}
			if c := runningLabelled(t, "test_run="+runID, "sandboxio.session_id="+session); len(c) != 1 || c[0].ID != holder.ID {
				t.Errorf("after the second run and reap, the running sandboxes of the session are %v, want only %s", ids(c), holder.ID[:12])
			}

			waitExit(t, first, 90*time.Second)
			if first.code != exitOK || strings.Contains(first.stderrText(), "SandboxGone") {
				t.Errorf("first run: exit %d, want %d:\n%s", first.code, exitOK, first.stderrText())
			}
			if n := dockertest.Left(t, "test_run="+runID, "sandboxio.session_id="+session); n != 0 {
				t.Errorf("%d containers left", n)
			}
		})
	}
}

// waitRunning waits (at most 90 s) for exactly one running container with
// the labels, while p runs, and returns it.
func waitRunning(t *testing.T, p *cliProc, labels ...string) container.Summary {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		cs := runningLabelled(t, labels...)
		if len(cs) == 1 {
			return cs[0]
		}
		select {
		case <-p.exited:
			t.Fatalf("the CLI exited (%d) before its sandbox ran:\n%s", p.code, p.stderrText())
		default:
		}
		if len(cs) > 1 || time.Now().After(deadline) {
			t.Fatalf("%d running containers for %v, want 1", len(cs), labels)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func waitExit(t *testing.T, p *cliProc, d time.Duration) {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(d):
		t.Fatalf("the CLI did not exit within %s:\n%s", d, p.stderrText())
	}
}

func runningLabelled(t testing.TB, labels ...string) []container.Summary {
	t.Helper()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	f := filters.NewArgs(filters.Arg("status", "running"))
	for _, l := range labels {
		f.Add("label", l)
	}
	cs, err := cli.ContainerList(t.Context(), container.ListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// removeLeftovers removes, when the test ends, the containers with the
// labels that a failing run left (a CLI in another PID namespace takes its
// watcher with it when it is killed).
func removeLeftovers(t *testing.T, labels ...string) {
	t.Cleanup(func() {
		cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
		if err != nil {
			return
		}
		defer cli.Close()
		f := filters.NewArgs()
		for _, l := range labels {
			f.Add("label", l)
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 30*time.Second)
		defer cancel()
		cs, _ := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
		for _, c := range cs {
			_ = cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
		}
	})
}

func ids(cs []container.Summary) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.ID[:12])
	}
	return out
}
