package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/modal/modalserver"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
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
