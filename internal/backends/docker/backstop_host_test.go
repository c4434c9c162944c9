package docker

import (
	"context"
	"slices"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// mkLabelled creates (and starts, when start) a plain container carrying
// the managed label, the test's label and labels: what the backstop sees of
// a sandbox, with no sandboxio init in it. The test removes it at its end.
func mkLabelled(t *testing.T, b *dockerBackend, name string, labels map[string]string, start bool) string {
	t.Helper()
	ctx := t.Context()
	l := map[string]string{model.LabelManaged: "true", "test": labelSafe(t.Name())}
	for k, v := range labels {
		l[k] = v
	}
	resp, err := b.cli.ContainerCreate(ctx, &container.Config{Image: LocalImage, Entrypoint: []string{"sleep", "600"}, Labels: l},
		&container.HostConfig{NetworkMode: "none"}, nil, nil, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.removeContainer(context.WithoutCancel(t.Context()), resp.ID) })
	if start {
		if err := b.cli.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return resp.ID
}

func rfc(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// What the backstop removes: a sandbox past its expiry (plus grace), an
// unclaimed warm one past its idle bound, a claimed warm one past its claim
// (the daemon's rename event) plus its lifetime, and one with no expiry; it
// keeps the rest. Its sweep is run here as of a later time, on this test's
// containers only.
func TestBackstopSweepEnds(t *testing.T) {
	needDocker(t)
	t.Parallel()
	b := newTestBackend(t)
	now := time.Now()
	soon, late := rfc(now.Add(10*time.Minute)), rfc(now.Add(time.Hour))
	warm := map[string]string{labelPool: poolWarm, labelIdleUntil: soon, labelExpires: late}
	tag := "sandboxio-bstest-" + randomHex(4)
	expired := mkLabelled(t, b, tag+"-expired", map[string]string{labelExpires: soon}, false)
	kept := mkLabelled(t, b, tag+"-kept", map[string]string{labelExpires: late}, false)
	idle := mkLabelled(t, b, warmPrefix+randomHex(8), warm, false)
	claimedWarm := map[string]string{labelLifetime: "600"}
	for k, v := range warm {
		claimedWarm[k] = v
	}
	claimed := mkLabelled(t, b, warmPrefix+randomHex(8), claimedWarm, false)
	longWarm := map[string]string{labelLifetime: "3000"}
	for k, v := range warm {
		longWarm[k] = v
	}
	claimedLong := mkLabelled(t, b, warmPrefix+randomHex(8), longWarm, false)
	for _, id := range []string{claimed, claimedLong} {
		if err := b.cli.ContainerRename(t.Context(), id, "sandboxio-s-"+tag+"-"+short(id)); err != nil {
			t.Fatal(err)
		}
	}

	sw := &sweeper{cli: b.cli, grace: backstopGrace, claims: map[string]time.Time{}, labels: map[string]string{"test": labelSafe(t.Name())}}
	removed, err := sw.sweep(t.Context(), now.Add(20*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]bool{expired: true, kept: false, idle: true, claimed: true, claimedLong: false} {
		if got := slices.Contains(removed, id); got != want {
			t.Errorf("%s: removed %v, want %v", short(id), got, want)
		}
		_, err := b.cli.ContainerInspect(t.Context(), id)
		if gone := cerrdefs.IsNotFound(err); gone != want {
			t.Errorf("%s: gone %v, want %v (%v)", short(id), gone, want, err)
		}
	}
	if len(sw.claims) != 1 {
		t.Errorf("claim times remembered: %v, want the long claimed one's", sw.claims)
	}
	// No expiry at all: removed (fail closed), by this sweep or, first, by
	// the daemon's own backstop.
	none := mkLabelled(t, b, tag+"-none", nil, false)
	if _, err := sw.sweep(t.Context(), now); err != nil {
		t.Fatal(err)
	}
	if _, err := b.cli.ContainerInspect(t.Context(), none); !cerrdefs.IsNotFound(err) {
		t.Errorf("a sandbox without expiry is left: %v", err)
	}
}

// The backstop container runs hardened, carries no sandboxio.managed label
// (it is no sandbox: CI's leak check filters on it), and removes a sandbox
// whose own timer was stopped once it is past its expiry plus the grace,
// with no owner, watcher or CLI involved. The test runs its own instance,
// under a name of its own, and removes it.
func TestBackstopContainerRemovesExpired(t *testing.T) {
	needDocker(t)
	t.Parallel()
	b := newTestBackend(t)
	ctx := t.Context()
	d, err := b.daemon(ctx)
	if err != nil {
		t.Fatal(err)
	}
	name := BackstopName + "-test-" + randomHex(4)
	t.Cleanup(func() {
		_ = b.cli.ContainerRemove(context.WithoutCancel(t.Context()), name, container.RemoveOptions{Force: true})
	})
	if err := b.startBackstop(ctx, name, d.arch); err != nil {
		t.Fatal(err)
	}
	ins, err := b.cli.ContainerInspect(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	hc := ins.HostConfig
	switch {
	case !ins.State.Running:
		t.Fatalf("backstop not running: %+v", ins.State)
	case ins.Config.Labels[model.LabelManaged] != "" || ins.Config.Labels[labelBackstop] != backstopVersion:
		t.Fatalf("backstop labels: %v", ins.Config.Labels)
	case hc.NetworkMode != "none" || !hc.ReadonlyRootfs || !slices.Equal(hc.CapDrop, []string{"ALL"}) ||
		!slices.Contains(hc.SecurityOpt, "no-new-privileges:true") || hc.RestartPolicy.Name != container.RestartPolicyUnlessStopped || hc.Privileged:
		t.Fatalf("backstop host config: network %s, read-only %v, cap-drop %v, security %v, restart %v, privileged %v",
			hc.NetworkMode, hc.ReadonlyRootfs, hc.CapDrop, hc.SecurityOpt, hc.RestartPolicy, hc.Privileged)
	}
	// A sandbox as they were made before: its lifetime a sleep, which its
	// root stopped.
	exp := time.Now().Add(2 * time.Second)
	id := mkLabelled(t, b, "sandboxio-bstest-"+randomHex(4), map[string]string{labelExpires: rfc(exp)}, true)
	if err := b.cli.ContainerKill(ctx, id, "STOP"); err != nil {
		t.Fatal(err)
	}
	within := backstopGrace + backstopInterval + 10*time.Second
	waitContainerGone(t, b, id, time.Until(exp.Add(within)))
	t.Logf("removed %s after its expiry label (grace %s, interval %s)", time.Since(exp.Truncate(time.Second)).Round(100*time.Millisecond), backstopGrace, backstopInterval)
}
