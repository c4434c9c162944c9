package main

import (
	"bytes"
	"errors"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/analysers"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/testing/tools"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The MCP recipe, run as the guide says: terraform apply on examples/mcp
// (the real Terraform CLI and the provider built from this tree), then its
// agent (examples/mcp/agent) against `sandboxio mcp` opened from the
// rendered spec and its sha256. The agent checks the summary against the
// data it shipped and exits non-zero otherwise; here, the secret's value is
// in none of its output, and the sandbox is gone once it disconnected.
func TestExampleMCPRecipe(t *testing.T) {
	if os.Getenv("TF_ACC") == "" {
		t.Skip("TF_ACC is not set: the Terraform CLI tests are skipped (make test sets it)")
	}
	needDocker(t)
	// Without shellcheck the hook asks for approval, and the recipe has no approver.
	tools.NeedAnalysers(t, analysers.ShellCheck)
	x := newE2E(t)
	root := filepath.Join("..", "..")
	src, err := os.ReadFile(filepath.Join(root, "examples", "mcp", "main.tf"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	session := "mcp-ex-" + runID
	writeFile(t, dir, "main.tf", string(src))
	writeFile(t, dir, "terraform.tfvars", `session = "`+session+`"
labels  = { test_run = "`+runID+`" }
`)
	tf := func(args ...string) string {
		t.Helper()
		out, err := x.terraformCmd(dir, args...).Output()
		if err != nil {
			var stderr []byte
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				stderr = ee.Stderr
			}
			t.Fatalf("terraform %v: %v\n%s\n%s", args, err, out, stderr)
		}
		return string(out)
	}
	t.Cleanup(func() {
		if out, err := x.terraformCmd(dir, "destroy", "-auto-approve", "-no-color").CombinedOutput(); err != nil {
			t.Errorf("terraform destroy: %v\n%s", err, out)
		}
	})
	tf("apply", "-auto-approve", "-no-color", "-input=false")
	spec := writeFile(t, dir, "spec.json", tf("output", "-raw", "tenant_spec"))
	sum := tf("output", "-raw", "tenant_spec_sha256")

	agent := filepath.Join(t.TempDir(), "agent")
	build := exec.Command("go", "build", "-o", agent, "./examples/mcp/agent")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the recipe's agent: %v\n%s", err, out)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	canary := "CANARY-crm-token-" + runID
	cmd := exec.Command(agent, "-sandboxio", exe, "-dir", filepath.Join(root, "examples", "mcp"),
		"-spec", spec, "-spec-sha256", sum, "-tenant", "acme", "-session", session)
	cmd.Env = append(os.Environ(), cliChildEnv+"=1", "SANDBOXIO_TEST_RUN_ID="+runID, "CRM_API_TOKEN="+canary)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the recipe's agent failed: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), tail(stderr.String(), 4000))
	}
	t.Logf("the recipe's agent:\n%s", stdout.String())
	for _, want := range []string{"== run_code result (what the model reads)", "orders: 20000", "token present (",
		"ExecutionBlocked: the call pipes a download into a shell or an interpreter [SBX-EXE-001"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("the agent's output lacks %q:\n%s", want, stdout.String())
		}
	}
	if strings.Contains(stdout.String()+stderr.String(), canary) {
		t.Error("the secret's value is in the agent's output or the server's stderr")
	}
	waitGone(t, "sandboxio.session_id="+session)
}
