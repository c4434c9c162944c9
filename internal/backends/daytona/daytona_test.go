package daytona_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/daytona"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker"
	daytonaserver "github.com/sandboxio/terraform-provider-sandboxio/internal/fakes/daytona"
	backendtest "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/conformance"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

func TestMain(m *testing.M) {
	if os.Getenv(docker.ScopeEnv) == "" {
		_ = os.Setenv(docker.ScopeEnv, fmt.Sprintf("daytona-test-%d", os.Getpid()))
	}
	os.Exit(m.Run())
}

const canaryKey = "dtn_canary_4f1d2c3b5a6978e0_never_printed"

// open starts a server and opens the adapter on it as a user would: the
// key from DAYTONA_API_KEY, the URL from DAYTONA_API_URL.
func open(t testing.TB, minute time.Duration) (*daytonaserver.Server, backends.Backend) {
	t.Helper()
	srv := daytonaserver.NewTestServer(t, canaryKey, minute)
	t.Setenv(daytona.EnvAPIKey, canaryKey)
	t.Setenv(daytona.EnvAPIURL, srv.APIURL())
	b, err := daytona.New(backends.DSN{Scheme: daytona.Name})
	if err != nil {
		t.Fatal(err)
	}
	return srv, b
}

func spec() model.Spec {
	return model.Spec{SpecVersion: model.SpecVersion, Name: "conformance", Backend: "daytona://", Image: daytonaserver.TestSnapshot,
		Network: model.NetworkPolicy{}.Normalized(), Resources: model.DefaultCaps(), TimeoutSeconds: 60, LifetimeSeconds: 180}
}

// The backend conformance suite against the local Daytona server.
func TestConformance(t *testing.T) {
	srv, b := open(t, 0)
	backendtest.Run(t, backendtest.Harness{
		Name: "daytona-server", Backend: b, Spec: spec, Faults: srv, Credential: canaryKey,
		// The vendor's lifetime is the local server's own timer, in this
		// process as a vendor's control plane is out of a sandbox's reach;
		// beneath it, the Docker sandbox's PID 1 is sandboxio's init.
		LifetimeKeeper:    "the local Daytona server's timer for the sandbox's timeout (the vendor's control plane)",
		Init:              ".sandboxio-init",
		Caps:              model.Caps{CPU: 1, MemoryMB: 1024, DiskMB: 1024, Pids: model.DefaultCaps().Pids},
		SecretsInPlainEnv: true,
		Skip: map[backendtest.Behaviour]string{
			backendtest.RunStreams: "Daytona's toolbox returns a command's output as JSON strings: bytes that are not UTF-8 arrive as U+FFFD (the suite sends \\xff through cat)",
			backendtest.UploadB:    "the read-back goes through the same JSON output, so a binary file cannot be compared byte for byte",
		},
		Observe: func(_ context.Context, id string) (backendtest.Observed, error) {
			rec, ok := srv.Observe(id)
			if !ok {
				return backendtest.Observed{}, fmt.Errorf("no record of %s", id)
			}
			return backendtest.Observed{Labels: rec.Labels, PlainEnv: rec.Env,
				Network: &backendtest.ObservedNetwork{Denied: rec.NetworkBlockAll},
				Caps:    &model.Caps{CPU: float64(rec.CPU), MemoryMB: rec.MemoryGB * 1024, DiskMB: rec.DiskGB * 1024}}, nil
		},
	})
}

