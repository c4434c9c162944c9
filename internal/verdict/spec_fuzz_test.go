package verdict

import (
	"errors"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// FuzzTenantSpecDecision runs a template_spec, as a user might write it by
// hand, through what data.sandboxio_tenant_sandbox decides at plan: the
// parser, the per-tenant rendering (backend and isolation tier) and the
// bundle on both documents. Nothing panics; every refusal is a
// *model.Error of a refusal class; and a spec the plan accepts is accepted
// by the run-time helper's policy step (CheckSpec on the rendered spec),
// with the tier its backend gives.
func FuzzTenantSpecDecision(f *testing.F) {
	ctx := f.Context()
	eng, err := policy.Shared(ctx, nil)
	if err != nil {
		f.Fatal(err)
	}
	good := `{"spec_version":1,"name":"python","backend":"docker://","image":"img","runtime":"runc","isolation_tier":"CONTAINER",` +
		`"network":{"egress":"deny","allow":[]},"resources":{"cpu":1,"memory_mb":512,"disk_mb":1024,"pids":256},` +
		`"timeout_seconds":300,"lifetime_seconds":300,"env":{},"secret_names":[],"labels":{}}`
	for _, seed := range []string{
		good,
		`{"spec_version":1,"backend":"","image":"img"}`,
		`{"spec_version":1,"backend":"docker://","isolation_tier":"LOL"}`,
		`{"spec_version":1,"backend":"docker://?runtime=runsc","isolation_tier":""}`,
		`{"spec_version":1,"backend":"e2b://","isolation_tier":"MICROVM","network":{"egress":"deny","allow":["10.0.0.0/8"]}}`,
		`{"spec_version":1,"backend":"docker://","network":{"egress":"deny","allow":["10.0.0.0/8"]}}`,
		`{"spec_version":1,"backend":"docker://","network":{"egress":"learn"}}`,
		`{"spec_version":1,"backend":"docker://","resources":{"cpu":0}}`,
		`{"spec_version":1,"backend":"docker://","runtime":"youki"}`,
		`{"spec_version":1,"backend":"daytona://","isolation_tier":"UNKNOWN","require_isolation":"LOL"}`,
		`{"spec_version":1,"resources":{"cpu":"x"}}`,
		`{"spec_version":1,"spec_sha256":"00"}`,
	} {
		f.Add([]byte(seed))
	}
	refusal := func(t *testing.T, what string, err error) {
		t.Helper()
		var me *model.Error
		if !errors.As(err, &me) || (me.Class != model.ErrConfiguration && me.Class != model.ErrCapabilityNotSupported) {
			t.Fatalf("%s: not a refusal: %T %v", what, err, err)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		template, err := model.ParseSpec(data)
		if err != nil {
			refusal(t, "parse", err)
			return
		}
		tenant := inputs.Tenant{TenantID: "acme", SessionID: "s-1"}
		spec, in, err := tenant.Sandbox(template)
		if err != nil {
			refusal(t, "render", err)
			return
		}
		v, err := Check(ctx, eng, in, Options{})
		if err != nil {
			refusal(t, "tenant document", err)
			return
		}
		if v.Failed() {
			return
		}
		run, tier, err := inputs.Spec(spec)
		if err != nil {
			t.Fatalf("the rendered spec of an accepted template_spec is refused: %v", err)
		}
		if d, ok := backends.Lookup(run.Backend.Key); ok && (tier != d.Tier || spec.IsolationTier != d.Tier) {
			t.Fatalf("tier %s, spec says %s, backend %s gives %s", tier, spec.IsolationTier, run.Backend.Key, d.Tier)
		}
		if v, err = Check(ctx, eng, run, Options{}); err != nil {
			refusal(t, "run-time document", err)
			return
		}
		if v.Failed() {
			return // the data source refuses it too: it decides both documents
		}
		// What the data source renders is what the helper is given.
		canon, _, err := spec.Canonical()
		if err != nil {
			t.Fatal(err)
		}
		given, err := model.ParseSpec(canon)
		if err != nil {
			t.Fatalf("the rendered spec does not parse: %v", err)
		}
		rv, err := CheckSpec(ctx, eng, given, Options{})
		if err != nil || rv.Failed() {
			t.Fatalf("accepted at plan, refused at run time: %v %v", err, rv.Err())
		}
	})
}
