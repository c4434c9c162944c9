package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/modal"
	modalserver "github.com/sandboxio/terraform-provider-sandboxio/internal/fakes/modal"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// `sandboxio run --spec` opens, runs and closes on Modal through the same
// CLI, against the local conformance server. The audit names Modal's
// sandbox ID, blocked_egress stays null (Modal reports none), and neither
// the output nor the audit holds the token or the secret.
func TestRunOnModal(t *testing.T) {
	s := modalserver.StartForTest(t)
	s.SetEnv(t)
	const secret = "sk-modal-cli-canary-6b2f0e91"
	t.Setenv("OPENAI_API_KEY", secret)
	spec, _ := specFile(t, "acme", "modal-cli", func(tpl *inputs.Template) {
		tpl.Backend = "modal://" + modalserver.TestApp
		tpl.Caps.DiskMB = nil
		tpl.SecretNames = []string{"OPENAI_API_KEY"}
	})
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	code, out, errOut := cli(t, "", "run", "--spec", spec, "--tenant", "acme", "--session", "modal-cli", "--audit", audit,
		"--", "sh", "-c", `echo "hello from modal"; echo "$OPENAI_API_KEY" | wc -c; exit 4`)
	if code != 4 || !strings.Contains(out, "hello from modal\n") || !strings.Contains(out, "29\n") {
		t.Fatalf("run: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	recs := s.Sandboxes()
	if len(recs) != 1 || recs[0].Tags["sandboxio.tenant_id"] != "acme" {
		t.Fatalf("the server saw %+v", recs)
	}
	b, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	log := string(b)
	if !strings.Contains(log, recs[0].ID) || !strings.Contains(log, `"blocked_egress":null`) {
		t.Fatalf("the audit does not name Modal's sandbox %s with blocked_egress null:\n%s", recs[0].ID, log)
	}
	for _, leak := range []string{secret, modalserver.TestTokenSecret, modalserver.TestTokenID} {
		if strings.Contains(out+errOut+log, leak) {
			t.Fatalf("%q leaked into the output or audit:\n%s\n%s\n%s", leak, out, errOut, log)
		}
	}
	// Closed: the sandbox was terminated when the run ended.
	if r, _ := s.Sandbox(recs[0].ID); r.ID == "" || s.CountCalls("SandboxTerminate") == 0 {
		t.Fatalf("the sandbox was not terminated: %+v", s.Calls())
	}
}

// Tenant-scoped storage: one template naming a volume, opened through the
// CLI for two tenants against the conformance server. Each tenant's
// sandboxes mount that tenant's own Modal Volume: what tenant A writes,
// tenant B's sandbox cannot read (checked inside the sandbox), and A's next
// session finds it.
func TestRunOnModalTenantVolumes(t *testing.T) {
	s := modalserver.StartForTest(t)
	s.SetEnv(t)
	timeout, lifetime := int64(30), int64(120)
	// Its own DSN (an environment): the CLI's process shares one backend per
	// DSN, and another test's backend talks to that test's server.
	tpl := inputs.Template{Name: "vols", Backend: "modal://" + modalserver.TestApp + "?environment=" + modalserver.TestEnvironment, Image: modalserver.Image,
		TimeoutSeconds: &timeout, LifetimeSeconds: &lifetime, Volume: &model.Volume{Name: "datasets", MountPath: "/data"}}
	spec, _, err := tpl.Build("")
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := spec.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "template.json")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	// The command's stdout and stderr; the CLI's own notes are not mixed in.
	sh := func(tenant, session, script string) (int, string) {
		t.Helper()
		code, out, _ := cli(t, "", "run", "--spec", file, "--tenant", tenant, "--session", session, "--", "sh", "-c", "{ "+script+"; } 2>&1")
		return code, out
	}
	if code, out := sh("acme", "s1", `echo acme-private > /data/notes.txt && ls -A /data`); code != 0 || out != "notes.txt\n" {
		t.Fatalf("tenant acme writes: exit %d: %s", code, out)
	}
	code, out := sh("globex", "s1", `ls -A /data; cat /data/notes.txt; echo globex-own > /data/globex.txt`)
	if code != 0 || strings.Contains(out, "acme-private") || strings.Contains(out, "notes.txt\n") || !strings.Contains(out, "No such file") {
		t.Fatalf("tenant globex sees acme's volume: exit %d: %s", code, out)
	}
	if code, out := sh("acme", "s2", `cat /data/notes.txt; ls -A /data`); code != 0 || out != "acme-private\nnotes.txt\n" {
		t.Fatalf("tenant acme's next session: exit %d: %s", code, out)
	}
	// Vendor side: each sandbox mounted its tenant's own volume at /data.
	byTenant := map[string]map[string]bool{}
	for _, r := range s.Sandboxes() {
		tenant := r.Tags["sandboxio.tenant_id"]
		if byTenant[tenant] == nil {
			byTenant[tenant] = map[string]bool{}
		}
		byTenant[tenant][r.Volumes["/data"]] = true
	}
	a, g := byTenant["acme"], byTenant["globex"]
	if len(a) != 1 || len(g) != 1 || a[""] || g[""] {
		t.Fatalf("volumes mounted per tenant: %v", byTenant)
	}
	for id := range a {
		if g[id] {
			t.Fatalf("both tenants mounted volume %s", id)
		}
	}
	for _, tenant := range []string{"acme", "globex"} {
		if _, ok := s.VolumeDir(modalserver.TestEnvironment, modal.TenantVolumeName("datasets", tenant)); !ok {
			t.Fatalf("no volume %s for tenant %s", modal.TenantVolumeName("datasets", tenant), tenant)
		}
	}
	if _, ok := s.VolumeDir(modalserver.TestEnvironment, "datasets"); ok {
		t.Fatal("the template's volume name itself was created: it would be shared")
	}
}

// The same template on Docker is refused before anything is created: Docker
// would share the volume between tenants (SBX-VOL-001).
func TestRunVolumeRefusedOnDocker(t *testing.T) {
	timeout, lifetime := int64(30), int64(120)
	tpl := inputs.Template{Name: "vols", Backend: "docker://", Image: modalserver.Image,
		TimeoutSeconds: &timeout, LifetimeSeconds: &lifetime, Volume: &model.Volume{Name: "datasets", MountPath: "/data"}}
	spec, _, err := tpl.Build("")
	if err != nil {
		t.Fatal(err)
	}
	b, _, _ := spec.Canonical()
	file := filepath.Join(t.TempDir(), "template.json")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := cli(t, "", "run", "--spec", file, "--tenant", "acme", "--session", "s1", "--", "true")
	if code == 0 || !strings.Contains(errOut, rules.VolUnscoped) || !strings.Contains(errOut, "CapabilityNotSupported") {
		t.Fatalf("a volume on Docker: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
}

// The Modal token canary: terraform plans and applies a Modal template (the
// apply's live check authenticates to the conformance server with it) at
// TF_LOG=trace, then the CLI opens, runs and closes a sandbox from its spec,
// and a second run fails for a wrong secret. Neither the token id nor the
// secret (nor the wrong one) appears in the trace logs, the plan JSON, the
// state, the CLI's output and errors, or the audit records.
func TestCanary_ModalTokenNeverLeaks(t *testing.T) {
	x := newE2E(t)
	tokenID, secret := "ak-CANARYid-"+runID, "as-CANARYsecret-"+runID
	wrong := "as-CANARYwrong-" + runID
	s := modalserver.StartForTestWith(t, tokenID, secret)
	dir := t.TempDir()
	writeFile(t, dir, "main.tf", `
terraform {
  required_providers {
    sandboxio = { source = "sandboxio/sandboxio" }
  }
}
resource "sandboxio_template" "t" {
  name             = "modal-canary"
  backend          = "modal://`+modalserver.TestApp+`"
  image            = "`+modalserver.Image+`"
  timeout_seconds  = 30
  lifetime_seconds = 120
  volume           = { name = "datasets", mount_path = "/data" }
}
data "sandboxio_tenant_sandbox" "acme" {
  template_spec = sandboxio_template.t.spec
  tenant_id     = "acme"
  session_id    = "modal-canary"
}
output "spec" { value = data.sandboxio_tenant_sandbox.acme.spec }
`)
	var everything bytes.Buffer
	tf := func(args ...string) []byte {
		t.Helper()
		cmd := x.terraformCmd(dir, args...)
		for k, v := range s.Env() {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		cmd.Env = append(cmd.Env, "TF_LOG=trace")
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
	tf("plan", "-out=tfplan", "-no-color")
	tf("show", "-json", "tfplan")
	tf("apply", "-auto-approve", "-no-color", "tfplan")
	tf("show", "-json")
	if s.CountCalls("AuthTokenGet") == 0 || s.CountCalls("AppGetOrCreate") == 0 {
		t.Fatalf("the apply's live check did not authenticate to the server: %+v", s.Calls())
	}
	state, err := os.ReadFile(filepath.Join(dir, "terraform.tfstate"))
	if err != nil {
		t.Fatal(err)
	}
	everything.WriteString("\n== terraform.tfstate\n")
	everything.Write(state)
	specPath := writeFile(t, dir, "spec.json", strings.TrimSpace(string(tf("output", "-raw", "spec"))))

	audit := filepath.Join(dir, "audit.jsonl")
	s.SetEnv(t)
	code, out, errOut := cli(t, "", "run", "--spec", specPath, "--tenant", "acme", "--session", "modal-canary", "--audit", audit,
		"--", "sh", "-c", "echo ran; ls -d /data")
	everything.WriteString("\n== sandboxio run stdout\n" + out + "\n== stderr\n" + errOut)
	if code != 0 || out != "ran\n/data\n" {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	t.Setenv("MODAL_TOKEN_SECRET", wrong)
	// Another environment of the server: a backend of its own, so the
	// wrong secret is what it connects with.
	code, out, errOut = cli(t, "", "run", "--spec", modalSpecFor(t, dir, modalserver.TestEnvironment), "--tenant", "acme", "--session", "wrong",
		"--audit", audit, "--", "true")
	everything.WriteString("\n== sandboxio run (wrong secret) stdout\n" + out + "\n== stderr\n" + errOut)
	if code == 0 || !strings.Contains(errOut, "MODAL_TOKEN_SECRET") {
		t.Fatalf("a wrong secret: exit %d\n%s\n%s", code, out, errOut)
	}
	auditText, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	everything.WriteString("\n== audit\n")
	everything.Write(auditText)
	for _, canary := range []string{secret, tokenID, wrong} {
		if i := strings.Index(everything.String(), canary); i >= 0 {
			all := everything.String()
			from := strings.LastIndex(all[:i], "\n== ")
			t.Fatalf("%q leaked in %s:\n…%s…", canary, strings.SplitN(all[from+1:], "\n", 2)[0], all[max(0, i-300):min(len(all), i+100)])
		}
	}
	t.Logf("checked %d bytes of Terraform state, plan JSON, trace logs, CLI output and audit records", everything.Len())
}

// modalSpecFor writes a template spec for the Modal server in another
// environment.
func modalSpecFor(t *testing.T, dir, environment string) string {
	t.Helper()
	timeout, lifetime := int64(30), int64(120)
	tpl := inputs.Template{Name: "modal-canary", Backend: "modal://" + modalserver.TestApp + "?environment=" + environment,
		Image: modalserver.Image, TimeoutSeconds: &timeout, LifetimeSeconds: &lifetime}
	spec, _, err := tpl.Build("")
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := spec.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, dir, "spec-"+environment+".json", string(b))
}
