package sandbox

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Client.Close running while an Open is provisioning must not leave the new
// sandbox behind: Open closes it and says the client is closed.
func TestOpen_ClientClosedDuringProvisioning(t *testing.T) {
	tpl := template(t)
	spec, sum := tenantSpec(t, tpl, "acme", "s-1")
	f := &fakeBackend{delay: 300 * time.Millisecond}
	c, audit := newClient(t)
	withFake(c, f)
	type result struct {
		sb  *Sandbox
		err error
	}
	done := make(chan result, 1)
	go func() {
		sb, err := c.Open(context.WithoutCancel(t.Context()), Request{Spec: spec, SpecSHA256: sum, TenantID: "acme", SessionID: "s-1"})
		done <- result{sb, err}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for f.preflight.Load() == 0 { // Open has reserved and is provisioning
		if time.Now().After(deadline) {
			t.Fatal("Open never reached the backend")
		}
		time.Sleep(time.Millisecond)
	}
	if err := c.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.sb != nil {
		t.Fatalf("Open returned a sandbox from a closed client: %v", r.sb)
	}
	wantClass(t, r.err, ErrConfiguration, "")
	var me *model.Error
	if !errors.As(r.err, &me) || me.Message != "the client is closed" {
		t.Fatalf("error: %v", r.err)
	}
	if f.creates.Load() != 1 || f.closes.Load() != 1 {
		t.Fatalf("creates %d, closes %d: the sandbox made meanwhile must be closed", f.creates.Load(), f.closes.Load())
	}
	if _, ok := c.Get("acme", "s-1"); ok {
		t.Fatal("the sandbox is registered on the closed client")
	}
	recs := audit.records(t)
	if last := recs[len(recs)-1]; last["event"] != EventKilled || last["reason"] != "client closed" {
		t.Fatalf("last audit record: %v", last)
	}
}

// The local image is never prepared before the live isolation check: a
// spec whose tier the live backend does not give is refused as such, and
// the image preparation (which would fail here, with no daemon at
// DOCKER_HOST) is never reached.
func TestOpen_IsolationCheckedBeforeImageIsPrepared(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/sandboxio-test.sock")
	tpl := template(t) // docker, runc: CONTAINER, image LocalImage
	spec, sum := tenantSpec(t, tpl, "acme", "s-1")
	f := &fakeBackend{tier: model.TierGVisor} // the live backend disagrees with the spec
	var audit auditBuffer
	c, err := New(t.Context(), Config{Audit: NewAuditLog(&audit, nil), PrepareLocalImage: true, Busybox: "/nonexistent/busybox",
		Progress: func(line string) { t.Errorf("progress before the isolation check: %s", line) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.WithoutCancel(t.Context())) })
	withFake(c, f)
	_, err = c.Open(t.Context(), Request{Spec: spec, SpecSHA256: sum, TenantID: "acme", SessionID: "s-1"})
	wantClass(t, err, ErrConfiguration, "SBX-SPC-005")
	if f.creates.Load() != 0 {
		t.Fatal("a sandbox was created")
	}
}
