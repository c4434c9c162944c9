package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// poolClient returns a client keeping a warm pool of the template, its
// audit buffer, and the template spec and digest to open with.
func poolClient(t testing.TB, tpl model.Spec, size int, idle time.Duration) (*Client, *auditBuffer, []byte, string) {
	t.Helper()
	spec, sum := canonical(t, tpl)
	var audit auditBuffer
	c, err := New(t.Context(), Config{
		Audit:     NewAuditLog(&audit, nil),
		OnWarning: func(w model.Warning) { t.Logf("warning: %s", w) },
		Pools:     []PoolConfig{{Spec: spec, SpecSHA256: sum, Size: size, MaxIdle: idle}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.WithoutCancel(t.Context())) })
	return c, &audit, spec, sum
}

// waitReady waits until the client's pool holds n warm sandboxes and
// creates none.
func waitReady(t testing.TB, c *Client, n int) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		st := c.PoolStats()[0]
		if st.Ready >= n && st.Creating == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool not ready: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// openRecord is the created/open audit record of a sandbox.
func openRecord(t testing.TB, a *auditBuffer, id string) map[string]any {
	t.Helper()
	for _, r := range a.records(t) {
		if r["event"] == EventCreated && r["op"] == "open" && r["sandbox_id"] == id {
			return r
		}
	}
	t.Fatalf("no created record for %s:\n%s", shortID(id), a.String())
	return nil
}

