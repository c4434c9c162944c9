package resources_test

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/egressreport"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	dockertest "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/docker"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
	"github.com/sandboxio/terraform-provider-sandboxio/sandbox"
)

// learnLog opens a learn sandbox on Docker (the local image: busybox's own
// nslookup and nc) through the Go API, runs code that resolves names and
// connects to addresses, one of them with an HTTP Host, and returns the
// audit log it wrote.
func learnLog(t *testing.T) string {
	t.Helper()
	dockertest.Need(t)
	timeout, lifetime := int64(60), int64(120)
	tpl, _, err := inputs.Template{Name: "learn", Backend: "docker://", Image: localImage, Egress: model.EgressLearn,
		TimeoutSeconds: &timeout, LifetimeSeconds: &lifetime,
		Labels: map[string]string{"test_run": dockertest.RunID, "test": "egress-learn"}}.Build("")
	if err != nil {
		t.Fatal(err)
	}
	spec, _, err := inputs.Tenant{TenantID: "acme", SessionID: "learn-" + dockertest.RunID}.Sandbox(tpl)
	if err != nil {
		t.Fatal(err)
	}
	raw, sum, err := spec.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	var audit bytes.Buffer
	ctx := t.Context()
	c, err := sandbox.New(ctx, sandbox.Config{Audit: sandbox.NewAuditLog(&audit, nil)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close(ctx) }()
	sb, err := c.Open(ctx, sandbox.Request{Spec: raw, SpecSHA256: sum, TenantID: "acme", SessionID: "learn-" + dockertest.RunID})
	if err != nil {
		t.Fatal(err)
	}
	script := `nslookup pypi.org; nslookup files.pythonhosted.org; nc -w 2 151.101.0.223 443 </dev/null
printf 'GET / HTTP/1.1\r\nHost: registry.npmjs.org\r\n\r\n' | nc -w 2 104.16.0.35 80; echo done`
	res, err := sb.Run(ctx, []string{"sh", "-c", script}, sandbox.RunOptions{Timeout: 30 * time.Second})
	if cerr := sb.Close(ctx); err == nil {
		err = cerr
	}
	if err != nil || !strings.HasSuffix(string(res.Stdout), "done\n") {
		t.Fatalf("learn run: %v %+v", err, res)
	}
	return audit.String()
}

// emitted returns the allow list the report prints for the backend whose
// heading contains title, as printed: "allow = [ ... ]".
func emitted(t *testing.T, report, title string) string {
	t.Helper()
	_, rest, ok := strings.Cut(report, title)
	if !ok {
		t.Fatalf("no list for %s in:\n%s", title, report)
	}
	_, rest, _ = strings.Cut(rest, "\n")
	list, _, _ := strings.Cut(rest, "\n]\n")
	return list + "\n]"
}

// The allow lists `sandboxio egress report` prints, pasted as they are into a
// template on the backend they are for, plan cleanly.
func TestAccEgressReport_EmittedListsPlan(t *testing.T) {
	requireDocker(t)
	if os.Getenv("TF_ACC") == "" {
		t.Skip("TF_ACC is not set: this test opens a Docker sandbox (make test sets it)")
	}
	log := learnLog(t)
	rep, err := egressreport.Read(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep.Write(&out, "audit.jsonl")
	report := out.String()
	t.Logf("sandboxio egress report:\n%s", report)
	for _, want := range []string{"dns   pypi.org\n", "dns   files.pythonhosted.org\n", "tcp   151.101.0.223:443\n", "http  registry.npmjs.org at 104.16.0.35:80\n"} {
		if !strings.Contains(report, want) {
			t.Errorf("the report of the learn sandbox lacks %q", want)
		}
	}
	e2b := emitted(t, report, "E2B and Vercel")
	modal := emitted(t, report, "Modal")
	if !strings.Contains(e2b, `"pypi.org", # DNS name`) || !strings.Contains(e2b, `"registry.npmjs.org", # DNS name`) ||
		!strings.Contains(modal, `"151.101.0.223/32"`) || strings.Contains(modal, "pypi") {
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
