package daytona_test

import (
	"os"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/daytona"
	backendtest "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/conformance"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Opt-in: the variables that run the conformance suite against the real
// Daytona with the user's own organization (docs/guides/backend-daytona.md,
// "Verify your Daytona organization"). It opens a few dozen short sandboxes, one at a time.
const (
	liveEnv       = "SANDBOXIO_LIVE_DAYTONA"
	liveImageEnv  = "SANDBOXIO_LIVE_DAYTONA_IMAGE"  // default liveImage
	liveTargetEnv = "SANDBOXIO_LIVE_DAYTONA_TARGET" // a region; default the organization's
	liveEgressEnv = "SANDBOXIO_LIVE_DAYTONA_EGRESS_TARGET"
	// liveImage has sh, ls, stat, nc and /proc, and a pinned tag.
	liveImage = "alpine:3.21"
)

// TestConformanceLive runs the suite of TestConformance against Daytona
// itself, when SANDBOXIO_LIVE_DAYTONA=1 and DAYTONA_API_KEY are set
// (DAYTONA_API_URL for a self-hosted Daytona); otherwise it skips, saying
// why. Fault injection and the vendor-side record exist only on the local
// server, so those behaviours skip here with their reasons.
func TestConformanceLive(t *testing.T) {
	if os.Getenv(liveEnv) != "1" {
		t.Skipf("SKIP: the live Daytona suite is opt-in: set %s=1 and %s (a key of your Daytona organization; %s for a self-hosted Daytona) to run it against Daytona",
			liveEnv, daytona.EnvAPIKey, daytona.EnvAPIURL)
	}
	key := os.Getenv(daytona.EnvAPIKey)
	if key == "" {
		t.Skipf("SKIP: %s=1 but %s is not set: the live Daytona suite needs a key of your Daytona organization", liveEnv, daytona.EnvAPIKey)
	}
	image := os.Getenv(liveImageEnv)
	if image == "" {
		image = liveImage
	}
	target := os.Getenv(liveEgressEnv)
	if target == "" {
		target = "1.1.1.1:443" // a public address; under deny the suite wants the connection to fail
	}
	opts := map[string]string{}
	if r := os.Getenv(liveTargetEnv); r != "" {
		opts["target"] = r
	}
	b, err := daytona.New(backends.DSN{Scheme: daytona.Name, Options: opts})
	if err != nil {
		t.Fatalf("open the Daytona backend: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	backendtest.Run(t, backendtest.Harness{
		LifetimeKeeper: "Daytona's control plane",
		Name:           "daytona-live",
		Backend:        b,
		Spec: func() model.Spec {
			return model.Spec{SpecVersion: model.SpecVersion, Name: "conformance-live", Backend: "daytona://", Image: image,
				Network: model.NetworkPolicy{}.Normalized(), Resources: model.DefaultCaps(), TimeoutSeconds: 120, LifetimeSeconds: 300}
		},
		Credential:   key,
		EgressTarget: target,
		// Whole cores and GiB; 3 GiB of disk is what Daytona gives by default.
		Caps:              model.Caps{CPU: 1, MemoryMB: 1024, DiskMB: 3072, Pids: model.DefaultCaps().Pids},
		SecretsInPlainEnv: true,
		// Room for a build and a start; the lifetime is this process's
		// deadline (Daytona's own limit is idle minutes).
		ExecTimeout: 2 * time.Second,
		Lifetime:    15 * time.Second,
		GoneWithin:  time.Minute,
		Skip: map[backendtest.Behaviour]string{
			backendtest.RunStreams: "Daytona's toolbox returns a command's output as JSON strings: bytes that are not UTF-8 arrive as U+FFFD",
			backendtest.UploadB:    "the read-back goes through the same JSON output, so a binary file cannot be compared byte for byte",
		},
		// An organization's sandbox quota: one behaviour at a time.
		Serial: true,
	})
}
