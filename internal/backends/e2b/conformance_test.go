package e2b_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	e2bserver "github.com/sandboxio/terraform-provider-sandboxio/internal/fakes/e2b"
	backendtest "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/conformance"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// The backend conformance suite against the E2B adapter talking to the
// local E2B conformance server, with the server's fault injection and its
// record of what the adapter asked for.
func TestConformance(t *testing.T) {
	srv, b := open(t)
	backendtest.Run(t, backendtest.Harness{
		Name: "e2b-server",
		// The vendor's lifetime is the local server's own timer, in this
		// process as a vendor's control plane is out of a sandbox's reach;
		// beneath it, the Docker sandbox's PID 1 is sandboxio's init.
		LifetimeKeeper: "the local E2B server's timer for the sandbox's timeout (the vendor's control plane)",
		Init:           ".sandboxio-init",
		Backend:        b,
		Spec: func() model.Spec {
			return model.Spec{SpecVersion: model.SpecVersion, Name: "conformance", Backend: "e2b://", Image: e2bserver.TestTemplate,
				Network: model.NetworkPolicy{}.Normalized(), Resources: model.DefaultCaps(), TimeoutSeconds: 60, LifetimeSeconds: 180}
		},
		Observe: func(_ context.Context, id string) (backendtest.Observed, error) {
			rec, ok := srv.Observe(id)
			if !ok {
				return backendtest.Observed{}, fmt.Errorf("the server has no record of sandbox %s", id)
			}
			return observed(rec), nil
		},
		Faults:     srv,
		Credential: canaryKey,
		// E2B's allowOut takes CIDR blocks, IP addresses and domain names.
		AllowList: []string{"151.101.0.0/16", "192.0.2.7", "pypi.org", "*.pythonhosted.org"},
		// Caps belong to the template: the adapter opens only the default
		// caps (any other value is refused naming the template), which the
		// server's template applies to its local sandbox.
		Caps: model.DefaultCaps(),
	})
}

// observed is the server's record in the suite's terms. The egress
// control is what the adapter asked E2B for (the record), not what the
// local Docker sandbox got, which is no network at all for any restriction.
func observed(rec e2bserver.Record) backendtest.Observed {
	denied := rec.AllowInternetAccess != nil && !*rec.AllowInternetAccess
	for _, d := range rec.DenyOut {
		if p, err := netip.ParsePrefix(d); err == nil && p.Bits() == 0 {
			denied = true
		}
	}
	allow := append([]string(nil), rec.AllowOut...)
	if len(allow) > 0 {
		// An allow list under a full deny is "deny all but these": the
		// suite calls that the allow list, not a plain deny.
		denied = false
	}
	return backendtest.Observed{
		Labels:   rec.Metadata,
		PlainEnv: rec.EnvVars,
		Network:  &backendtest.ObservedNetwork{Denied: denied, Allow: allow},
		Lifetime: rec.Timeout,
	}
}
