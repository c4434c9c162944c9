package docker

import (
	"context"
	"fmt"
	"maps"
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
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	c, err := startChild(ctx, childEnv+"=1", reaperGraceEnv+"="+grace.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.kill)
	ownerID, ids := c.owner, strings.Split(c.ready, ",")
	owned := map[string]string{labelOwner: ownerID}
	if got, err := b.List(t.Context(), owned); err != nil || len(got) != 2 {
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
	ctx := t.Context()

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
		for k, v := range self.Labels() {
			l[k] = v
		}
		for k, v := range labels {
			l[k] = v
		}
		setMark(l) // as a create by this backend marks it
		resp, err := b.cli.ContainerCreate(ctx, &container.Config{Image: LocalImage, Entrypoint: []string{"sleep", "600"}, Labels: l},
			&container.HostConfig{NetworkMode: "none"}, nil, nil, "sandboxio-reaptest-"+randomHex(4))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.removeContainer(context.WithoutCancel(t.Context()), resp.ID) })
		return resp.ID
	}
	// Expired by the clock Reap is given (now), not the daemon's: a
	// lifetime backstop on the daemon must not remove it first.
	now := time.Now().Add(45 * time.Minute)
	expired := mk("expired", map[string]string{labelExpires: time.Now().Add(30 * time.Minute).UTC().Format(time.RFC3339)})
	orphan := mk("orphan", map[string]string{labelOwner: "dead-owner", labelOwnerPID: fmt.Sprint(dead.ProcessState.Pid()), labelOwnerStart: "1"})
	mine := mk("mine", nil)

	scope := map[string]string{"test": labelSafe(t.Name())}
	dry, err := b.Reap(ctx, backends.ReapOptions{DryRun: true, Labels: scope, Now: now})
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
	if _, err := b.Reap(ctx, backends.ReapOptions{Labels: scope, Now: now}); err != nil {
		t.Fatal(err)
	}
	left, _ := b.List(ctx, scope)
	if len(left) != 1 || left[0].ID != mine {
		t.Fatalf("after reaping: %v", left)
	}
}

// Reap removes only what this backend created: a container that carries
// sandboxio's labels (expired, an owner gone) but no mark, a mark copied
// from another container, or one made under another key, is listed as left
// and stays; a real sandbox past its expiry is removed.
func TestReapLeavesUnmarkedContainers(t *testing.T) {
	needDocker(t)
	t.Parallel()
	b := newTestBackend(t)
	ctx := t.Context()
	key, err := reapKey()
	if err != nil {
		t.Fatal(err)
	}
	scope := map[string]string{"test": labelSafe(t.Name())}
	// Expired by the clock Reap is given, not by the daemon's: a lifetime
	// backstop on the daemon must not remove them first.
	later := time.Now().Add(2 * time.Hour)
	past := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	hand := func(kind string, mark func(map[string]string)) string {
		l := map[string]string{model.LabelManaged: "true", model.LabelTenantID: "acme", model.LabelSessionID: "by-hand-" + kind,
			"test": scope["test"], labelExpires: past, labelOwner: "by-hand", labelOwnerPID: "999999999"}
		mark(l)
		resp, err := b.cli.ContainerCreate(ctx, &container.Config{Image: LocalImage, Entrypoint: []string{"sleep", "600"}, Labels: l},
			&container.HostConfig{NetworkMode: "none"}, nil, nil, "sandboxio-reaptest-"+randomHex(4))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.removeContainer(context.WithoutCancel(t.Context()), resp.ID) })
		return resp.ID
	}
	unmarked := hand("unmarked", func(map[string]string) {})
	copied := hand("copied", func(l map[string]string) {
		other := maps.Clone(l)
		other[model.LabelSessionID] = "another"
		l[labelMark] = markFor(key, other)
	})
	foreign := hand("foreign", func(l map[string]string) { l[labelMark] = markFor([]byte("another host's key, 32 bytes...."), l) })
	real := open(t, b, testSpec(t))

	got, err := b.Reap(ctx, backends.ReapOptions{Labels: scope, Now: later})
	if err != nil {
		t.Fatal(err)
	}
	left := map[string]string{}
	removed := map[string]string{}
	for _, r := range got {
		if r.Left != "" {
			left[r.Info.ID] = r.Left
		} else {
			removed[r.Info.ID] = r.Reason
		}
	}
	for id, want := range map[string]string{unmarked: "carries no sandboxio mark", copied: "does not match", foreign: "another host's reap key"} {
		if !strings.Contains(left[id], "not ours, left") || !strings.Contains(left[id], want) {
			t.Errorf("%s: left %q, want it left saying %q", id[:12], left[id], want)
		}
		if _, err := b.cli.ContainerInspect(ctx, id); err != nil {
			t.Errorf("%s was removed: %v", id[:12], err)
		}
	}
	if removed[real.id] != "expired" || len(removed) != 1 {
		t.Errorf("removed %v, want only the real sandbox %s (expired)", removed, real.id[:12])
	}
	if _, err := b.cli.ContainerInspect(ctx, real.id); err == nil {
		t.Errorf("the real sandbox past its expiry is still there")
	}
}
