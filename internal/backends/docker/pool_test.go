package docker

import (
	"context"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// templateOf is the template spec of a per-tenant test spec: no tenant,
// no session.
func templateOf(s model.Spec) model.Spec {
	s.TenantID, s.SessionID = "", ""
	return s
}

const testSpecHash = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// newWarm creates a warm sandbox of spec's template that the test removes at
// its end (whatever became of it).
func newWarm(t testing.TB, b *dockerBackend, spec model.Spec, idle time.Duration) *warm {
	t.Helper()
	w, err := b.CreateWarm(t.Context(), backends.WarmRequest{Spec: templateOf(spec), SpecSHA256: testSpecHash, MaxIdle: idle})
	if err != nil {
		t.Fatalf("create warm: %v", err)
	}
	t.Cleanup(func() { _ = b.removeContainer(context.WithoutCancel(t.Context()), w.ID()) })
	return w.(*warm)
}

func claimOf(t testing.TB, w *warm, spec model.Spec) *sandbox {
	t.Helper()
	s, err := w.Claim(t.Context(), backends.ClaimRequest{Spec: spec, SpecSHA256: testSpecHash})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.WithoutCancel(t.Context())) })
	return s.(*sandbox)
}

// A warm sandbox carries no tenant: its labels have none and its name is
// no session's. The claim binds it by name, as the daemon shows: the
// container is renamed to the session's name, which a cold create of the
// same session then finds taken, and a list by tenant (and session) finds
// it with the binding.
func TestWarmClaimBindsByName(t *testing.T) {
	needDocker(t)
	t.Parallel()
	b := newTestBackend(t)
	spec := testSpec(t)
	w := newWarm(t, b, spec, time.Minute)
	ctx := t.Context()
	ins, err := b.cli.ContainerInspect(ctx, w.ID())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ins.Config.Labels[model.LabelTenantID]; ok || !strings.HasPrefix(ins.Name, "/"+warmPrefix) {
		t.Fatalf("warm sandbox has a tenant: name %s labels %v", ins.Name, ins.Config.Labels)
	}
	if ins.Config.Labels[labelPool] != poolWarm || ins.Config.Labels[labelSpecHash] != testSpecHash {
		t.Fatalf("warm sandbox labels: %v", ins.Config.Labels)
	}

	sb := claimOf(t, w, spec)
	ins, err = b.cli.ContainerInspect(ctx, sb.id)
	if err != nil {
		t.Fatal(err)
	}
	if want := "/" + sessionName(b.cfg.scope, spec.TenantID, spec.SessionID); ins.Name != want {
		t.Fatalf("claimed container is named %s, want %s", ins.Name, want)
	}
	// The cold create of the same session is refused by the daemon.
	_, err = b.Create(ctx, backends.CreateRequest{Spec: spec})
	if me := classError(t, err, model.ErrConfiguration, ""); me.Rule != rules.OneSandbox || !strings.Contains(me.Message, shortID(sb.id)) {
		t.Fatalf("second sandbox for the session: %v", err)
	}
	// So is a second claim for it, and that warm sandbox is removed.
	w2 := newWarm(t, b, spec, time.Minute)
	_, err = w2.Claim(ctx, backends.ClaimRequest{Spec: spec, SpecSHA256: testSpecHash})
	if me := classError(t, err, model.ErrConfiguration, ""); me.Rule != rules.OneSandbox {
		t.Fatalf("second claim for the session: %v", err)
	}
	if _, err := b.cli.ContainerInspect(ctx, w2.ID()); !cerrdefs.IsNotFound(err) {
		t.Fatalf("the refused warm sandbox is still there: %v", err)
	}
	// Listing by tenant, and by tenant and session, finds it.
	for _, labels := range []map[string]string{
		{model.LabelTenantID: spec.TenantID, "test": labelSafe(t.Name())},
		{model.LabelTenantID: spec.TenantID, model.LabelSessionID: spec.SessionID},
	} {
		infos, err := b.List(ctx, labels)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, in := range infos {
			if in.ID == sb.id {
				found = true
				// The session too, by tenant alone: read back from the name.
				if in.Labels[model.LabelTenantID] != spec.TenantID || in.Labels[model.LabelSessionID] != spec.SessionID || in.Labels[labelBinding] != bindingName {
					t.Fatalf("listed by %v, labels: %v", labels, in.Labels)
				}
			}
		}
		if !found {
			t.Fatalf("list by %v does not find the claimed sandbox", labels)
		}
	}
	other, err := b.List(ctx, map[string]string{model.LabelTenantID: "globex", model.LabelSessionID: spec.SessionID})
	if err != nil || len(other) != 0 {
		t.Fatalf("another tenant's list finds %d (%v)", len(other), err)
	}
}

