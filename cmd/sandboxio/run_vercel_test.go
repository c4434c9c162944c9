package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/vercel"
	vercelserver "github.com/sandboxio/terraform-provider-sandboxio/internal/fakes/vercel"
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
	// The error paths (one server per process: the CLI keeps the backend
	// it opened on this DSN, with this token and URL): a command past its
	// timeout, Vercel failing every create, Vercel refusing the token.
	texts := map[string]string{"stdout": out, "stderr": errOut}
	fail := func(what string, want int, args ...string) string {
		t.Helper()
		full := append([]string{"run", "--spec", spec, "--spec-sha256", sum, "--tenant", "acme", "--session", session, "--audit", audit}, args...)
		code, o, e := cli(t, "", full...)
		texts[what+" stdout"], texts[what+" stderr"] = o, e
		if code != want && (want != -1 || code != exitExecTimeout && code != exitCreateTimeout) {
			t.Fatalf("%s: exit %d, want %d\nstdout: %s\nstderr: %s", what, code, want, o, e)
		}
		return e
	}
	fail("timeout", -1, "--timeout", callBudget, "--", "sleep", "60")
	srv.Inject(vercelserver.Fault{Op: vercelserver.OpCreate, Status: 503, Times: 1000})
	if e := fail("Vercel failing", exitBackend, "--timeout", callBudget, "--", "true"); !strings.Contains(e, "503") {
		t.Errorf("a failing Vercel: the error does not name the status: %s", e)
	}
	srv.Inject(vercelserver.Fault{Op: vercelserver.OpCreate, Status: 401, Times: 1000})
	if e := fail("refused token", exitConfiguration, "--", "true"); !strings.Contains(e, vercel.EnvToken) {
		t.Errorf("a refused token: the error does not name %s: %s", vercel.EnvToken, e)
	}
	srv.Clear()
	vercelTerraformTrace(t, texts)
	data, _ := os.ReadFile(audit)
	texts["audit"] = string(data)
	checked := 0
	for what, s := range texts {
		checked += len(s)
		if strings.Contains(s, token) {
			t.Errorf("the Vercel token leaked into %s", what)
		}
	}
	t.Logf("checked %d bytes for the token", checked)
	if len(srv.Running()) != 0 {
		t.Errorf("sandboxes left running: %v", srv.Running())
	}
}

// vercelTerraformTrace plans and applies a Vercel template with
// TF_LOG=trace and the token in terraform's environment (as a careless CI
// would have it), adding the trace output, plan JSON and state to texts.
// Skipped without TF_ACC.
func vercelTerraformTrace(t *testing.T, texts map[string]string) {
	t.Helper()
	if os.Getenv("TF_ACC") == "" {
		t.Log("TF_ACC is not set: the terraform part (TF_LOG=trace) is skipped")
		return
	}
	x := newE2E(t)
	dir := t.TempDir()
	writeFile(t, dir, "main.tf", `
terraform {
  required_providers {
    sandboxio = { source = "sandboxio/sandboxio" }
  }
}
resource "sandboxio_template" "t" {
  name             = "vercel-canary"
  backend          = "vercel://`+vercelserver.TestTeam+"/"+vercelserver.TestProject+`"
  image            = "node22"
  timeout_seconds  = 30
  lifetime_seconds = 120
  resources        = { cpu = 1, memory_mb = 2048 }
}
output "spec" { value = sandboxio_template.t.spec }
`)
	tf := func(args ...string) {
		t.Helper()
		cmd := x.terraformCmd(dir, args...)
		cmd.Env = append(cmd.Env, "TF_LOG=trace") // the token and API URL are in the test's environment
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("terraform %v: %v\n%s", args, err, tail(string(out), 3000))
		}
		if !strings.Contains(string(out), "[TRACE]") {
			t.Fatalf("terraform %v: no trace output; TF_LOG=trace did not apply", args)
		}
		texts["terraform "+strings.Join(args, " ")] = string(out)
	}
	t.Cleanup(func() {
		if out, err := x.terraformCmd(dir, "destroy", "-auto-approve", "-no-color").CombinedOutput(); err != nil {
			t.Errorf("terraform destroy: %v\n%s", err, out)
		}
	})
	tf("plan", "-out=tfplan", "-no-color")
	tf("show", "-json", "tfplan")
	tf("apply", "-auto-approve", "-no-color", "tfplan")
	state, err := os.ReadFile(filepath.Join(dir, "terraform.tfstate"))
	if err != nil {
		t.Fatal(err)
	}
	texts["terraform.tfstate"] = string(state)
	if !strings.Contains(string(state), "vercel://") {
		t.Fatalf("the state holds no Vercel template:\n%s", state)
	}
}
