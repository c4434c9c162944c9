package modal_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	backendtest "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/conformance"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// TestLiveModal opens, runs and closes a sandbox on the real Modal, for a
// user who wants to verify their own account: SANDBOXIO_LIVE_MODAL=1 with
// MODAL_TOKEN_ID, MODAL_TOKEN_SECRET and SANDBOXIO_LIVE_MODAL_APP (an app of
// the workspace; SANDBOXIO_LIVE_MODAL_IMAGE, default python:3.12-slim).
func TestLiveModal(t *testing.T) {
	if os.Getenv("SANDBOXIO_LIVE_MODAL") != "1" {
		t.Skip("SKIP: live Modal test off; set SANDBOXIO_LIVE_MODAL=1 with MODAL_TOKEN_ID, MODAL_TOKEN_SECRET and SANDBOXIO_LIVE_MODAL_APP to run it against your account")
	}
	app := os.Getenv("SANDBOXIO_LIVE_MODAL_APP")
	if app == "" || os.Getenv("MODAL_TOKEN_ID") == "" || os.Getenv("MODAL_TOKEN_SECRET") == "" {
		t.Fatal("SANDBOXIO_LIVE_MODAL=1 needs SANDBOXIO_LIVE_MODAL_APP, MODAL_TOKEN_ID and MODAL_TOKEN_SECRET")
	}
	image := os.Getenv("SANDBOXIO_LIVE_MODAL_IMAGE")
	if image == "" {
		image = "python:3.12-slim"
	}
	b := openBackend(t, "modal://"+app)
	sb := create(t, b, backends.CreateRequest{Spec: spec(func(s *model.Spec) { s.Backend, s.Image = "modal://"+app, image })})
	res, err := sb.Run(t.Context(), []string{"sh", "-c", "echo live; echo err >&2; exit 3"}, backends.RunOptions{})
	if err != nil || res.ExitCode != 3 || strings.TrimSpace(string(res.Stdout)) != "live" || strings.TrimSpace(string(res.Stderr)) != "err" {
		t.Fatalf("run: %v %+v", err, res)
	}
	if _, err := sb.Run(t.Context(), []string{"sleep", "30"}, backends.RunOptions{Timeout: 2e9}); !strings.Contains(err.Error(), string(model.ErrExecutionTimeout)) {
		t.Fatalf("timeout: %v", err)
	}
}

// TestLiveModalConformance runs the backend conformance suite against the
// real Modal with the same variables as TestLiveModal: every behaviour but
// the fault injection (which needs the local server), one at a time.
func TestLiveModalConformance(t *testing.T) {
	if os.Getenv("SANDBOXIO_LIVE_MODAL") != "1" {
		t.Skip("SKIP: live Modal test off; set SANDBOXIO_LIVE_MODAL=1 with MODAL_TOKEN_ID, MODAL_TOKEN_SECRET and SANDBOXIO_LIVE_MODAL_APP to run it against your account")
	}
	app := os.Getenv("SANDBOXIO_LIVE_MODAL_APP")
	if app == "" || os.Getenv("MODAL_TOKEN_ID") == "" || os.Getenv("MODAL_TOKEN_SECRET") == "" {
		t.Fatal("SANDBOXIO_LIVE_MODAL=1 needs SANDBOXIO_LIVE_MODAL_APP, MODAL_TOKEN_ID and MODAL_TOKEN_SECRET")
	}
	image := os.Getenv("SANDBOXIO_LIVE_MODAL_IMAGE")
	if image == "" {
		image = "python:3.12-slim"
	}
	b := openBackend(t, "modal://"+app)
	backendtest.Run(t, backendtest.Harness{
		LifetimeKeeper: "Modal's control plane",
		Name:           "modal-live",
		Backend:        b,
		Spec: func() model.Spec {
			return model.Spec{SpecVersion: model.SpecVersion, Name: "conformance", Backend: "modal://" + app, Image: image,
				IsolationTier: model.TierGVisor, Network: model.NetworkPolicy{}.Normalized(), Resources: model.DefaultCaps(),
				TimeoutSeconds: 120, LifetimeSeconds: 600}
		},
		Credential: os.Getenv("MODAL_TOKEN_SECRET"),
		AllowList:  []string{"192.0.2.0/24"},
		Caps:       model.Caps{CPU: 0.5, MemoryMB: 256, DiskMB: model.DefaultDiskMB, Pids: model.DefaultPids},
		Lifetime:   30 * time.Second,
		Skip: map[backendtest.Behaviour]string{
			backendtest.CapsB: "Modal's limits are not visible inside its gVisor sandbox and the live harness reads no vendor record",
		},
		Serial: true,
	})
}
