package vercel_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/vercel"
	backendtest "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/conformance"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// TestConformance runs the backend conformance suite against the adapter
// talking to the local Vercel conformance server.
func TestConformance(t *testing.T) {
	srv, b := open(t)
	backendtest.Run(t, backendtest.Harness{
		Name: "vercel-server", Backend: b, Credential: canaryToken,
		// The vendor's lifetime is the local server's own timer, in this
		// process as a vendor's control plane is out of a sandbox's reach;
		// beneath it, the Docker sandbox's PID 1 is sandboxio's init.
		LifetimeKeeper: "the local Vercel server's timer for the sandbox's timeout (the vendor's control plane)",
		Init:           ".sandboxio-init",
		Spec:           baseSpec,
		Observe: func(_ context.Context, id string) (backendtest.Observed, error) {
			o, ok := observe(srv, id)
			if !ok {
				return backendtest.Observed{}, fmt.Errorf("the server has no sandbox %s", id)
			}
			return backendtest.Observed{Labels: o.Labels, PlainEnv: o.PlainEnv, Caps: &o.Caps, Lifetime: o.Lifetime,
				Network: &backendtest.ObservedNetwork{Denied: o.Denied, Allow: o.Allow}}, nil
		},
		Faults:    srv,
		AllowList: []string{"pypi.org", "*.pythonhosted.org", "10.1.0.0/16"},
		Caps:      vercelCaps,
		Skip:      map[backendtest.Behaviour]string{backendtest.BinaryOutput: textOnly},
	})
}

// textOnly is why binary output is checked by digest on Vercel.
const textOnly = "Vercel's command stream carries output as JSON strings (the SDK's LogLine data is a string), so bytes that are not UTF-8 arrive as U+FFFD"

// TestLiveConformance runs the suite against the real Vercel Sandbox when
// SANDBOXIO_LIVE_VERCEL=1 and credentials are set: VERCEL_OIDC_TOKEN or
// VERCEL_TOKEN, and SANDBOXIO_VERCEL_DSN (vercel://TEAM/PROJECT). It opens
// real sandboxes on the account, one at a time, and removes them.
func TestLiveConformance(t *testing.T) {
	if os.Getenv("SANDBOXIO_LIVE_VERCEL") != "1" {
		t.Skip("SKIP: live Vercel tests run only with SANDBOXIO_LIVE_VERCEL=1, VERCEL_OIDC_TOKEN or VERCEL_TOKEN, and SANDBOXIO_VERCEL_DSN=vercel://TEAM/PROJECT")
	}
	raw := os.Getenv("SANDBOXIO_VERCEL_DSN")
	dsn, err := backends.ParseDSN(raw)
	if err != nil || dsn.Scheme != vercel.Name {
		t.Fatalf("SANDBOXIO_VERCEL_DSN=%q is not a vercel:// DSN: %v", raw, err)
	}
	b, err := vercel.New(dsn)
	if err != nil {
		t.Fatal(err)
	}
	backendtest.Run(t, backendtest.Harness{
		Name: "vercel-live", Backend: b, Serial: true,
		LifetimeKeeper: "Vercel's control plane",
		Spec: func() model.Spec {
			s := baseSpec()
			s.Backend, s.Image = raw, "node24"
			return s
		},
		AllowList: []string{"pypi.org"}, Caps: vercelCaps,
		Skip: map[backendtest.Behaviour]string{backendtest.BinaryOutput: textOnly},
		Code: backendtest.Code{Lang: "node", Program: "console.log(6*7)", Want: "42\n"},
		// Vercel's lists lag behind a stop; whole seconds suit its timeouts.
		ExecTimeout: 3 * time.Second, Lifetime: 20 * time.Second,
	})
}
