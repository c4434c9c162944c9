package docker

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// childMain is the helper process: it opens two sandboxes, says so, and
// waits to be killed.
func childMain() int {
	b, err := newBackend()
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	spec := model.Spec{
		SpecVersion: model.SpecVersion, Name: "reaper-child", Backend: "docker://", Image: LocalImage,
		Network: model.NetworkPolicy{}.Normalized(), Resources: model.DefaultCaps(),
		TimeoutSeconds: 60, LifetimeSeconds: 600, TenantID: "acme", SessionID: "child",
		Labels: map[string]string{"test": "reaper-child"},
	}
	var ids []string
	for i := range 2 {
		spec.SessionID = fmt.Sprintf("child-%d", i)
		sb, err := b.Create(context.Background(), backends.CreateRequest{Spec: spec})
		if err != nil {
			fmt.Println("ERR", err)
			return 1
		}
		ids = append(ids, sb.ID())
	}
	if watcherErr != nil {
		fmt.Println("ERR watcher:", watcherErr)
		return 1
	}
	fmt.Printf("OWNER %s\n", processOwner().ID)
	fmt.Printf("READY %s\n", strings.Join(ids, ","))
	select {}
}

func TestReaperRemovesSandboxesOfKilledOwner(t *testing.T) {
	needDocker(t)
	t.Parallel()
	b := newTestBackend(t)
	const grace = time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := startChild(ctx, childEnv+"=1", reaperGraceEnv+"="+grace.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.kill)
	ownerID, ids := c.owner, strings.Split(c.ready, ",")
	owned := map[string]string{labelOwner: ownerID}
	if got, err := b.List(context.Background(), owned); err != nil || len(got) != 2 {
		t.Fatalf("child's sandboxes before the kill: %d (%v)", len(got), err)
	}

	c.kill()
	killed := time.Now()
	waitGone(t, b, owned, grace+15*time.Second)
	t.Logf("the watcher removed %d sandboxes %s after the owner was SIGKILLed (grace %s)", len(ids), time.Since(killed).Round(10*time.Millisecond), grace)
}

func TestReapRemovesExpiredAndOrphaned(t *testing.T) {
	needDocker(t)
	t.Parallel()
	b := newTestBackend(t)
	ctx := context.Background()

	// A process that has exited: its pid names no live process (or, if
	// reused, one with another start time).
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	self := processOwner()
	mk := func(kind string, labels map[string]string) string {
		l := map[string]string{model.LabelManaged: "true", "test": labelSafe(t.Name()), "kind": kind,
			labelExpires: time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}
		for k, v := range self.labels() {
			l[k] = v
		}
		for k, v := range labels {
			l[k] = v
		}
		resp, err := b.cli.ContainerCreate(ctx, &container.Config{Image: LocalImage, Entrypoint: []string{"sleep", "600"}, Labels: l},
			&container.HostConfig{NetworkMode: "none"}, nil, nil, "sandboxio-reaptest-"+randomHex(4))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.removeContainer(context.Background(), resp.ID) })
		return resp.ID
	}
	// Expired as of the Now given to Reap below: a label in the past would
	// be the host backstop's to remove first.
	expired := mk("expired", map[string]string{labelExpires: time.Now().Add(10 * time.Minute).UTC().Format(time.RFC3339)})
	orphan := mk("orphan", map[string]string{labelOwner: "dead-owner", labelOwnerPID: fmt.Sprint(dead.ProcessState.Pid()), labelOwnerStart: "1"})
	mine := mk("mine", nil)

	scope := map[string]string{"test": labelSafe(t.Name())}
	later := time.Now().Add(20 * time.Minute)
	dry, err := b.Reap(ctx, backends.ReapOptions{DryRun: true, Labels: scope, Now: later})
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for _, r := range dry {
		reasons[r.Info.ID] = r.Reason
	}
	if reasons[expired] != "expired" || reasons[orphan] != "owner gone" || reasons[mine] != "" || len(dry) != 2 {
		t.Fatalf("dry run: %v", reasons)
	}
	if left, _ := b.List(ctx, scope); len(left) != 3 {
		t.Fatalf("a dry run removed something: %d left", len(left))
	}
	if _, err := b.Reap(ctx, backends.ReapOptions{Labels: scope, Now: later}); err != nil {
		t.Fatal(err)
	}
	left, _ := b.List(ctx, scope)
	if len(left) != 1 || left[0].ID != mine {
		t.Fatalf("after reaping: %v", left)
	}
}
