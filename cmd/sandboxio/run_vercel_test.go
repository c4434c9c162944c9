package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/vercel"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/vercel/vercelserver"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// TestRunCLI_Vercel: `sandboxio run --spec` opens, runs and closes on
// Vercel through the same CLI, against the local Vercel conformance
// server; the audit names the Vercel sandbox, blocked_egress stays null,
// and the token appears nowhere in the output or the audit.
func TestRunCLI_Vercel(t *testing.T) {
	const token = "vercel_cli_canary_token_8d7c6b5a49382716"
	srv := vercelserver.NewTestServer(t, token)
	t.Setenv(vercel.EnvOIDCToken, "")
	t.Setenv(vercel.EnvToken, token)
	t.Setenv(vercel.EnvAPIURL, srv.URL)
	cpu, mem := 1.0, int64(2048)
	session := "s-vercel-" + runID
	spec, sum := specFile(t, "acme", session, func(x *inputs.Template) {
		x.Backend = "vercel://" + vercelserver.TestTeam + "/" + vercelserver.TestProject
		x.Image, x.Caps = "node22", model.CapsRequest{CPU: &cpu, MemoryMB: &mem}
	})
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	code, out, errOut := cli(t, "", "run", "--spec", spec, "--spec-sha256", sum, "--tenant", "acme", "--session", session,
		"--audit", audit, "--", "sh", "-c", "echo hello from vercel; echo oops >&2; exit 3")
	if code != 3 || out != "hello from vercel\n" || !strings.Contains(errOut, "oops\n") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	var id string
	for _, r := range auditLines(t, audit) {
		if r["event"] == "created" {
			id, _ = r["sandbox_id"].(string)
		}
		if v, ok := r["blocked_egress"]; ok && v != nil {
			t.Errorf("blocked_egress %v, want null (Vercel does not report it)", v)
		}
	}
	rec, ok := srv.Observe(id)
	if !ok || rec.Ended != "stopped" || !rec.Deleted || rec.Tags[model.LabelTenantID] != "acme" || rec.NetworkMode != "deny-all" {
		t.Errorf("audit sandbox_id %q: the server's record %+v (want the Vercel sandbox, deny-all, stopped and deleted at close)", id, rec)
	}
	data, _ := os.ReadFile(audit)
	for what, s := range map[string]string{"stdout": out, "stderr": errOut, "audit": string(data)} {
		if strings.Contains(s, token) {
			t.Errorf("the Vercel token leaked into %s", what)
		}
	}
	if len(srv.Running()) != 0 {
		t.Errorf("sandboxes left running: %v", srv.Running())
	}
}
