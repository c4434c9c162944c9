package resources_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/egressreport"
)

// learnLog is what a learn sandbox on Docker records (see
// internal/backends/docker's egress tests for the records themselves):
// names it resolved, addresses it connected to, and a name no allow list
// takes.
const learnLog = `{"event":"exec","sandbox_id":"a","blocked_egress":9,"blocked_egress_destinations":[{"kind":"dns","name":"pypi.org","count":4},{"kind":"dns","name":"files.pythonhosted.org","count":2},{"kind":"tcp","address":"151.101.0.223","port":443,"count":1},{"kind":"udp","address":"2a04:4e42::223","port":443,"count":1},{"kind":"dns","name":"_http._tcp.local","count":1}]}
`

// emitted returns the allow list the report prints for the backend whose
// heading contains title, as printed: "allow = [ ... ]".
func emitted(t *testing.T, title string) string {
	t.Helper()
	rep, err := egressreport.Read(strings.NewReader(learnLog))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep.Write(&out, "audit.jsonl")
	_, rest, ok := strings.Cut(out.String(), title)
	if !ok {
		t.Fatalf("no list for %s in:\n%s", title, out.String())
	}
	_, rest, _ = strings.Cut(rest, "\n")
	list, _, _ := strings.Cut(rest, "\n]\n")
	return list + "\n]"
}

// The allow lists `sandboxio egress report` prints, pasted as they are into a
// template on the backend they are for, plan cleanly.
func TestAccEgressReport_EmittedListsPlan(t *testing.T) {
	e2b := emitted(t, "E2B and Vercel")
	modal := emitted(t, "Modal")
	if !strings.Contains(e2b, `"pypi.org", # DNS name`) || !strings.Contains(modal, `"151.101.0.223/32"`) || strings.Contains(modal, "pypi") {
		t.Fatalf("emitted lists:\n%s\n%s", e2b, modal)
	}
	for _, c := range []struct{ backend, list string }{{"e2b://", e2b}, {"modal://agents", modal}} {
		t.Run(c.backend, func(t *testing.T) {
			unitTest(t, resource.TestCase{
				ProtoV6ProviderFactories: protoV6ProviderFactories,
				Steps: []resource.TestStep{{
					Config:             templateConfig("", "  backend = \""+c.backend+"\"\n  network = {\n    egress = \"deny\"\n    "+c.list+"\n  }"),
					PlanOnly:           true,
					ExpectNonEmptyPlan: true,
				}},
			})
		})
	}
}
