package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/docker/docker/client"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	dockertest "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/docker"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// runID labels every sandbox this test process creates (label test_run), so
// that the leak check finds exactly ours.
var runID = dockertest.RunID

func TestMain(m *testing.M) {
	if path := os.Getenv(poolChildEnv); path != "" {
		os.Exit(poolChild(path))
	}
	os.Exit(dockertest.CheckLeaks(m.Run()))
}

// needDocker skips the test (or fails it under SANDBOXIO_REQUIRE_DOCKER=1)
// when no daemon answers, and makes sure the local image exists.
func needDocker(t testing.TB) *client.Client { return dockertest.Need(t) }

// template is the test template, built as the provider builds one.
func template(t testing.TB, mods ...func(*inputs.Template)) model.Spec {
	t.Helper()
	timeout, lifetime := int64(60), int64(180)
	tpl := inputs.Template{
		Name: "unit", Backend: "docker://", Image: docker.LocalImage,
		TimeoutSeconds: &timeout, LifetimeSeconds: &lifetime,
		Env:    map[string]string{"LANG": "C.UTF-8"},
		Labels: map[string]string{"test_run": runID, "test": labelSafe(t.Name())},
	}
	for _, m := range mods {
		m(&tpl)
	}
	spec, _, err := tpl.Build("")
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

func labelSafe(s string) string {
	s = strings.NewReplacer("/", ".", " ", "_", "#", "-").Replace(s)
	if len(s) > 60 {
		s = s[:60]
	}
	return s
}

// tenantSpec renders the per-tenant spec and its digest, as the data source
// does.
func tenantSpec(t testing.TB, tpl model.Spec, tenant, session string) ([]byte, string) {
	t.Helper()
	spec, _, err := inputs.Tenant{TenantID: tenant, SessionID: session}.Sandbox(tpl)
	if err != nil {
		t.Fatal(err)
	}
	return canonical(t, spec)
}

func canonical(t testing.TB, s model.Spec) ([]byte, string) {
	t.Helper()
	b, sum, err := s.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	return b, sum
}

// auditBuffer collects audit lines.
type auditBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (a *auditBuffer) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.buf.Write(p)
}

func (a *auditBuffer) String() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.buf.String()
}

// records parses every line; each must be one JSON object with the fields
// every record carries.
func (a *auditBuffer) records(t testing.TB) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(a.String()))
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("audit line is not one JSON object: %v\n%s", err, sc.Text())
		}
		for _, k := range []string{"time", "event", "sandbox_id", "backend", "tier", "tenant_id", "session_id", "labels", "network",
			"caps", "disk_cap_strategy", "pids_cap_strategy", "timeouts", "blocked_egress", "exit_code", "duration_ms", "secret_names"} {
			if _, ok := m[k]; !ok {
				t.Fatalf("audit record without %q: %s", k, sc.Text())
			}
		}
		out = append(out, m)
	}
	return out
}

func events(recs []map[string]any) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = fmt.Sprint(r["event"])
		if op, ok := r["op"]; ok {
			out[i] += "/" + fmt.Sprint(op)
		}
	}
	return out
}

// newClient returns a client writing its audit records to the returned
// buffer and its warnings to the test log.
func newClient(t testing.TB) (*Client, *auditBuffer) {
	t.Helper()
	var audit auditBuffer
	c, err := New(t.Context(), Config{
		Audit:     NewAuditLog(&audit, nil),
		OnWarning: func(w model.Warning) { t.Logf("warning: %s", w) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.WithoutCancel(t.Context())) })
	return c, &audit
}

// wantClass fails unless err has class c (and, for ResourceLimitExceeded,
// names limit) and the rule, when given.
func wantClass(t testing.TB, err error, c model.ErrorClass, rule string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want %s, got no error", c)
	}
	if ClassOf(err) != c {
		t.Fatalf("want %s, got %v", c, err)
	}
	if rule != "" {
		var me *Error
		if !errors.As(err, &me) || me.Rule != rule {
			t.Fatalf("want rule %s, got %v", rule, err)
		}
	}
}