// A claimed sandbox is bound to its tenant and session as the daemon shows
// it: created before the open (it was warm), named for the session (a cold
// open of the session from another client is refused by the daemon), found
// by a list by tenant; its secret reaches it; the lifetime counts from the
// claim; the audit record says pool with the claim's latency. Closed, it is
// gone, and the pool has refilled with another.
func TestPoolClaimBindsTenantAndRelease(t *testing.T) {
	cli := needDocker(t)
	t.Parallel()
	tpl := template(t, withSecretNames("OPENAI_API_KEY"))
	c, audit, spec, sum := poolClient(t, tpl, 2, time.Minute)
	waitReady(t, c, 2)
	ctx := context.WithoutCancel(t.Context())
	before := time.Now()
	sb, err := c.Open(ctx, Request{Spec: spec, SpecSHA256: sum, TenantID: "acme", SessionID: "s-pool",
		Secrets: NewSecrets(map[string]string{"OPENAI_API_KEY": canary})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close(ctx) })
	ins, err := cli.ContainerInspect(ctx, sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	created, _ := time.Parse(time.RFC3339Nano, ins.Created)
	if !created.Before(before) {
		t.Fatalf("the sandbox was created at %s, after the open began (%s): not from the pool", created, before)
	}
	if ins.Config.Labels["sandboxio.pool"] != "warm" || !strings.HasPrefix(ins.Name, "/sandboxio-s-") {
		t.Fatalf("claimed container: name %s labels %v", ins.Name, ins.Config.Labels)
	}
	if strings.Contains(strings.Join(ins.Config.Env, " "), canary) {
		t.Fatal("the secret is in the container's environment")
	}
	if out := sh(t, sb, `[ "$OPENAI_API_KEY" = '`+canary+`' ] && echo yes`); out != "yes" {
		t.Fatalf("the secret did not reach the claimed sandbox: %q", out)
	}
	if in := sb.Info(); in.TenantID != "acme" || in.Labels[model.LabelTenantID] != "acme" ||
		in.Expires.Before(before.Add(180*time.Second)) || in.Expires.After(time.Now().Add(181*time.Second)) {
		t.Fatalf("info: %+v", in)
	}

	// Another client (no pool) cannot open the same session: the daemon
	// holds the name the claim gave the container.
	other, _ := newClient(t)
	_, err = other.Open(ctx, Request{Spec: spec, SpecSHA256: sum, TenantID: "acme", SessionID: "s-pool",
		Secrets: NewSecrets(map[string]string{"OPENAI_API_KEY": canary})})
	wantClass(t, err, model.ErrConfiguration, rules.OneSandbox)
	if !strings.Contains(err.Error(), shortID(sb.ID())) {
		t.Fatalf("the refusal does not name the claimed sandbox: %v", err)
	}

	// A list by tenant finds it, with the binding.
	b, err := docker.New()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	infos, err := b.List(ctx, map[string]string{model.LabelTenantID: "acme", model.LabelSessionID: "s-pool", "test_run": runID})
	if err != nil || len(infos) != 1 || infos[0].ID != sb.ID() {
		t.Fatalf("list by tenant: %v %v", infos, err)
	}

	r := openRecord(t, audit, sb.ID())
	if r["source"] != SourcePool || r["tenant_id"] != "acme" || r["session_id"] != "s-pool" {
		t.Fatalf("open record: %v", r)
	}
	if ms, ok := r["claim_ms"].(float64); !ok || ms <= 0 {
		t.Fatalf("open record without claim latency: %v", r)
	}
	if strings.Contains(audit.String(), canary) {
		t.Fatal("the secret is in the audit log")
	}

	_ = closedEventually(t, cli, sb)
	waitReady(t, c, 2)
	for _, st := range c.PoolStats() {
		if st.Claimed != 1 {
			t.Fatalf("stats: %+v", st)
		}
	}
}

// Fifty tenants open at once from one client with a pool of four: each gets
// a sandbox of its own (no id twice, each named for its own session on the
// daemon, each sees only its own file), some from the pool and the rest
// cold, never an error for an empty pool. Everything is gone after Close.
func TestPoolFiftyConcurrentClaimsNeverShare(t *testing.T) {
	cli := needDocker(t)
	t.Parallel()
	// Fifty opens at once on a busy host (46 of them cold, queued for the
	// daemon): the open's bound is generous, as this tests isolation, not
	// the host's speed.
	tpl := template(t, func(x *inputs.Template) {
		timeout, lifetime := int64(600), int64(900)
		x.TimeoutSeconds, x.LifetimeSeconds = &timeout, &lifetime
	})
	c, audit, spec, sum := poolClient(t, tpl, 4, time.Minute)
	waitReady(t, c, 4)
	ctx := context.WithoutCancel(t.Context())
	const n = 50
	sbs := make([]*Sandbox, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sbs[i], errs[i] = c.Open(ctx, Request{Spec: spec, SpecSHA256: sum, TenantID: fmt.Sprintf("t%02d", i), SessionID: "s"})
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, sb := range sbs {
			if sb != nil {
				_ = sb.Close(ctx)
			}
		}
	})
	seen := map[string]int{}
	names := map[string]int{}
	for i, sb := range sbs {
		if errs[i] != nil {
			t.Fatalf("tenant %d: %v", i, errs[i])
		}
		if j, ok := seen[sb.ID()]; ok {
			t.Fatalf("tenants %d and %d got the same sandbox %s", j, i, shortID(sb.ID()))
		}
		seen[sb.ID()] = i
		ins, err := cli.ContainerInspect(ctx, sb.ID())
		if err != nil {
			t.Fatal(err)
		}
		if j, ok := names[ins.Name]; ok {
			t.Fatalf("tenants %d and %d have containers of the same name %s", j, i, ins.Name)
		}
		names[ins.Name] = i
	}
	// Each writes its tenant into a file and reads back only its own.
	for i, sb := range sbs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := sb.Run(ctx, []string{"sh", "-c", fmt.Sprintf("[ ! -e /tmp/owner ] && echo t%02d > /tmp/owner && cat /tmp/owner", i)}, RunOptions{})
			if err == nil && (res.ExitCode != 0 || strings.TrimSpace(string(res.Stdout)) != fmt.Sprintf("t%02d", i)) {
				err = fmt.Errorf("exit %d, stdout %q", res.ExitCode, res.Stdout)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("tenant %d's sandbox was not its own: %v", i, err)
		}
	}
	pooled, cold := 0, 0
	for _, sb := range sbs {
		switch openRecord(t, audit, sb.ID())["source"] {
		case SourcePool:
			pooled++
		case SourceCold:
			cold++
		}
	}
	t.Logf("%d from the pool, %d cold", pooled, cold)
	if pooled == 0 || cold == 0 || pooled+cold != n {
		t.Fatalf("%d from the pool, %d cold, want both and %d in all", pooled, cold, n)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, sb := range sbs {
		notRunning(t, cli, sb.ID())
	}
	waitNoneLabelled(t, cli, "test="+labelSafe(t.Name()), 30*time.Second)
}

