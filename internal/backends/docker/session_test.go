package docker

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Docker's rule for container names.
var dockerName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]+$`)

func TestSessionName(t *testing.T) {
	seen := map[string]string{}
	for _, c := range [][3]string{
		{"", "acme", "s-1"}, {"", "acme", "s-2"}, {"", "globex", "s-1"}, {"other", "acme", "s-1"},
		{"", "acme/../x", "s 1;rm -rf"}, {"", "ünïcödé", strings.Repeat("x", 4096)}, {"", "a", "bs-1"}, {"", "ab", "s-1"},
	} {
		n := sessionName(c[0], c[1], c[2])
		if !dockerName.MatchString(n) || len(n) > 64+1+128 {
			t.Fatalf("%q is not a valid Docker name (%v)", n, c)
		}
		if len(c[1]) > 4 && strings.Contains(n, c[1]) {
			t.Fatalf("%q shows the tenant id", n)
		}
		if prev, ok := seen[n]; ok {
			t.Fatalf("%v and %s have the same name %s", c, prev, n)
		}
		seen[n] = strings.Join(c[:], "|")
		if again := sessionName(c[0], c[1], c[2]); again != n {
			t.Fatalf("not deterministic: %s, %s", n, again)
		}
	}
	if sessionName("", "", "s-1") != "" || sessionName("", "acme", "") != "" {
		t.Fatal("a spec without a tenant or session must get a random name")
	}
}

// The session of a sandbox named for it is read back from the name only
// under its own tenant and scope, and only when the name's digest is that
// of the tenant and the session the name ends with: a name edited to
// another session, or read under another tenant, says nothing.
func TestSessionOfName(t *testing.T) {
	long := strings.Repeat("s", 128)
	for _, session := range []string{"s-1", "S.2_x", long} {
		n := sessionName("", "acme", session)
		if !strings.HasSuffix(n, "-"+session) {
			t.Fatalf("%q does not end with its session %q", n, session)
		}
		if got := sessionOfName("", "acme", n); got != session {
			t.Fatalf("sessionOfName(%q) = %q, want %q", n, got, session)
		}
		if got := sessionOfName("", "globex", n); got != "" {
			t.Fatalf("read under another tenant: %q", got)
		}
		if got := sessionOfName("other", "acme", n); got != "" {
			t.Fatalf("read under another scope: %q", got)
		}
	}
	n := sessionName("", "acme", "s-1")
	for _, forged := range []string{
		strings.TrimSuffix(n, "s-1") + "s-2", // another session, the digest of s-1
		strings.TrimSuffix(n, "-s-1"),        // no session
		strings.TrimSuffix(n, "-s-1") + "-",  // an empty one
		n + "x", n[:len(n)-5] + "0-s-1",      // a changed digest
		sessionName("", "globex", "s-1"), // another tenant's
		"sandboxio-s-" + strings.Repeat("0", 12) + "-" + strings.Repeat("0", 32) + "-s-1",
	} {
		if got := sessionOfName("", "acme", forged); got != "" {
			t.Errorf("sessionOfName(%q) = %q, want none", forged, got)
		}
	}
	// A session the policy refuses (the backend used directly) is not
	// put in the name; it cannot be read back.
	for _, session := range []string{"s 1;rm -rf", "-s", strings.Repeat("x", 129), "ünï"} {
		n := sessionName("", "acme", session)
		if strings.HasSuffix(n, "-"+session) || sessionOfName("", "acme", n) != "" {
			t.Errorf("%q: name %q", session, n)
		}
	}
}

// N concurrent creates for one tenant and session, each through its own
// backend (its own Docker client): exactly one container exists, and every
// other create is refused with ConfigurationError SBX-RUN-005 naming the
// tenant and session. The daemon decides, so this holds across processes
// too (TestOneSandboxPerSessionAcrossProcesses in cmd/sandboxio shows it).
func TestOneSandboxPerTenantSession(t *testing.T) {
	needDocker(t)
	t.Parallel()
	spec := testSpec(t)
	const n = 6
	var wg sync.WaitGroup
	errs := make([]error, n)
	sbs := make([]backends.Sandbox, n)
	for i := range n {
		b := newTestBackend(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			sbs[i], errs[i] = b.Create(context.WithoutCancel(t.Context()), backends.CreateRequest{Spec: spec})
		}()
	}
	wg.Wait()
	var opened []backends.Sandbox
	for i, err := range errs {
		if err == nil {
			opened = append(opened, sbs[i])
			t.Cleanup(func() { _ = sbs[i].Close(context.WithoutCancel(t.Context())) })
			continue
		}
		me := classError(t, err, model.ErrConfiguration, "")
		if me.Rule != rules.OneSandbox || me.Attribute != "session_id" || !strings.Contains(me.Message, `tenant "acme" session "`+spec.SessionID+`"`) {
			t.Fatalf("refusal: %v", err)
		}
	}
	b := newTestBackend(t)
	got, err := b.List(t.Context(), map[string]string{model.LabelTenantID: "acme", model.LabelSessionID: spec.SessionID})
	if err != nil {
		t.Fatal(err)
	}
	if len(opened) != 1 || len(got) != 1 || got[0].ID != opened[0].ID() {
		t.Fatalf("%d creates succeeded, %d containers exist; want one of each: %v", len(opened), len(got), errs)
	}

	// Once it is closed, the session can have a sandbox again.
	if err := opened[0].Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	open(t, b, spec)
}

// A container that holds a session's name but is no sandbox any more (it
// exited, and AutoRemove did not remove it) does not block the session: the
// next create removes it.
func TestStaleSessionContainerIsReplaced(t *testing.T) {
	needDocker(t)
	t.Parallel()
	b := newTestBackend(t)
	spec := testSpec(t)
	name := sessionName(b.cfg.scope, spec.TenantID, spec.SessionID)
	ctx := t.Context()
	labels := map[string]string{model.LabelManaged: "true", model.LabelTenantID: spec.TenantID, model.LabelSessionID: spec.SessionID,
		labelExpires: time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "test": labelSafe(t.Name())}
	for k, v := range b.owner.Labels() {
		labels[k] = v
	}
	labels[labelOwner] = "someone-else"
	resp, err := b.cli.ContainerCreate(ctx, &container.Config{Image: LocalImage, Entrypoint: []string{"true"}, Labels: labels},
		&container.HostConfig{NetworkMode: "none"}, nil, nil, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.removeContainer(context.WithoutCancel(t.Context()), resp.ID) })
	if err := b.cli.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	wait, errc := b.cli.ContainerWait(ctx, resp.ID, container.WaitConditionNotRunning)
	select {
	case <-wait:
	case err := <-errc:
		t.Fatal(err)
	}
	sb := open(t, b, spec)
	if sb.id == resp.ID {
		t.Fatal("the exited container was returned as the sandbox")
	}
	if _, err := b.cli.ContainerInspect(ctx, resp.ID); err == nil {
		t.Fatal("the exited container is still there")
	}
}

// A live sandbox of another process is never removed by a refused create,
// nor by the clean-up of a create that gave up: the name is the session's,
// not the process's.
func TestRefusedCreateLeavesTheHolderAlone(t *testing.T) {
	needDocker(t)
	t.Parallel()
	b := newTestBackend(t)
	spec := testSpec(t)
	holder := open(t, b, spec)
	other := newTestBackend(t)
	other.owner.ID = "another-process"
	_, err := other.Create(t.Context(), backends.CreateRequest{Spec: spec})
	if me := classError(t, err, model.ErrConfiguration, ""); me.Rule != rules.OneSandbox || !strings.Contains(me.Message, shortID(holder.id)) {
		t.Fatalf("refusal: %v", err)
	}
	name := sessionName(other.cfg.scope, spec.TenantID, spec.SessionID)
	if err := other.removeOwn(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	other.discard(t.Context(), "", name)
	ins, err := b.cli.ContainerInspect(t.Context(), holder.id)
	if err != nil || !ins.State.Running {
		t.Fatalf("the holder was touched: %v", errors.Join(err))
	}
}
