package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	daytonaserver "github.com/sandboxio/terraform-provider-sandboxio/internal/fakes/daytona"
	backendtest "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/conformance"
)

// TestCanary_DaytonaCredentials: DAYTONA_API_KEY never appears in
// terraform's TF_LOG=trace output, the state or the plan (a configuration
// with a Daytona template, the key in terraform's environment as a careless
// CI would have it), nor in the CLI's output, its error text (a refused key,
// a failing Daytona, a command past its timeout) or the audit records,
// against the local Daytona server. The toolbox takes the same key, so it
// is the one credential.
func TestCanary_DaytonaCredentials(t *testing.T) {
	srv := daytonaServer(t)
	session := "s-dtn-canary-" + runID
	var everything bytes.Buffer // what must hold no credential, by where it came from
	specPath, sum := daytonaCanarySpec(t, session, &everything)
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	run := func(what string, wantCode int, args ...string) string {
		t.Helper()
		full := append([]string{"run", "--spec", specPath, "--spec-sha256", sum, "--tenant", "acme", "--session", session, "--audit", audit}, args...)
		code, out, errOut := cli(t, "", full...)
		everything.WriteString("\n== sandboxio run (" + what + ") stdout\n" + out + "\n== stderr\n" + errOut)
		if code != wantCode && (wantCode != -1 || code != exitExecTimeout && code != exitCreateTimeout) {
			t.Fatalf("%s: exit %d, want %d\nstdout: %s\nstderr: %s", what, code, wantCode, out, errOut)
		}
		return errOut
	}
	run("ok", 0, "--", "sh", "-c", "echo hello from daytona")
	// A command past its timeout (or, on a loaded host, a create past it:
	// the open shares the bound): the error text is checked either way.
	run("timeout", -1, "--timeout", callBudget, "--", "sleep", "60")
	// Daytona failing every create: the error names the status, not the key.
	srv.Inject(backendtest.Fault{Op: backendtest.OpCreate, Status: 503, Times: 1000})
	if errOut := run("Daytona failing", exitBackend, "--timeout", callBudget, "--", "true"); !strings.Contains(errOut, "503") {
		t.Errorf("a failing Daytona: the error does not name the status: %s", errOut)
	}
	srv.Clear()
	// Daytona refusing the key (401): ConfigurationError naming the
	// variable, not its value.
	srv.Inject(backendtest.Fault{Op: backendtest.OpCreate, Status: 401, Times: 1000})
	if errOut := run("refused key", exitConfiguration, "--", "true"); !strings.Contains(errOut, "DAYTONA_API_KEY") {
		t.Errorf("a refused key: the error does not name DAYTONA_API_KEY: %s", errOut)
	}
	srv.Clear()

	data, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	everything.WriteString("\n== audit\n")
	everything.Write(data)
	n := 0
	for _, r := range auditLines(t, audit) {
		if id, _ := r["sandbox_id"].(string); r["event"] == "created" {
			if _, ok := srv.Observe(id); !ok {
				t.Fatalf("the audit's sandbox %q is not one the server made", id)
			}
			n++
		}
	}
	if n < 1 {
		t.Fatalf("no created sandbox in the audit:\n%s", data)
	}
	all := everything.String()
	if i := strings.Index(all, daytonaTestKey); i >= 0 {
		from := strings.LastIndex(all[:i], "\n== ")
		t.Errorf("DAYTONA_API_KEY leaked in %s: …%s…", strings.SplitN(all[from+1:], "\n", 2)[0], all[max(0, i-200):min(len(all), i+80)])
	}
	t.Logf("checked %d bytes for the key", everything.Len())
}

// daytonaCanarySpec is the tenant spec of a Daytona template: rendered by
// terraform with TF_LOG=trace and the key in its environment when TF_ACC is
// set (its output goes to everything), else by the same code in process.
func daytonaCanarySpec(t *testing.T, session string, everything *bytes.Buffer) (string, string) {
	t.Helper()
	if os.Getenv("TF_ACC") == "" {
		t.Log("TF_ACC is not set: the terraform part (TF_LOG=trace) is skipped; the spec is rendered in process")
		return daytonaSpecFile(t, session)
	}
	x := newE2E(t)
	dir := t.TempDir()
	writeFile(t, dir, "main.tf", `
terraform {
  required_providers {
    sandboxio = { source = "sandboxio/sandboxio" }
  }
}
provider "sandboxio" {
  default_backend = "daytona://"
}
resource "sandboxio_template" "t" {
  name             = "daytona-canary"
  image            = "`+daytonaserver.TestSnapshot+`"
  timeout_seconds  = 30
  lifetime_seconds = 120
  labels           = { test_run = "`+runID+`" }
}
data "sandboxio_tenant_sandbox" "acme" {
  template_spec = sandboxio_template.t.spec
  tenant_id     = "acme"
  session_id    = "`+session+`"
}
data "sandboxio_backend" "daytona" {
  dsn = "daytona://"
}
output "spec" { value = data.sandboxio_tenant_sandbox.acme.spec }
output "spec_sha256" { value = data.sandboxio_tenant_sandbox.acme.spec_sha256 }
`)
	tf := func(args ...string) []byte {
		t.Helper()
		cmd := x.terraformCmd(dir, args...)
		cmd.Env = append(cmd.Env, "TF_LOG=trace") // DAYTONA_API_KEY and DAYTONA_API_URL are in the test's environment
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
	state, err := os.ReadFile(filepath.Join(dir, "terraform.tfstate"))
	if err != nil {
		t.Fatal(err)
	}
	everything.WriteString("\n== terraform.tfstate\n")
	everything.Write(state)
	spec := strings.TrimSpace(string(tf("output", "-raw", "spec")))
	sum := strings.TrimSpace(string(tf("output", "-raw", "spec_sha256")))
	if !strings.Contains(spec, `"backend":"daytona://"`) {
		t.Fatalf("spec: %s", spec)
	}
	return writeFile(t, dir, "spec.json", spec), sum
}
