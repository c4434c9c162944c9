package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Warnings reach Config.OnWarning (which the CLI prints to stderr) with the
// request's secret values redacted from every text field: a backend's
// warning during open, and an orphan's warning with the sandbox's labels.
func TestOnWarning_Redacted(t *testing.T) {
	tpl := template(t, withSecretNames("OPENAI_API_KEY", "TENANT_TOKEN"))
	spec, sum := tenantSpec(t, tpl, "acme-corp", "s-1")
	f := &fakeBackend{
		warnings: []model.Warning{{Class: model.UnverifiedIsolationWarning, Rule: "X-" + canary, Attribute: "runtime",
			Message: "the daemon said " + canary, Fix: "do not echo " + canary,
			SandboxID: "id-" + canary, Labels: map[string]string{"k": canary, canary: "v"}}},
		closeErr: errors.New("still there"),
	}
	var mu sync.Mutex
	var got []model.Warning
	c, err := New(t.Context(), Config{OnWarning: func(w model.Warning) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, w)
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.WithoutCancel(t.Context())) })
	withFake(c, f)
	secrets := NewSecrets(map[string]string{"OPENAI_API_KEY": canary, "TENANT_TOKEN": "acme-corp"})
	sb, err := c.Open(t.Context(), Request{Spec: spec, SpecSHA256: sum, TenantID: "acme-corp", SessionID: "s-1", Secrets: secrets})
	if err != nil {
		t.Fatal(err)
	}
	_ = sb.Close(t.Context()) // orphaned: warns with the labels, tenant "acme-corp" among them
	mu.Lock()
	defer mu.Unlock()
	classes := map[model.WarningClass]bool{}
	for _, w := range got {
		classes[w.Class] = true
		text := fmt.Sprintf("%s %s %s %s %s %s %v", w, w.Rule, w.Attribute, w.Message, w.Fix, w.SandboxID, w.Labels)
		if strings.Contains(text, canary) || strings.Contains(text, "acme-corp") {
			t.Errorf("warning holds a secret value: %s", text)
		}
	}
	if !classes[model.UnverifiedIsolationWarning] || !classes[model.OrphanedSandboxWarning] {
		t.Fatalf("warnings: %+v", got)
	}
	// The backend's own warning object is left as it was.
	if f.warnings[0].Labels["k"] != canary {
		t.Fatal("the warning's labels were modified in place")
	}
}
