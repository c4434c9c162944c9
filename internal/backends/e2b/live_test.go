package e2b_test

import (
	"os"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/e2b"
	backendtest "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/conformance"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Opt-in: the variables that run the conformance suite against the real
// E2B with the user's own account (docs/guides/backend-e2b.md, "Verify
// your E2B account"). It opens a few dozen short sandboxes, one at a time.
const (
	liveEnv         = "SANDBOXIO_LIVE_E2B"
	liveTemplateEnv = "SANDBOXIO_LIVE_E2B_TEMPLATE" // default "base"
	liveTargetEnv   = "SANDBOXIO_LIVE_E2B_EGRESS_TARGET"
)

// TestConformanceLive runs the same suite as TestConformance against E2B
// itself, when SANDBOXIO_LIVE_E2B=1 and E2B_API_KEY are set; otherwise it
// skips, saying why. Fault injection and the vendor-side record exist only
// on the local server, so those behaviours skip here with their reasons.
func TestConformanceLive(t *testing.T) {
	if os.Getenv(liveEnv) != "1" {
		t.Skipf("SKIP: the live E2B suite is opt-in: set %s=1 and %s (a key of your E2B team) to run it against E2B", liveEnv, e2b.EnvAPIKey)
	}
	key := os.Getenv(e2b.EnvAPIKey)
	if key == "" {
		t.Skipf("SKIP: %s=1 but %s is not set: the live E2B suite needs a key of your E2B team", liveEnv, e2b.EnvAPIKey)
	}
	tpl := os.Getenv(liveTemplateEnv)
	if tpl == "" {
		tpl = "base"
	}
	target := os.Getenv(liveTargetEnv)
	if target == "" {
		target = "1.1.1.1:443" // a public address an open sandbox reaches
	}
	b, err := e2b.New(backends.DSN{Scheme: "e2b", Options: map[string]string{}})
	if err != nil {
		t.Fatalf("open the E2B backend: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	backendtest.Run(t, backendtest.Harness{
		LifetimeKeeper: "E2B's control plane",
		Name:           "e2b-live",
		Backend:        b,
		Spec: func() model.Spec {
			return model.Spec{SpecVersion: model.SpecVersion, Name: "conformance-live", Backend: "e2b://", Image: tpl,
				Network: model.NetworkPolicy{}.Normalized(), Resources: model.DefaultCaps(), TimeoutSeconds: 60, LifetimeSeconds: 300}
		},
		Credential: key,
		// An E2B sandbox under allow_internet_access=false keeps its
		// interface; the suite connects out from it and wants a failure.
		EgressTarget: target,
		AllowList:    []string{"pypi.org", "151.101.0.0/16"},
		Caps:         model.DefaultCaps(),
		// Whole seconds (E2B counts the timeout in seconds), with room for
		// a VM's start.
		ExecTimeout: 2 * time.Second,
		Lifetime:    10 * time.Second,
		// A team's concurrent-sandbox quota: one behaviour at a time.
		Serial: true,
	})
}