// The idle time is enforced by the daemon-side command: an unclaimed warm
// sandbox ends by itself and AutoRemove deletes it. Once claimed, the idle
// time no longer governs: the sandbox lives past it, until its lifetime,
// counted from the claim.
func TestWarmIdleAndLifetimeEnforcedDaemonSide(t *testing.T) {
	needDocker(t)
	t.Parallel()
	b := newTestBackend(t)
	ctx := t.Context()
	idle := newWarm(t, b, testSpec(t), 2*time.Second)
	waitContainerGone(t, b, idle.ID(), 20*time.Second)

	spec := testSpec(t, func(s *model.Spec) { s.LifetimeSeconds = 20 })
	// An idle time a loaded host's create cannot eat up (at 5 s, a
	// create at load 17 left the claim nothing), below the lifetime.
	w := newWarm(t, b, spec, 10*time.Second)
	sb := claimOf(t, w, spec)
	if d := sb.expires.Sub(time.Now().Add(20 * time.Second)); d > time.Second || d < -time.Second {
		t.Fatalf("expires %s, want about 20s from the claim", sb.expires)
	}
	time.Sleep(time.Until(w.IdleUntil().Add(2 * time.Second)))
	if out := sh(t, sb, "echo alive"); out != "alive" {
		t.Fatalf("claimed sandbox after its idle time: %q", out)
	}
	ins, err := b.cli.ContainerInspect(ctx, sb.id)
	if err != nil || !ins.State.Running {
		t.Fatalf("claimed sandbox stopped after the idle time: %v", err)
	}
	waitContainerGone(t, b, sb.id, 30*time.Second)
	if since := time.Since(sb.created); since < 19*time.Second {
		t.Fatalf("claimed sandbox ended %s after its claim, before its lifetime", since)
	}
}

func waitContainerGone(t testing.TB, b *dockerBackend, id string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		_, err := b.cli.ContainerInspect(t.Context(), id)
		if cerrdefs.IsNotFound(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %s still there after %s (%v)", short(id), d, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// A warm sandbox changed after it was created is refused at its claim and
// removed: another template's digest, a stopped (paused) container, a
// resource limit or a network changed with `docker update` or `docker
// network connect`. Secrets never reached it.
func TestWarmTamperedRefused(t *testing.T) {
	needDocker(t)
	t.Parallel()
	b := newTestBackend(t)
	ctx := t.Context()
	pids := int64(4096)
	for name, c := range map[string]struct {
		hash   string
		tamper func(id string) error
	}{
		"spec digest": {hash: strings.Repeat("f", 64)},
		"paused":      {tamper: func(id string) error { return b.cli.ContainerPause(ctx, id) }},
		"stopped":     {tamper: func(id string) error { return b.cli.ContainerKill(ctx, id, "KILL") }},
		"pids": {tamper: func(id string) error {
			_, err := b.cli.ContainerUpdate(ctx, id, container.UpdateConfig{Resources: container.Resources{PidsLimit: &pids}})
			return err
		}},
		"network": {tamper: func(id string) error { return b.cli.NetworkConnect(ctx, "bridge", id, nil) }},
	} {
		t.Run(name, func(t *testing.T) {
			spec := testSpec(t)
			w := newWarm(t, b, spec, time.Minute)
			if c.tamper != nil {
				if err := c.tamper(w.ID()); err != nil {
					if name != "network" {
						t.Fatalf("tamper: %v", err)
					}
					// The daemon itself refuses a network for a container
					// of network mode none: nothing to claim then.
					t.Logf("the daemon refuses the change: %v", err)
					return
				}
			}
			hash := testSpecHash
			if c.hash != "" {
				hash = c.hash
			}
			_, err := w.Claim(ctx, backends.ClaimRequest{Spec: spec, SpecSHA256: hash, Secrets: map[string]string{}})
			if err == nil {
				t.Fatal("a tampered warm sandbox was claimed")
			}
			t.Logf("refused: %v", err)
			waitContainerGone(t, b, w.ID(), 20*time.Second)
			if _, err := b.cli.ContainerInspect(ctx, sessionName(b.cfg.scope, spec.TenantID, spec.SessionID)); !cerrdefs.IsNotFound(err) {
				t.Fatalf("the session's name is held after a refused claim: %v", err)
			}
		})
	}
}

// Secrets reach a claimed sandbox with each command, never its container's
// environment, and never the warm sandbox.
func TestWarmSecretsOnlyAfterClaim(t *testing.T) {
	needDocker(t)
	t.Parallel()
	b := newTestBackend(t)
	spec := testSpec(t, func(s *model.Spec) { s.SecretNames = []string{"API_TOKEN"} })
	w := newWarm(t, b, spec, time.Minute)
	const canary = "CANARY-w4rm-p00l-s3cr3t"
	s, err := w.Claim(t.Context(), backends.ClaimRequest{Spec: spec, SpecSHA256: testSpecHash, Secrets: map[string]string{"API_TOKEN": canary}})
	if err != nil {
		t.Fatal(err)
	}
	sb := s.(*sandbox)
	t.Cleanup(func() { _ = sb.Close(context.WithoutCancel(t.Context())) })
	if out := sh(t, sb, `[ "$API_TOKEN" = `+canary+` ] && echo yes`); out != "yes" {
		t.Fatalf("the secret did not reach the claimed sandbox: %q", out)
	}
	ins, err := b.cli.ContainerInspect(t.Context(), sb.id)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.Join(ins.Config.Env, " "), canary) {
		t.Fatal("the secret is in the container's environment")
	}
}