// waitNoneLabelled waits until no container carries the label.
func waitNoneLabelled(t *testing.T, cli *client.Client, label string, d time.Duration) {
	t.Helper()
	waitLabelledCount(t, cli, label, 0, d)
}

// waitLabelledCount waits until n containers carry the label.
func waitLabelledCount(t *testing.T, cli *client.Client, label string, n int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		got := countLabelled(t, cli, label)
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d containers labelled %s after %s, want %d", got, label, d, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Close drains the pool: every warm sandbox, those being created included,
// is removed.
func TestPoolDrainedOnClose(t *testing.T) {
	cli := needDocker(t)
	t.Parallel()
	c, _, _, _ := poolClient(t, template(t), 3, time.Minute)
	waitReady(t, c, 1)
	label := "test=" + labelSafe(t.Name())
	if countLabelled(t, cli, label) == 0 {
		t.Fatal("no warm sandbox on the daemon")
	}
	if err := c.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitNoneLabelled(t, cli, label, 30*time.Second)
}

// A warm sandbox whose kill the daemon cannot confirm within the teardown
// grace (here its runtime shim is frozen with SIGSTOP, so the kill hangs
// between the daemon and the container) is reported by the drain as a
// closed sandbox would be: Close returns an *OrphanedError naming it with
// its labels, the warning reaches OnWarning, and the audit log records it
// orphaned. Nothing is claimed done that was not.
func TestPoolDrainReportsAnUnconfirmedKill(t *testing.T) {
	cli := needDocker(t)
	t.Parallel()
	spec, sum := canonical(t, template(t))
	var audit auditBuffer
	var mu sync.Mutex
	var warnings []model.Warning
	c, err := New(t.Context(), Config{
		Audit: NewAuditLog(&audit, nil),
		OnWarning: func(w model.Warning) {
			mu.Lock()
			defer mu.Unlock()
			warnings = append(warnings, w)
		},
		Pools: []PoolConfig{{Spec: spec, SpecSHA256: sum, Size: 1, MaxIdle: time.Minute}},
	})
	if err != nil {
		t.Fatal(err)
	}
	waitReady(t, c, 1)
	ctx := t.Context()
	label := "test=" + labelSafe(t.Name())
	cs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", label))})
	if err != nil || len(cs) != 1 {
		t.Fatalf("warm sandboxes: %d (%v)", len(cs), err)
	}
	id := cs[0].ID
	initPID, shim := freezeShim(t, cli, id)

	start := time.Now()
	err = c.Close(ctx)
	if d := time.Since(start); d > model.TeardownGrace+3*time.Second {
		t.Errorf("Close returned %s after it began (teardown grace %s)", d, model.TeardownGrace)
	}
	var oe *OrphanedError
	if !errors.As(err, &oe) {
		t.Fatalf("Close: %v, want an *OrphanedError", err)
	}
	if oe.Warning.Class != model.OrphanedSandboxWarning || oe.Warning.SandboxID != id || oe.Warning.Labels[model.LabelManaged] != "true" {
		t.Fatalf("warning: %+v", oe.Warning)
	}
	mu.Lock()
	got := len(warnings)
	mu.Unlock()
	if got != 1 {
		t.Errorf("OnWarning got %d warnings, want the orphan's", got)
	}
	orphaned := 0
	for _, r := range audit.records(t) {
		if r["event"] == EventOrphaned && r["op"] == "discard" && r["sandbox_id"] == id && r["source"] == SourcePool {
			orphaned++
		}
	}
	if orphaned != 1 {
		t.Fatalf("%d orphaned discard records for %s, want 1:\n%s", orphaned, shortID(id), audit.String())
	}
	// It was indeed not ended: its init still runs (the host's /proc says;
	// the daemon, its kill of the container hanging, would not answer an
	// inspect). Thawed, the kill the drain sent lands and the daemon's
	// AutoRemove removes it.
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", initPID)); err != nil {
		t.Fatalf("the warm sandbox reported orphaned has ended: %v", err)
	}
	_ = syscall.Kill(shim, syscall.SIGCONT)
	goneEventually(t, cli, id)
}