// Vendor-side lifetime: the lifetime is sent as autoStopInterval (whole
// minutes) with autoDeleteInterval 0, so a sandbox left idle is deleted by
// Daytona even though this process's own deadline is far off. A minute is
// one second on this server.
func TestLifetimeIsVendorIdleLimit(t *testing.T) {
	srv, b := open(t, time.Second)
	s := spec()
	s.LifetimeSeconds = 90 // 2 minutes of idle on the server; 90 s here
	sb, err := b.Create(t.Context(), backends.CreateRequest{Spec: s.ForTenant("acme", "s-1", nil)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sb.Close(t.Context()) }()
	rec, _ := srv.Observe(sb.ID())
	if rec.AutoStopInterval != 2 || rec.AutoDeleteInterval != 0 {
		t.Fatalf("autoStopInterval %d, autoDeleteInterval %d; want 2 and 0", rec.AutoStopInterval, rec.AutoDeleteInterval)
	}
	// Activity keeps it: a run every half minute.
	for range 5 {
		if _, err := sb.Run(t.Context(), []string{"true"}, backends.RunOptions{}); err != nil {
			t.Fatalf("run while active: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(3 * time.Second) // idle past 2 minutes
	_, err = sb.Run(t.Context(), []string{"true"}, backends.RunOptions{})
	var me *model.Error
	if !errors.As(err, &me) || me.Class != model.ErrSandboxGone {
		t.Fatalf("run after the idle limit: %v, want SandboxGone", err)
	}
	if rec, _ := srv.Observe(sb.ID()); rec.Ended != "auto-stop, auto-delete" {
		t.Fatalf("the server ended it as %q", rec.Ended)
	}
}

// Caps above the organization's per-sandbox maximum (Daytona's default: 4
// cores, 8 GB, 10 GB) are refused by Daytona with a 400 naming the limit:
// a ConfigurationError carrying Daytona's message, not a credentials error,
// and nothing is created.
func TestOrgLimitIsConfigurationError(t *testing.T) {
	srv, b := open(t, 0)
	s := spec()
	s.Resources.MemoryMB = 16 * 1024
	_, err := b.Create(t.Context(), backends.CreateRequest{Spec: s.ForTenant("acme", "s-1", nil)})
	var me *model.Error
	if !errors.As(err, &me) || me.Class != model.ErrConfiguration || me.Attribute == "credentials" ||
		!strings.Contains(err.Error(), "exceeds maximum allowed per sandbox") {
		t.Fatalf("memory over the organization's limit: %v", err)
	}
	if n := len(srv.Running()); n != 0 {
		t.Fatalf("%d sandboxes created", n)
	}
}

// sandboxio reap deletes the Daytona sandboxes past their lifetime (the
// expires label), which Daytona's idle limit keeps while they are busy,
// and leaves the others; a dry run deletes nothing.
func TestReapExpired(t *testing.T) {
	srv, b := open(t, 0)
	ctx := t.Context()
	var ids []string
	for i, life := range []int64{60, 3600} {
		s := spec()
		s.LifetimeSeconds = life
		sb, err := b.Create(ctx, backends.CreateRequest{Spec: s.ForTenant("acme", fmt.Sprintf("reap-%d", i), nil)})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = sb.Close(ctx) }()
		ids = append(ids, sb.ID())
	}
	r, ok := b.(backends.Reaper)
	if !ok {
		t.Fatal("the Daytona backend does not implement Reaper, yet registers Lists")
	}
	later := time.Now().Add(10 * time.Minute)
	dry, err := r.Reap(ctx, backends.ReapOptions{DryRun: true, Now: later})
	if err != nil || len(dry) != 1 || dry[0].Info.ID != ids[0] || dry[0].Reason != "expired" || len(srv.Running()) != 2 {
		t.Fatalf("dry run: %+v, %v; running %v", dry, err, srv.Running())
	}
	got, err := r.Reap(ctx, backends.ReapOptions{Now: later})
	if err != nil || len(got) != 1 || got[0].Info.ID != ids[0] {
		t.Fatalf("reap: %+v, %v", got, err)
	}
	if rec, _ := srv.Observe(ids[0]); rec.Ended != "deleted" {
		t.Fatalf("the expired sandbox: %q", rec.Ended)
	}
	if rec, _ := srv.Observe(ids[1]); rec.Ended != "" || rec.Labels["sandboxio.managed"] != "true" {
		t.Fatalf("the live sandbox: %+v", rec)
	}
}
