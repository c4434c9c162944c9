package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
)

const shaWarning = "warning: the spec was not verified against the plan's spec_sha256; pass --spec-sha256"

// A spec opened without --spec-sha256 is not verified: one line on stderr
// says so and how to pass it; with the flag there is no such line.
func TestRunCLI_WarnsWhenSpecIsNotVerified(t *testing.T) {
	spec, sum := specFile(t, "acme", "s-1")
	// Refused for another tenant, after the warning: no daemon is needed.
	code, out, errOut := cli(t, "", "run", "--spec", spec, "--tenant", "globex", "--session", "s-1", "--", "true")
	if code != exitConfiguration || out != "" || strings.Count(errOut, shaWarning) != 1 ||
		!strings.HasPrefix(errOut, "sandboxio run: "+shaWarning) || !strings.Contains(errOut, `"$(terraform output -raw tenant_spec_sha256)"`) {
		t.Fatalf("without --spec-sha256: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = cli(t, "echo hi", "run-code", "--spec", spec, "--spec-sha256", sum, "--tenant", "globex", "--session", "s-1", "--lang", "sh", "-")
	if code != exitConfiguration || strings.Contains(errOut, "warning") {
		t.Fatalf("with --spec-sha256: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = cli(t, "echo hi", "run-code", "--spec", spec, "--tenant", "globex", "--session", "s-1", "--lang", "sh", "-")
	if code != exitConfiguration || !strings.HasPrefix(errOut, "sandboxio run-code: "+shaWarning) {
		t.Fatalf("run-code without --spec-sha256: exit %d, stderr %q", code, errOut)
	}
}

// What the caller adds beside the spec is refused before anything is
// provisioned: exit 2 for a usage error (nothing opened, nothing audited),
// exit 64 for a refusal, audited as refused, never as created then killed.
// No daemon is needed: nothing reaches it.
func TestRunCLI_CallerRefusalsProvisionNothing(t *testing.T) {
	const secret = "SANDBOXIO_TEST_CLI_SECRET"
	t.Setenv(secret, "value-long-enough-"+runID)
	withSecret, sum := specFile(t, "acme", "s-1", func(x *inputs.Template) { x.SecretNames = []string{secret} })
	plain, plainSum := specFile(t, "acme", "s-1")
	short, shortSum := specFile(t, "acme", "s-1", func(x *inputs.Template) { x.SecretNames = []string{"SANDBOXIO_TEST_SHORT"} })
	t.Setenv("SANDBOXIO_TEST_SHORT", "x")
	for _, tc := range []struct {
		name  string
		args  []string
		code  int
		want  string
		rule  string // of the one refused record; "" for no record at all
		setup func()
	}{
		{"unknown --lang", []string{"run-code", "--spec", plain, "--spec-sha256", plainSum, "--lang", "perl"}, exitUsage,
			`sandboxio run-code: --lang "perl" is not a language run-code runs; use one of bash,`, "", nil},
		{"--env naming a secret", []string{"run", "--spec", withSecret, "--spec-sha256", sum, "--env", secret + "=other", "--", "true"}, exitConfiguration,
			`sandboxio run: ConfigurationError: "` + secret + `" is a secret name`, "SBX-SEC-003", func() { t.Setenv(secret, "value-long-enough-"+runID) }},
		{"--timeout above timeout_seconds", []string{"run", "--spec", plain, "--spec-sha256", plainSum, "--timeout", "60s", "--", "sleep", "40"}, exitConfiguration,
			"sandboxio run: ConfigurationError: the timeout given to open (Request.Timeout, the CLI's --timeout), 1m0s, is longer than the spec's timeout_seconds (30s)", "SBX-RUN-003", nil},
		{"--timeout 800h", []string{"run", "--spec", plain, "--spec-sha256", plainSum, "--timeout", "800h", "--", "true"}, exitConfiguration,
			"fix: pass a timeout of at most 30s", "SBX-RUN-003", nil},
		{"--timeout without a unit", []string{"run", "--spec", plain, "--timeout", "5", "--", "true"}, exitUsage,
			`invalid value "5" for flag -timeout: a duration needs a unit: write e.g. 5s`, "", nil},
		{"--label on a tenant spec", []string{"run", "--spec", plain, "--spec-sha256", plainSum, "--label", "run=r1", "--", "true"}, exitConfiguration,
			"[SBX-RUN-004, attribute labels]", "SBX-RUN-004", nil},
		{"short secret", []string{"run", "--spec", short, "--spec-sha256", shortSum, "--", "true"}, exitConfiguration,
			`sandboxio run: ConfigurationError: secret "SANDBOXIO_TEST_SHORT" has a value of fewer than 8 characters`, "SBX-RUN-002",
			func() { t.Setenv("SANDBOXIO_TEST_SHORT", "x") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.setup != nil {
				tc.setup() // the CLI removes a secret from its environment once read
			}
			audit := filepath.Join(t.TempDir(), "audit.jsonl")
			args := append([]string{tc.args[0], "--tenant", "acme", "--session", "s-1", "--audit", audit}, tc.args[1:]...)
			if tc.args[0] == "run-code" {
				args = append(args, "-")
			}
			code, out, errOut := cli(t, "print(1)", args...)
			if code != tc.code || out != "" || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d and %q", code, out, errOut, tc.code, tc.want)
			}
			if strings.Contains(errOut, "[REDACTED]") || strings.Contains(errOut, "starting docker sandbox") {
				t.Fatalf("stderr: %q", errOut)
			}
			if tc.rule == "" {
				if _, err := os.Stat(audit); err == nil {
					t.Fatalf("a usage error wrote audit records: %v", auditLines(t, audit))
				}
				return
			}
			recs := auditLines(t, audit)
			if len(recs) != 1 || recs[0]["event"] != "refused" || recs[0]["rule"] != tc.rule || recs[0]["sandbox_id"] != nil {
				t.Fatalf("want one refused record of %s, got %v", tc.rule, recs)
			}
		})
	}
}

// The CLI's own usage errors say how to fix them.
func TestCLI_UsageErrorsNameAFix(t *testing.T) {
	planFile := writeFile(t, t.TempDir(), "plan.json", plan("ok", nil))
	missing := filepath.Join(t.TempDir(), "nope.json")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--spec", missing, "--tenant", "acme", "--session", "s-1", "--", "true"},
			"no such file or directory; pass the spec file Terraform rendered (terraform output -raw tenant_spec > spec.json), or - to read it from standard input"},
		{[]string{"run", "--spec", missing, "--tenant", "acme", "--session", "s-1", "--timeout", "garbage", "--", "true"},
			`invalid value "garbage" for flag -timeout: not a duration: write a number with a unit, e.g. 30s`},
		{[]string{"run-code", "--spec", missing, "--tenant", "acme", "--session", "s-1", filepath.Join(t.TempDir(), "gone.py")},
			"no such file or directory; pass the program's file, or - to read it from standard input"},
		{[]string{"policy", "check", "--waivers", filepath.Join(t.TempDir(), "missing.yaml"), planFile},
			"sandboxio policy check: load waivers: ConfigurationError: waivers: open "},
		{[]string{"policy", "check", "--waivers", filepath.Join(t.TempDir(), "missing.yaml"), planFile},
			"[SBX-POL-002, attribute policy_waivers]; fix: Pass a waiver file that exists (YAML or JSON)"},
		{[]string{"policy", "check", missing}, "no such file or directory; pass the JSON of `terraform show -json plan.bin`"},
	} {
		code, out, errOut := cli(t, "", tc.args...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, code, out, errOut, tc.want)
		}
	}
}
