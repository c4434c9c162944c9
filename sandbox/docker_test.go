package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	dockertest "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/docker"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// These tests run against the real Docker daemon (scripts/docker-up.sh);
// every sandbox they open is closed, and TestMain fails the run if any
// container labelled with this run's id is left.

func sh(t *testing.T, sb *Sandbox, script string) string {
	t.Helper()
	res, err := sb.Run(t.Context(), []string{"sh", "-c", script}, RunOptions{Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("run %q: %v", script, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("run %q: exit %d\nstdout: %s\nstderr: %s", script, res.ExitCode, res.Stdout, res.Stderr)
	}
	return strings.TrimSpace(string(res.Stdout))
}

// closedEventually closes sb and shows its container gone. A close that
// returns nil confirmed the kill, so the container must not run at once; its
// removal may finish after Close returns (Close's contract), so the test
// waits up to 30 s for that. On a host so loaded that the daemon cannot
// confirm the kill within the teardown grace, Close rightly reports the
// sandbox orphaned (OrphanedError, with its labels) and the test waits for
// the removal, as the reaper would, rather than fail on the load.
func closedEventually(t *testing.T, cli *client.Client, sb *Sandbox) error {
	t.Helper()
	err := sb.Close(t.Context())
	var oe *OrphanedError
	if err != nil && !errors.As(err, &oe) {
		t.Fatal(err)
	}
	if err == nil {
		// A close that reported no orphan confirmed the kill: nothing of
		// the sandbox runs any more, though the removal of the stopped
		// container may finish after Close returned.
		notRunning(t, cli, sb.ID())
	} else {
		t.Logf("close not confirmed within the grace on this host: %v", err)
	}
	goneEventually(t, cli, sb.ID())
	return err
}

// notRunning fails the test unless the container is gone or stopped now.
func notRunning(t *testing.T, cli *client.Client, id string) {
	t.Helper()
	ins, err := cli.ContainerInspect(t.Context(), id)
	if cerrdefs.IsNotFound(err) {
		return
	}
	if err != nil {
		t.Fatalf("container %s: %v", shortID(id), err)
	}
	if ins.State != nil && (ins.State.Running || ins.State.Paused || ins.State.Restarting) {
		t.Fatalf("container %s still runs after a close that confirmed the kill (%s)", shortID(id), ins.State.Status)
	}
}

// closeEvent is the audit event a close that returned err records: an
// orphan report is audited as orphaned, a confirmed removal as killed.
func closeEvent(err error) string {
	if err != nil {
		return EventOrphaned
	}
	return EventKilled
}

// goneEventually waits up to 30 s for a closed sandbox's container to be
// gone: the removal a close started goes on past the teardown grace.
func goneEventually(t *testing.T, cli *client.Client, id string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, ierr := cli.ContainerInspect(t.Context(), id)
		if cerrdefs.IsNotFound(ierr) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %s is still there 30 s after the close (%v)", shortID(id), ierr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func countLabelled(t *testing.T, cli *client.Client, label string) int {
	t.Helper()
	cs, err := cli.ContainerList(t.Context(), container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", label))})
	if err != nil {
		t.Fatal(err)
	}
	return len(cs)
}

// The whole path on a real daemon: open from a per-tenant spec and its
// digest, run, run code, upload, close; labels on the container; the secret
// inside the sandbox and nowhere else; one audit line per event.
func TestDocker_OpenRunUploadClose(t *testing.T) {
	cli := needDocker(t)
	t.Parallel()
	tpl := template(t, withSecretNames("OPENAI_API_KEY"), func(x *inputs.Template) { x.Labels["team"] = "agents" })
	spec, sum := tenantSpec(t, tpl, "acme", "s-42")
	c, audit := newClient(t)
	sb, err := c.Open(t.Context(), Request{Spec: spec, SpecSHA256: sum, TenantID: "acme", SessionID: "s-42",
		Secrets: NewSecrets(map[string]string{"OPENAI_API_KEY": canary})})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = sb.Close(context.WithoutCancel(t.Context()))
		}
	})

	ins, err := cli.ContainerInspect(t.Context(), sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{model.LabelTenantID: "acme", model.LabelSessionID: "s-42", model.LabelTemplate: "unit",
		model.LabelManaged: "true", "team": "agents", "test_run": runID} {
		if ins.Config.Labels[k] != v {
			t.Errorf("docker label %s = %q, want %q", k, ins.Config.Labels[k], v)
		}
	}
	if ins.HostConfig.NetworkMode != "none" {
		t.Errorf("network mode %s", ins.HostConfig.NetworkMode)
	}
	if strings.Contains(fmt.Sprint(ins.Config.Env, ins.Config.Labels, ins.Config.Cmd, ins.Config.Entrypoint), canary) {
		t.Errorf("the secret is in the container's configuration")
	}

	if res, err := sb.Run(t.Context(), []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, RunOptions{}); err != nil ||
		res.ExitCode != 3 || string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" {
		t.Fatalf("exit code: %+v %v", res, err)
	}
	want := sha256.Sum256([]byte(canary))
	if got := sh(t, sb, `printf %s "$OPENAI_API_KEY" | sha256sum`); !strings.HasPrefix(got, hex.EncodeToString(want[:])) {
		t.Fatalf("the secret inside the sandbox hashes to %s", got)
	}
	if got := sh(t, sb, `test "$OPENAI_API_KEY" = "`+canary+`" && echo present`); got != "present" {
		t.Fatalf("secret: %q", got)
	}
	if got := sh(t, sb, `echo "key=$OPENAI_API_KEY"`); got != "key=[REDACTED]" {
		t.Fatalf("echoed secret: %q", got)
	}
	if got := sh(t, sb, `echo "$LANG"`); got != "C.UTF-8" {
		t.Fatalf("env: %q", got)
	}
	res, err := sb.RunCode(t.Context(), "sh", "echo code ran\nexit 4\n", RunOptions{})
	if err != nil || res.ExitCode != 4 || string(res.Stdout) != "code ran\n" {
		t.Fatalf("run code: %+v %v", res, err)
	}
	if err := sb.Upload(t.Context(), "/work/data/in.txt", []byte("uploaded\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, sb, "cat /work/data/in.txt; stat -c %a /work/data/in.txt"); got != "uploaded\n600" {
		t.Fatalf("upload: %q", got)
	}
	err = sb.Upload(t.Context(), "/etc/"+canary+"/x", []byte("x"), 0)
	if err == nil || strings.Contains(err.Error(), canary) {
		t.Fatalf("upload to a read-only path: %v", err)
	}

	closeErr := closedEventually(t, cli, sb)
	closed = true
	if err := sb.Close(t.Context()); err != closeErr { //nolint:errorlint // the very same error value
		t.Fatalf("second close: %v, the first returned %v", err, closeErr)
	}
	if _, err := sb.Run(t.Context(), []string{"true"}, RunOptions{}); !errors.Is(err, ErrSandboxGone) {
		t.Fatalf("run after close: %v", err)
	}

	text := audit.String()
	if strings.Contains(text, canary) {
		t.Fatalf("the audit log holds the secret:\n%s", text)
	}
	recs := audit.records(t)
	got := strings.Join(events(recs), " ")
	if got != "created/open exec/run exec/run exec/run exec/run exec/run exec/run_code exec/upload exec/run failed/upload "+closeEvent(closeErr)+"/close gone/run" {
		t.Fatalf("events: %s\n%s", got, text)
	}
	created := recs[0]
	if created["sandbox_id"] != sb.ID() || created["tier"] != "CONTAINER" || created["tenant_id"] != "acme" || created["session_id"] != "s-42" ||
		created["blocked_egress"] != float64(0) || created["spec_sha256"] != sum || created["exit_code"] != nil {
		t.Fatalf("created record: %v", created)
	}
	if n := created["network"].(map[string]any); n["egress"] != "deny" {
		t.Fatalf("network: %v", n)
	}
	if d := fmt.Sprint(created["disk_cap_strategy"]); !strings.HasPrefix(d, "tmpfs") && !strings.HasPrefix(d, "storage-opt") {
		t.Fatalf("disk cap strategy: %s", d)
	}
	if caps := created["caps"].(map[string]any); caps["memory_mb"] != float64(512) || caps["pids"] != float64(256) {
		t.Fatalf("caps: %v", caps)
	}
	if to := created["timeouts"].(map[string]any); to["call_seconds"] != float64(60) || to["lifetime_seconds"] != float64(180) {
		t.Fatalf("timeouts: %v", to)
	}
	if recs[1]["exit_code"] != float64(3) || !strings.Contains(text, `"command":["sh","-c","test \"$OPENAI_API_KEY\" = \"[REDACTED]\" && echo present"]`) {
		t.Fatalf("exec records:\n%s", text)
	}
}

// Each class of failure surfaces typed, with the limit named, and is audited
// under its event.
func TestDocker_TypedErrors(t *testing.T) {
	needDocker(t)
	t.Parallel()
	disk := int64(64)
	tpl := template(t, func(x *inputs.Template) { x.Caps.DiskMB = &disk })
	spec, sum := tenantSpec(t, tpl, "acme", "typed")
	c, audit := newClient(t)
	err := c.With(t.Context(), Request{Spec: spec, SpecSHA256: sum, TenantID: "acme", SessionID: "typed"},
		func(ctx context.Context, sb *Sandbox) error {
			start := time.Now()
			_, err := sb.Run(ctx, []string{"sleep", "30"}, RunOptions{Timeout: time.Second})
			wantClass(t, err, ErrExecutionTimeout, "")
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("the timeout took %s", d)
			}
			_, err = sb.Run(ctx, []string{"sh", "-c", "dd if=/dev/zero of=/tmp/fill bs=1M count=200"}, RunOptions{})
			wantClass(t, err, ErrResourceLimitExceeded, "")
			if l, ok := LimitOf(err); !ok || l != model.LimitDisk {
				t.Errorf("limit: %q %v (%v)", l, ok, err)
			}
			var me *Error
			if !errors.As(err, &me) || me.Limit != model.LimitDisk {
				t.Errorf("errors.As: %v", err)
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(events(audit.records(t)), " ")
	if got != "created/open timeout/run limit_exceeded/run killed/close" {
		t.Fatalf("events: %s\n%s", got, audit)
	}
	if !strings.Contains(audit.String(), `"limit":"disk"`) || !strings.Contains(audit.String(), `"error_class":"ExecutionTimeout"`) {
		t.Fatalf("audit:\n%s", audit)
	}
}

// A sandbox whose lifetime ends while in use is SandboxGone, audited as
// expired.
func TestDocker_LifetimeExpiredIsSandboxGone(t *testing.T) {
	needDocker(t)
	t.Parallel()
	// The open is bounded by timeout_seconds too, which cannot exceed the
	// lifetime: the lifetime leaves room for a create on a daemon kept busy
	// by parallel tests (the pool's fifty concurrent claims).
	short := int64(20)
	tpl := template(t, func(x *inputs.Template) { x.TimeoutSeconds = &short; x.LifetimeSeconds = &short })
	spec, _ := tenantSpec(t, tpl, "acme", "expiring")
	c, audit := newClient(t)
	err := c.With(t.Context(), Request{Spec: spec, TenantID: "acme", SessionID: "expiring"}, func(ctx context.Context, sb *Sandbox) error {
		// The call inherits timeout_seconds, which cannot exceed the
		// lifetime, and starts after it: the lifetime ends first.
		_, err := sb.Run(ctx, []string{"sleep", "30"}, RunOptions{})
		wantClass(t, err, ErrSandboxGone, "")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(events(audit.records(t)), " "); got != "created/open expired/run killed/close" {
		t.Fatalf("events: %s", got)
	}
}

// Refused on a live daemon: nothing carrying the test's label exists.
func TestDocker_RefusalProvisionsNothing(t *testing.T) {
	cli := needDocker(t)
	t.Parallel()
	tpl := template(t, func(x *inputs.Template) { x.Runtime = "runsc"; x.RequireIsolation = "MICROVM" })
	spec, _ := tenantSpec(t, tpl, "acme", "refused")
	c, audit := newClient(t)
	_, err := c.Open(t.Context(), Request{Spec: spec, TenantID: "acme", SessionID: "refused"})
	wantClass(t, err, ErrConfiguration, "SBX-ISO-003")
	ok, _ := tenantSpec(t, template(t), "acme", "refused")
	_, err = c.Open(t.Context(), Request{Spec: []byte(strings.Replace(string(ok), `"cpu":1`, `"cpu":64`, 1)),
		SpecSHA256: strings.Repeat("0", 64), TenantID: "acme", SessionID: "refused"})
	wantClass(t, err, ErrConfiguration, "SBX-SPC-003")
	if n := countLabelled(t, cli, "test="+labelSafe(t.Name())); n != 0 {
		t.Fatalf("%d containers exist after refusals", n)
	}
	if got := strings.Join(events(audit.records(t)), " "); got != "refused/open refused/open" {
		t.Fatalf("events: %s", got)
	}
}

// Cancelling the context of With removes the sandbox at once, while a
// command is still running in it: With returns within the teardown grace
// of the cancel (how long the open took on a loaded host is not counted),
// and the container is gone when it returns, unless the close reported it
// orphaned (a daemon too busy to confirm the kill within the grace): then
// the removal the close started finishes it.
func TestDocker_WithCancellationRemovesTheSandbox(t *testing.T) {
	cli := needDocker(t)
	t.Parallel()
	spec, _ := tenantSpec(t, template(t), "acme", "cancelled")
	c, _ := newClient(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var id string
	started := make(chan time.Time, 1)
	cancelled := make(chan time.Time, 1)
	go func() {
		<-started
		time.Sleep(300 * time.Millisecond)
		cancelled <- time.Now()
		cancel()
	}()
	start := time.Now()
	var runReturned time.Time
	err := c.With(ctx, Request{Spec: spec, TenantID: "acme", SessionID: "cancelled"}, func(ctx context.Context, sb *Sandbox) error {
		id = sb.ID()
		started <- time.Now()
		_, err := sb.Run(ctx, []string{"sleep", "60"}, RunOptions{})
		runReturned = time.Now()
		return err
	})
	returned := time.Now()
	if !errors.Is(err, context.Canceled) && ClassOf(err) != ErrSandboxGone {
		t.Fatalf("want cancellation, got %v", err)
	}
	var at time.Time
	select {
	case at = <-cancelled:
	default:
		t.Fatalf("With returned (%v) before the context was cancelled", err)
	}
	t.Logf("open %s; after the cancel: Run returned in %s, With in %s", (at.Sub(start) - 300*time.Millisecond).Round(time.Millisecond),
		runReturned.Sub(at).Round(time.Millisecond), returned.Sub(at).Round(time.Millisecond))
	// The grace bounds the close; the slack covers the command's own
	// clean-up and a busy scheduler, not another grace.
	if d := returned.Sub(at); d > model.TeardownGrace+3*time.Second {
		t.Fatalf("With returned %s after the cancel (teardown grace %s)", d, model.TeardownGrace)
	}
	// A close that reported no orphan confirmed the kill: nothing of the
	// sandbox runs now. The removal may finish after it, either way.
	var oe *OrphanedError
	if errors.As(err, &oe) {
		t.Logf("close not confirmed within the grace on this host: %v", oe)
	} else {
		notRunning(t, cli, id)
	}
	goneEventually(t, cli, id)
}

// Fifty tenants opened at once on this machine all succeed, each sandbox
// labelled with its own tenant and session and holding only its own files;
// racing opens for a pair already open are refused.
func TestDocker_FiftyTenantsConcurrently(t *testing.T) {
	cli := needDocker(t)
	const n = 50
	tpl := template(t)
	c, audit := newClient(t)
	type opened struct {
		tenant string
		sb     *Sandbox
		err    error
		dur    time.Duration
	}
	results := make([]opened, n)
	var wg sync.WaitGroup
	var raceWins, raceRefused sync.Map
	start := time.Now()
	for i := range n {
		tenant := fmt.Sprintf("tenant-%02d", i)
		spec, sum := tenantSpec(t, tpl, tenant, "load")
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := time.Now()
			sb, err := c.Open(context.WithoutCancel(t.Context()), Request{Spec: spec, SpecSHA256: sum, TenantID: tenant, SessionID: "load"})
			results[i] = opened{tenant: tenant, sb: sb, err: err, dur: time.Since(s)}
		}()
		if i%10 == 0 {
			// A second open racing for the same tenant and session.
			wg.Add(1)
			go func() {
				defer wg.Done()
				sb, err := c.Open(context.WithoutCancel(t.Context()), Request{Spec: spec, SpecSHA256: sum, TenantID: tenant, SessionID: "load"})
				if err == nil {
					raceWins.Store(tenant, sb)
				} else {
					raceRefused.Store(tenant, err)
				}
			}()
		}
	}
	wg.Wait()
	openAll := time.Since(start)
	t.Cleanup(func() { _ = c.Close(context.WithoutCancel(t.Context())) })

	ids := map[string]string{}
	var durs []time.Duration
	for _, r := range results {
		var sb *Sandbox
		switch {
		case r.err == nil:
			sb = r.sb
		case strings.Contains(r.err.Error(), "already open"):
			// The racing open won for this tenant.
			v, ok := raceWins.Load(r.tenant)
			if !ok {
				t.Fatalf("%s: refused as already open, but no open won: %v", r.tenant, r.err)
			}
			sb = v.(*Sandbox)
		default:
			t.Fatalf("%s: %v", r.tenant, r.err)
		}
		durs = append(durs, r.dur)
		if other, dup := ids[sb.ID()]; dup {
			t.Fatalf("%s and %s share sandbox %s", r.tenant, other, sb.ID())
		}
		ids[sb.ID()] = r.tenant
		got, ok := c.Get(r.tenant, "load")
		if !ok || got != sb {
			t.Fatalf("Get(%s) did not return its sandbox", r.tenant)
		}
		ins, err := cli.ContainerInspect(t.Context(), sb.ID())
		if err != nil {
			t.Fatal(err)
		}
		if ins.Config.Labels[model.LabelTenantID] != r.tenant || ins.Config.Labels[model.LabelSessionID] != "load" {
			t.Fatalf("%s: container labels %v", r.tenant, ins.Config.Labels)
		}
	}
	for i := 0; i < n; i += 10 {
		tenant := fmt.Sprintf("tenant-%02d", i)
		_, won := raceWins.Load(tenant)
		_, refused := raceRefused.Load(tenant)
		if won == refused {
			t.Fatalf("%s: racing open won=%v refused=%v; exactly one of the two opens must win", tenant, won, refused)
		}
	}
	if len(ids) != n {
		t.Fatalf("%d distinct sandboxes for %d tenants", len(ids), n)
	}

	// Each sandbox sees only what its own tenant wrote.
	var errs sync.Map
	for id, tenant := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sb, _ := c.Get(tenant, "load")
			res, err := sb.Run(context.WithoutCancel(t.Context()), []string{"sh", "-c", `ls /work; echo "$1" > /work/owner; cat /work/owner`, "sh", tenant}, RunOptions{})
			if err != nil || res.ExitCode != 0 || string(res.Stdout) != tenant+"\n" {
				errs.Store(id, fmt.Sprintf("%s: %+v %v", tenant, res, err))
			}
		}()
	}
	wg.Wait()
	errs.Range(func(_, v any) bool { t.Error(v); return true })

	start = time.Now()
	if err := c.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	closeAll := time.Since(start)
	if k := dockertest.Left(t, "test="+labelSafe(t.Name())); k != 0 {
		t.Fatalf("%d containers left after close", k)
	}
	created := strings.Count(audit.String(), `"event":"created"`)
	killed := strings.Count(audit.String(), `"event":"killed"`)
	if created != n || killed != n {
		t.Fatalf("audit: %d created, %d killed", created, killed)
	}
	t.Logf("%d tenants opened concurrently in %s (%.1f sandboxes/s; median open %s), closed in %s",
		n, openAll.Round(time.Millisecond), float64(n)/openAll.Seconds(), medianOf(durs).Round(time.Millisecond), closeAll.Round(time.Millisecond))
}

func medianOf(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[len(s)/2]
}
