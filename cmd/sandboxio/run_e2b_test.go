package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/e2b/e2bserver"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// TestRunCLI_E2B: `sandboxio run --spec` opens, runs and closes on E2B
// through the same CLI, against the local E2B conformance server; the
// audit names E2B's sandbox ID, blocked_egress stays null, and the API key
// appears nowhere in the output or the audit.
func TestRunCLI_E2B(t *testing.T) {
	const key = "e2b_cli_canary_key_4b1d9f0e8c7a6b5d4c3e2f10"
	srv := e2bserver.NewTestServer(t, key)
	t.Setenv("E2B_API_KEY", key)
	t.Setenv("E2B_API_URL", srv.URL)
	t.Setenv("E2B_SANDBOX_URL", srv.URL)
	spec, sum := specFile(t, "acme", "s-e2b-"+runID, func(x *inputs.Template) {
		x.Backend, x.Image, x.Caps = "e2b://", e2bserver.TestTemplate, model.CapsRequest{}
	})
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	code, out, errOut := cli(t, "", "run", "--spec", spec, "--spec-sha256", sum, "--tenant", "acme", "--session", "s-e2b-"+runID,
		"--audit", audit, "--", "sh", "-c", "echo hello from e2b; echo oops >&2; exit 3")
	if code != 3 || out != "hello from e2b\n" || !strings.Contains(errOut, "oops\n") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	recs := auditLines(t, audit)
	var id string
	for _, r := range recs {
		if r["event"] == "created" {
			id, _ = r["sandbox_id"].(string)
		}
		if v, ok := r["blocked_egress"]; ok && v != nil {
			t.Errorf("blocked_egress %v, want null (E2B does not report it)", v)
		}
	}
	rec, ok := srv.Observe(id)
	if !ok || rec.Ended != "killed" {
		t.Errorf("audit sandbox_id %q: the server's record %+v (want E2B's sandbox ID, killed at close)", id, rec)
	}
	data, _ := os.ReadFile(audit)
	for what, s := range map[string]string{"stdout": out, "stderr": errOut, "audit": string(data)} {
		if strings.Contains(s, key) {
			t.Errorf("the E2B API key leaked into %s", what)
		}
	}
	if len(srv.Running()) != 0 {
		t.Errorf("sandboxes left running: %v", srv.Running())
	}
}
