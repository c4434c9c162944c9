package modal_test

import (
	"testing"
	"time"

	modalserver "github.com/sandboxio/terraform-provider-sandboxio/internal/fakes/modal"
	backendtest "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/conformance"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// The backend conformance suite against the adapter talking to the Modal
// conformance server: faults are gRPC statuses the server sends, and what
// Modal records (tags, network access, caps, timeout) is read from the
// server's own record of the create.
func TestConformance(t *testing.T) {
	s := modalserver.StartForTest(t)
	s.SetEnv(t)
	dsn := "modal://" + modalserver.TestApp
	b := openBackend(t, dsn)
	backendtest.Run(t, backendtest.Harness{
		Name: "modal-server",
		// The vendor's lifetime is the local server's own timer, in this
		// process as a vendor's control plane is out of a sandbox's reach;
		// beneath it, the Docker sandbox's PID 1 is sandboxio's init.
		LifetimeKeeper: "the local Modal server's timer for the sandbox's timeout (the vendor's control plane)",
		Init:           ".sandboxio-init",
		Backend:        b,
		Spec: func() model.Spec {
			return model.Spec{SpecVersion: model.SpecVersion, Name: "conformance", Backend: dsn, Image: modalserver.Image,
				IsolationTier: model.TierGVisor, Network: model.NetworkPolicy{}.Normalized(), Resources: model.DefaultCaps(),
				TimeoutSeconds: 60, LifetimeSeconds: 180}
		},
		Observe:    s.Observe,
		Faults:     s.Faults(),
		Credential: modalserver.TestTokenSecret,
		AllowList:  []string{"192.0.2.0/24", "198.51.100.7/32"},
		// Modal takes CPU and memory per sandbox; disk and pids stay at the
		// defaults (the policy refuses other values for Modal).
		Caps: model.Caps{CPU: 0.5, MemoryMB: 256, DiskMB: model.DefaultDiskMB, Pids: model.DefaultPids},
		// The lifetime counts from the create request, and a create on a
		// loaded host is slow while every behaviour creates at once.
		Lifetime: 10 * time.Second,
	})
}
