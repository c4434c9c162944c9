package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The canary: a secret value that must reach the sandbox and nothing else.
// Terraform sees only the secret's name; the value is in the environment of
// terraform (as a careless CI would have it) and of the CLI. It must be
// absent from the state, the plan JSON, terraform's TF_LOG=trace output, the
// CLI's output and error text, and the audit records, and present inside the
// sandbox.
func TestCanary_SecretReachesOnlyTheSandbox(t *testing.T) {
	if os.Getenv("TF_ACC") == "" {
		t.Skip("TF_ACC is not set: the Terraform CLI tests are skipped (make test sets it)")
	}
	needDocker(t)
	x := newE2E(t)
	canary := "CANARY-s3cr3t-" + runID
	dir := t.TempDir()
	writeFile(t, dir, "main.tf", `
terraform {
  required_providers {
    sandboxio = { source = "sandboxio/sandboxio" }
  }
}
provider "sandboxio" {
  default_backend = "docker://"
}
resource "sandboxio_template" "t" {
  name             = "canary"
  image            = "sandboxio/busybox:local"
  timeout_seconds  = 30
  lifetime_seconds = 120
  secret_names     = ["OPENAI_API_KEY"]
  labels           = { test_run = "`+runID+`" }
}
data "sandboxio_tenant_sandbox" "acme" {
  template_spec = sandboxio_template.t.spec
  tenant_id     = "acme"
  session_id    = "canary"
}
output "spec" { value = data.sandboxio_tenant_sandbox.acme.spec }
output "spec_sha256" { value = data.sandboxio_tenant_sandbox.acme.spec_sha256 }
`)
	var everything bytes.Buffer // what must not hold the canary, with where it came from
	tf := func(args ...string) []byte {
		t.Helper()
		cmd := x.terraformCmd(dir, args...)
		cmd.Env = append(cmd.Env, "OPENAI_API_KEY="+canary, "TF_LOG=trace")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("terraform %v: %v\n%s\n%s", args, err, out.String(), tail(errb.String(), 3000))
		}
		if !strings.Contains(errb.String(), "[TRACE]") {
			t.Fatalf("terraform %v: no trace output; TF_LOG=trace did not apply", args)
		}
		everything.WriteString("\n== terraform " + strings.Join(args, " ") + " (stdout, then TF_LOG=trace stderr)\n")
		everything.Write(out.Bytes())
		everything.Write(errb.Bytes())
		return out.Bytes()
	}
	t.Cleanup(func() {
		cmd := x.terraformCmd(dir, "destroy", "-auto-approve", "-no-color")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("terraform destroy: %v\n%s", err, out)
		}
	})

	tf("plan", "-out=tfplan", "-no-color")
	tf("show", "-json", "tfplan")
	tf("apply", "-auto-approve", "-no-color", "tfplan")
	tf("show", "-json")
	state, err := os.ReadFile(filepath.Join(dir, "terraform.tfstate"))
	if err != nil {
		t.Fatal(err)
	}
	everything.WriteString("\n== terraform.tfstate\n")
	everything.Write(state)
	spec := strings.TrimSpace(string(tf("output", "-raw", "spec")))
	sum := strings.TrimSpace(string(tf("output", "-raw", "spec_sha256")))
	if !strings.Contains(spec, `"secret_names":["OPENAI_API_KEY"]`) {
		t.Fatalf("spec: %s", spec)
	}
	specPath := writeFile(t, dir, "spec.json", spec)
	audit := filepath.Join(dir, "audit.jsonl")

	t.Setenv("OPENAI_API_KEY", canary)
	want := sha256.Sum256([]byte(canary))
	code, out, errOut := cli(t, "", "run", "--spec", specPath, "--spec-sha256", sum, "--tenant", "acme", "--session", "canary", "--audit", audit,
		"--", "sh", "-c", `test "$OPENAI_API_KEY" = "`+canary+`" && echo present
printf %s "$OPENAI_API_KEY" | sha256sum
echo "stderr sees $OPENAI_API_KEY" >&2
echo "in the container's own environment: $(tr '\0' '\n' </proc/1/environ | grep -c OPENAI_API_KEY)"`)
	everything.WriteString("\n== sandboxio run stdout\n" + out + "\n== sandboxio run stderr\n" + errOut)
	if code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "present\n"+hex.EncodeToString(want[:])) {
		t.Fatalf("the secret did not reach the sandbox:\n%s", out)
	}
	if !strings.Contains(out, "in the container's own environment: 0") {
		t.Fatalf("the secret is in the container's configuration:\n%s", out)
	}
	if !strings.Contains(errOut, "stderr sees [REDACTED]") {
		t.Fatalf("stderr: %s", errOut)
	}
	if _, set := os.LookupEnv("OPENAI_API_KEY"); set {
		t.Fatalf("the CLI left the secret in its environment")
	}

	// A failure on the way: the error text holds no value either.
	t.Setenv("OPENAI_API_KEY", canary)
	code, out, errOut = cli(t, "", "run", "--spec", specPath, "--tenant", "acme", "--session", "canary", "--audit", audit, "--timeout", callBudget,
		"--", "sh", "-c", "sleep 60 # "+canary)
	everything.WriteString("\n== sandboxio run (timeout) stdout\n" + out + "\n== stderr\n" + errOut)
	if code != exitExecTimeout {
		t.Fatalf("timeout: exit %d\n%s", code, errOut)
	}
	t.Setenv("OPENAI_API_KEY", canary)
	code, _, errOut = cli(t, "", "run", "--spec", specPath, "--tenant", "globex", "--session", "canary", "--audit", audit, "--", "echo", canary)
	everything.WriteString("\n== sandboxio run (refused) stderr\n" + errOut)
	if code != exitConfiguration {
		t.Fatalf("refusal: exit %d\n%s", code, errOut)
	}

	auditText, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	everything.WriteString("\n== audit\n")
	everything.Write(auditText)
	if n := strings.Count(string(auditText), "\n"); n != 7 {
		t.Fatalf("want 7 audit records (created, exec, killed, created, timeout, killed, refused), got %d:\n%s", n, auditText)
	}
	if !strings.Contains(string(auditText), `= \"[REDACTED]\" && echo present`) {
		t.Fatalf("the command line in the audit record is not redacted:\n%s", auditText)
	}
	if i := strings.Index(everything.String(), canary); i >= 0 {
		s := everything.String()
		from := strings.LastIndex(s[:i], "\n== ")
		t.Fatalf("the canary leaked in %s:\n…%s…", strings.SplitN(s[from+1:], "\n", 2)[0], s[max(0, i-300):min(len(s), i+100)])
	}
	t.Logf("checked %d bytes of Terraform state, plan JSON, trace logs, CLI output and audit records", everything.Len())
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