// freezeShim stops (SIGSTOP) the runtime shim of a container, the parent of
// its init, until the test ends: the daemon then cannot reach the container.
// It returns the pids of the container's init and of the shim.
func freezeShim(t *testing.T, cli *client.Client, id string) (initPID, shim int) {
	t.Helper()
	ins, err := cli.ContainerInspect(t.Context(), id)
	if err != nil || ins.State == nil || ins.State.Pid == 0 {
		t.Fatalf("container %s: %v", shortID(id), err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", ins.State.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			shim, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", shim))
	if !strings.HasPrefix(string(comm), "containerd-shim") {
		t.Fatalf("the parent of the container's init is %d %q, not a containerd shim", shim, comm)
	}
	if err := syscall.Kill(shim, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(shim, syscall.SIGCONT)
		_ = cli.ContainerRemove(context.WithoutCancel(t.Context()), id, container.RemoveOptions{Force: true})
	})
	return ins.State.Pid, shim
}

// A warm sandbox changed on the daemon after it was created (here its
// process ceiling raised with `docker update`) is refused at the claim,
// audited and removed; the open goes cold.
func TestPoolTamperedEntryRefused(t *testing.T) {
	cli := needDocker(t)
	t.Parallel()
	c, audit, spec, sum := poolClient(t, template(t), 1, time.Minute)
	waitReady(t, c, 1)
	ctx := context.WithoutCancel(t.Context())
	cs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", "test="+labelSafe(t.Name())))})
	if err != nil || len(cs) != 1 {
		t.Fatalf("warm sandboxes: %d (%v)", len(cs), err)
	}
	warmID := cs[0].ID
	pids := int64(100000)
	if _, err := cli.ContainerUpdate(ctx, warmID, container.UpdateConfig{Resources: container.Resources{PidsLimit: &pids}}); err != nil {
		t.Fatal(err)
	}
	sb, err := c.Open(ctx, Request{Spec: spec, SpecSHA256: sum, TenantID: "acme", SessionID: "s-tamper"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close(ctx) })
	if sb.ID() == warmID {
		t.Fatal("the tampered warm sandbox was handed out")
	}
	if r := openRecord(t, audit, sb.ID()); r["source"] != SourceCold {
		t.Fatalf("open record: %v", r)
	}
	refused := false
	for _, r := range audit.records(t) {
		if r["event"] == EventRefused && r["op"] == "claim" && r["sandbox_id"] == warmID {
			refused = true
			t.Logf("refused: %v", r["error"])
		}
	}
	if !refused {
		t.Fatalf("no refused claim record:\n%s", audit.String())
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := cli.ContainerInspect(ctx, warmID); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the tampered warm sandbox is still there")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A spec the pool cannot take is refused when the client is made, before
// anything is created: a per-tenant spec, no size.
func TestPoolConfigRefused(t *testing.T) {
	tpl := template(t)
	perTenant, _ := tenantSpec(t, tpl, "acme", "s-1")
	spec, _ := canonical(t, tpl)
	for name, pc := range map[string]PoolConfig{
		"per-tenant spec": {Spec: perTenant, Size: 1, MaxIdle: time.Minute},
		"no size":         {Spec: spec, MaxIdle: time.Minute},
		"short idle":      {Spec: spec, Size: 1, MaxIdle: time.Second},
		"too big":         {Spec: spec, Size: 65, MaxIdle: time.Minute},
	} {
		_, err := New(t.Context(), Config{Pools: []PoolConfig{pc}})
		if ClassOf(err) != model.ErrConfiguration {
			t.Errorf("%s: %v", name, err)
		}
	}
}
