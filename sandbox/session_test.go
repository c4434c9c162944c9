package sandbox

import (
	"strings"
	"sync"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	dockertest "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/docker"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// One sandbox per tenant and session holds across clients, not only within
// one: N clients (each as a separate process would be, sharing nothing but
// the daemon) open the same tenant and session at once; exactly one
// container exists, and every other open is refused with ConfigurationError
// SBX-RUN-005, audited as refused. The same N opens through one client are
// refused by the client itself, with the same class and rule.
func TestOpen_OneSandboxPerTenantSessionAcrossClients(t *testing.T) {
	cli := needDocker(t)
	tpl := template(t)
	session := "one-" + runID
	spec, sum := tenantSpec(t, tpl, "acme", session)
	req := Request{Spec: spec, SpecSHA256: sum, TenantID: "acme", SessionID: session}
	const n = 5

	count := func() int {
		t.Helper()
		f := filters.NewArgs(filters.Arg("label", "test_run="+runID), filters.Arg("label", model.LabelTenantID+"=acme"),
			filters.Arg("label", model.LabelSessionID+"="+session))
		cs, err := cli.ContainerList(t.Context(), container.ListOptions{All: true, Filters: f})
		if err != nil {
			t.Fatal(err)
		}
		return len(cs)
	}
	check := func(t *testing.T, open func(i int) (*Sandbox, *auditBuffer, error)) {
		var wg sync.WaitGroup
		sbs, errs, audits := make([]*Sandbox, n), make([]error, n), make([]*auditBuffer, n)
		for i := range n {
			wg.Add(1)
			go func() { defer wg.Done(); sbs[i], audits[i], errs[i] = open(i) }()
		}
		wg.Wait()
		var opened []*Sandbox
		for i, err := range errs {
			if err == nil {
				opened = append(opened, sbs[i])
				continue
			}
			wantClass(t, err, ErrConfiguration, "SBX-RUN-005")
			if !strings.Contains(err.Error(), `tenant "acme" session "`+session+`"`) {
				t.Errorf("the refusal does not name the tenant and session: %v", err)
			}
		}
		refused, seen := 0, map[*auditBuffer]bool{}
		for _, a := range audits {
			if seen[a] {
				continue
			}
			seen[a] = true
			for _, r := range a.records(t) {
				if r["event"] == EventRefused && r["rule"] == "SBX-RUN-005" && r["sandbox_id"] == nil {
					refused++
				}
			}
		}
		if refused != n-len(opened) {
			t.Errorf("%d refusals audited, want %d", refused, n-len(opened))
		}
		got := count()
		for _, sb := range opened {
			_ = closedEventually(t, cli, sb)
		}
		if len(opened) != 1 || got != 1 {
			t.Fatalf("%d opens succeeded and %d containers existed; want exactly one: %v", len(opened), got, errs)
		}
		if left := dockertest.Left(t, "test_run="+runID, model.LabelTenantID+"=acme", model.LabelSessionID+"="+session); left != 0 {
			t.Fatalf("%d containers left after close", left)
		}
	}

	t.Run("separate clients", func(t *testing.T) {
		check(t, func(int) (*Sandbox, *auditBuffer, error) {
			c, audit := newClient(t)
			sb, err := c.Open(t.Context(), req)
			return sb, audit, err
		})
	})
	t.Run("one client", func(t *testing.T) {
		c, audit := newClient(t)
		check(t, func(int) (*Sandbox, *auditBuffer, error) {
			sb, err := c.Open(t.Context(), req)
			return sb, audit, err
		})
	})
}
