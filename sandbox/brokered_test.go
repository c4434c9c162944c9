package sandbox

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// A brokered secret's value is given in Request.Secrets like any, and is
// checked like any (missing, too short); the backend gets it apart from
// the secret_names values, in CreateRequest.Brokered, so that no backend
// can put it in an environment by mistake.
func TestOpen_BrokeredValuesGoOnlyToTheBroker(t *testing.T) {
	tpl := template(t, withSecretNames("HF_TOKEN"), func(x *inputs.Template) {
		x.Backend = "docker://?egress=gateway"
		x.Egress, x.Allow = model.EgressDeny, []string{"api.test"}
		x.BrokeredSecrets = map[string]model.BrokeredSecret{"API_KEY": {Hosts: []string{"api.test"}, Header: "Authorization"}}
	})
	spec, sum := tenantSpec(t, tpl, "acme", "s-1")
	for _, tc := range []struct {
		name    string
		secrets map[string]string
		rule    string
		want    string
	}{
		{"missing", map[string]string{"HF_TOKEN": "hf-0123456789"}, rules.SecretValues, `no value was given for secret "API_KEY", named in the spec's brokered_secrets`},
		{"short", map[string]string{"HF_TOKEN": "hf-0123456789", "API_KEY": "short"}, rules.ShortSecret, `secret "API_KEY" has a value of fewer than 8 characters`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeBackend{}
			c, _ := newClient(t)
			withFake(c, f)
			_, err := c.Open(t.Context(), Request{Spec: spec, SpecSHA256: sum, TenantID: "acme", SessionID: "s-1", Secrets: NewSecrets(tc.secrets)})
			wantClass(t, err, ErrConfiguration, tc.rule)
			if !strings.Contains(err.Error(), tc.want) || f.creates.Load() != 0 {
				t.Fatalf("%v (creates %d)", err, f.creates.Load())
			}
		})
	}
	f := &fakeBackend{}
	c, audit := newClient(t)
	withFake(c, f)
	sb, err := c.Open(t.Context(), Request{Spec: spec, SpecSHA256: sum, TenantID: "acme", SessionID: "s-1",
		Secrets: NewSecrets(map[string]string{"HF_TOKEN": "hf-0123456789", "API_KEY": canary})})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sb.Close(t.Context()) }()
	f.mu.Lock()
	req := f.reqs[0]
	f.mu.Unlock()
	if len(req.Secrets) != 1 || req.Secrets["HF_TOKEN"] == "" || len(req.Brokered) != 1 || req.Brokered["API_KEY"] != canary || req.OnBrokered == nil {
		t.Fatalf("the backend got secrets %v, brokered names %d, OnBrokered %v", slices.Sorted(maps.Keys(req.Secrets)), len(req.Brokered), req.OnBrokered != nil)
	}
	// The broker's entries reach the audit, the host and method redacted
	// like every string there.
	req.OnBrokered(model.BrokeredRequest{Secret: "API_KEY", Host: "api.test", Method: "POST" + canary, Status: 401})
	var got []map[string]any
	for _, r := range audit.records(t) {
		if r["event"] == EventBrokered {
			got = append(got, r)
		}
	}
	if len(got) != 1 || got[0]["op"] != "broker" || got[0]["sandbox_id"] == nil || strings.Contains(audit.String(), canary) ||
		got[0]["brokered"].(map[string]any)["method"] != "POST"+Redacted {
		t.Fatalf("audit:\n%s", audit)
	}
}
