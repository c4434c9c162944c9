package egressreport

import (
	"strings"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// The report's list, pasted unchanged into a template on the egress
// gateway, passes the plan: the same rules, the real engine.
func TestReportPastesIntoAGatewayTemplate(t *testing.T) {
	rep, err := Read(strings.NewReader(sampleLog))
	if err != nil {
		t.Fatal(err)
	}
	rep.HostNetworks = hostNets
	a := rep.Allow()
	allow := append(append([]string(nil), a.Domains...), a.Addresses...)
	if len(a.Domains) == 0 || len(a.Addresses) == 0 {
		t.Fatalf("the sample gives no list to paste: %+v", a)
	}
	e, err := policy.New(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	eval := func(allow []string) policy.Decision {
		t.Helper()
		n := model.NetworkPolicy{Egress: model.EgressDeny, Allow: allow}.Normalized()
		d, err := e.Evaluate(t.Context(), policy.Input{
			Kind:    policy.KindNetworkPolicy,
			Address: "sandboxio_network_policy.learned",
			Backend: &policy.BackendRef{DSN: "docker://?egress=gateway", Scheme: "docker", Runtime: "runc", Key: backends.CapabilityKey("docker", "runc") + "+gateway", Options: map[string]string{"egress": "gateway"}},
			Network: &n,
		})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := eval(allow); !d.Allowed() {
		t.Fatalf("the report's list %q is refused on the gateway: %+v", allow, d.Denies)
	}
	// What the report holds back as a metadata, loopback or link-local
	// place, pasted by hand, the plan refuses (SBX-NET-014).
	held, _ := Read(strings.NewReader(heldLog))
	held.HostNetworks = hostNets
	n := 0
	for _, h := range held.Allow().Held {
		switch h.Category {
		case CatMetadata, CatLoopback, CatLinkLocal:
		default:
			continue
		}
		n++
		d := eval([]string{h.Entry})
		// (A single-label name such as "metadata" is no entry at all.)
		if d.Allowed() || (d.Denies[0].ID != "SBX-NET-014" && d.Denies[0].ID != "SBX-NET-006") {
			t.Errorf("held-back %s (%s) pasted by hand: %+v", h.Entry, h.Category, d.Denies)
		}
	}
	if n < 2 {
		t.Fatalf("heldLog holds back %d metadata or loopback entries", n)
	}
}
