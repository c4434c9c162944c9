package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/verdict"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// One decision everywhere: the same configuration and team bundle give the
// same decision from `terraform plan` (the real Terraform CLI running the
// provider through dev_overrides, policy_paths and policy_waivers) and from
// `sandboxio policy check` on `terraform show -json` of that plan. The
// run-time helper decides through the same verdict.Check.

// e2e holds a built provider and a Terraform CLI configuration that points
// Terraform at it.
type e2e struct {
	terraform string
	rc        string
	examples  string
}

func newE2E(t *testing.T) *e2e {
	t.Helper()
	if os.Getenv("TF_ACC") == "" {
		t.Skip("TF_ACC is not set: the Terraform CLI tests are skipped (make test sets it)")
	}
	tf := os.Getenv("TF_ACC_TERRAFORM_PATH")
	if tf == "" {
		var err error
		if tf, err = exec.LookPath("terraform"); err != nil {
			t.Fatalf("TF_ACC is set but no terraform binary was found: %v", err)
		}
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go binary to build the provider with: %v", err)
	}
	bin := t.TempDir()
	build := exec.Command(goBin, "build", "-o", filepath.Join(bin, "terraform-provider-sandboxio"), ".")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build provider: %v\n%s", err, out)
	}
	rc := filepath.Join(bin, "terraformrc")
	writeFile(t, bin, "terraformrc", fmt.Sprintf(`provider_installation {
  dev_overrides {
    "sandboxio/sandboxio" = %q
  }
  direct {}
}
`, bin))
	examples, err := filepath.Abs(filepath.Join("..", "..", "examples", "policies"))
	if err != nil {
		t.Fatal(err)
	}
	return &e2e{terraform: tf, rc: rc, examples: examples}
}

func (x *e2e) terraformCmd(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command(x.terraform, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+x.rc, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1")
	return cmd
}

// decision is the set of findings, as "address rule outcome" lines.
type decision struct {
	failed   bool
	findings []string
	messages map[string]string // address -> message of the echo rule
}

var ruleLine = regexp.MustCompile(`(?m)^Rule: (\S+)$`)

// plan runs terraform plan -json on a configuration and reads the
// provider's decision from its diagnostics.
func (x *e2e) plan(t *testing.T, dir string) (decision, bool) {
	t.Helper()
	var stdout bytes.Buffer
	cmd := x.terraformCmd(dir, "plan", "-json", "-input=false", "-out=tfplan")
	cmd.Stdout = &stdout
	err := cmd.Run()
	d := decision{messages: map[string]string{}}
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var line struct {
			Type       string `json:"type"`
			Diagnostic struct {
				Severity, Summary, Detail, Address string
			} `json:"diagnostic"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil || line.Type != "diagnostic" {
			continue
		}
		m := ruleLine.FindStringSubmatch(line.Diagnostic.Detail)
		if m == nil {
			if line.Diagnostic.Severity == "error" {
				t.Fatalf("terraform plan error without a rule: %s: %s", line.Diagnostic.Summary, line.Diagnostic.Detail)
			}
			continue
		}
		outcome := "warn"
		switch {
		case line.Diagnostic.Severity == "error":
			outcome = "fail"
		case strings.HasPrefix(line.Diagnostic.Summary, "Waived "):
			outcome = "waived"
		}
		d.findings = append(d.findings, line.Diagnostic.Address+" "+m[1]+" "+outcome)
		if m[1] == "TEAM-ECHO-001" {
			msg, _, _ := strings.Cut(line.Diagnostic.Detail, "\n\nRule: ")
			d.messages[line.Diagnostic.Address] = msg
		}
	}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		d.failed = true
	default:
		t.Fatalf("terraform plan: %v", err)
	}
	sort.Strings(d.findings)
	return d, !d.failed
}

// check runs `sandboxio policy check` on the plan's JSON.
func (x *e2e) check(t *testing.T, dir string, args ...string) decision {
	t.Helper()
	show := x.terraformCmd(dir, "show", "-json", "tfplan")
	planJSON, err := show.Output()
	if err != nil {
		t.Fatalf("terraform show: %v", err)
	}
	planFile := writeFile(t, dir, "plan.json", string(planJSON))
	code, out, errOut := cli(t, "", append(append([]string{"policy", "check", "--format", "json"}, args...), planFile)...)
	if code == exitUsage {
		t.Fatalf("policy check: %s", errOut)
	}
	var rep struct {
		Resources []struct {
			Address  string
			Findings []struct {
				Rule, Outcome, Message string
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("policy check output: %v\n%s", err, out)
	}
	d := decision{failed: code == exitDenied, messages: map[string]string{}}
	for _, r := range rep.Resources {
		for _, f := range r.Findings {
			d.findings = append(d.findings, r.Address+" "+f.Rule+" "+f.Outcome)
			if f.Rule == "TEAM-ECHO-001" {
				d.messages[r.Address] = f.Message
			}
		}
	}
	sort.Strings(d.findings)
	return d
}

// forAddress returns the rule/outcome pairs of one address, sorted.
func (d decision) forAddress(addr string) string {
	var out []string
	for _, f := range d.findings {
		if rest, ok := strings.CutPrefix(f, addr+" "); ok {
			out = append(out, rest)
		}
	}
	return strings.Join(out, ", ")
}

// helper decides on every template's planned spec as the run-time helper
// does: rendered for a tenant, checked with the same policies and waivers.
func (x *e2e) helper(t *testing.T, dir string, args []string) map[string]string {
	t.Helper()
	var policyDirs []string
	var waivers *verdict.Waivers
	for i := 0; i+1 < len(args); i += 2 {
		switch args[i] {
		case "--policy":
			policyDirs = append(policyDirs, args[i+1])
		case "--waivers":
			w, err := verdict.LoadWaivers(args[i+1])
			if err != nil {
				t.Fatal(err)
			}
			waivers = w
		}
	}
	eng, err := policy.Load(t.Context(), policyDirs)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "plan.json"))
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		ResourceChanges []struct {
			Address, Type string
			Change        struct {
				After map[string]any
			}
		} `json:"resource_changes"`
	}
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, rc := range p.ResourceChanges {
		raw, _ := rc.Change.After["spec"].(string)
		if rc.Type != "sandboxio_template" || raw == "" {
			continue
		}
		spec, err := model.ParseSpec([]byte(raw))
		if err != nil {
			t.Fatalf("%s: %v", rc.Address, err)
		}
		v, err := verdict.CheckSpec(t.Context(), eng, spec.ForTenant("acme", "s-42", nil), verdict.Options{Waivers: waivers, Now: testNow})
		if err != nil {
			t.Fatalf("%s: %v", rc.Address, err)
		}
		var findings []string
		for _, r := range v.Results {
			findings = append(findings, r.ID+" "+string(r.Outcome))
		}
		sort.Strings(findings)
		out[rc.Address] = strings.Join(findings, ", ")
	}
	return out
}

func providerBlock(extra string) string {
	return `terraform {
  required_providers {
    sandboxio = { source = "sandboxio/sandboxio" }
  }
}

provider "sandboxio" {
  default_backend = "docker://"
` + extra + `}
`
}

// resources is the configuration under test: built-in and team findings
// at every level.
const e2eResources = `
resource "sandboxio_network_policy" "open" {
  egress = "allow"                                   # SBX-NET-007, advisory
}

resource "sandboxio_template" "legacy_notebook" {
  name   = "notebook"
  image  = "python:3.12-slim"                        # TEAM-IMG-001, soft-mandatory
  labels = { team = "agents" }
}

resource "sandboxio_template" "agent" {
  name      = "agent"
  image     = "registry.internal.example/agent:1.4"  # TEAM-IMG-002, advisory
  labels    = { team = "agents" }
  resources = { memory_mb = %d }                     # TEAM-MEM-001 above 2048, hard-mandatory
}

resource "sandboxio_template" "pinned" {
  count  = 2
  name   = "pinned-${count.index}"
  image  = "registry.internal.example/tool@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
  labels = { team = "ci" }
}
`

func TestE2E_SameDecisionInPlanAndPolicyCheck(t *testing.T) {
	x := newE2E(t)
	waivers := filepath.Join(x.examples, "waivers.yaml")
	expired := writeFile(t, t.TempDir(), "expired.yaml", `waivers:
  - rule: TEAM-IMG-001
    address: sandboxio_template.legacy_*
    reason: the mirror was due in 2025
    expires: 2025-01-31
`)
	for _, tc := range []struct {
		name     string
		memory   int
		waivers  string
		failed   bool
		contains []string
	}{
		{"waived and advisory", 2048, waivers, false, []string{
			"sandboxio_template.legacy_notebook TEAM-IMG-001 waived", "sandboxio_template.agent TEAM-IMG-002 warn",
			"sandboxio_network_policy.open SBX-NET-007 warn"}},
		{"hard-mandatory team rule", 4096, waivers, true, []string{"sandboxio_template.agent TEAM-MEM-001 fail"}},
		{"expired waiver", 2048, expired, true, []string{"sandboxio_template.legacy_notebook TEAM-IMG-001 fail"}},
		{"no waivers", 2048, "", true, []string{"sandboxio_template.legacy_notebook TEAM-IMG-001 fail"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resources := fmt.Sprintf(e2eResources, tc.memory)
			withTeam := fmt.Sprintf("  policy_paths = [%q]\n", x.examples)
			args := []string{"--policy", x.examples}
			if tc.waivers != "" {
				withTeam += fmt.Sprintf("  policy_waivers = %q\n", tc.waivers)
				args = append(args, "--waivers", tc.waivers)
			}
			dir := t.TempDir()
			writeFile(t, dir, "main.tf", providerBlock(withTeam)+resources)
			byPlan, ok := x.plan(t, dir)
			if !ok {
				// terraform plan refused, so it wrote no plan: plan the same
				// resources with the provider alone (built-in rules only)
				// and let policy check load the team bundle.
				planDir := t.TempDir()
				writeFile(t, planDir, "main.tf", providerBlock("")+resources)
				if _, ok := x.plan(t, planDir); !ok {
					t.Fatal("the configuration is refused even without the team bundle")
				}
				dir = planDir
			}
			byCheck := x.check(t, dir, args...)
			if byPlan.failed != tc.failed || byCheck.failed != tc.failed {
				t.Fatalf("decision: terraform plan failed=%v, policy check failed=%v, want %v", byPlan.failed, byCheck.failed, tc.failed)
			}
			if strings.Join(byPlan.findings, "\n") != strings.Join(byCheck.findings, "\n") {
				t.Fatalf("findings differ\nterraform plan:\n  %s\npolicy check:\n  %s",
					strings.Join(byPlan.findings, "\n  "), strings.Join(byCheck.findings, "\n  "))
			}
			// The third way, as the run-time helper decides before it
			// provisions: each template's planned spec, rendered for a
			// tenant, through verdict.CheckSpec.
			byHelper := x.helper(t, dir, args)
			for addr, got := range byHelper {
				want := byCheck.forAddress(addr)
				if got != want {
					t.Errorf("%s: run-time decision %q, policy check %q", addr, got, want)
				}
			}
			if len(byHelper) == 0 {
				t.Fatal("no template spec in the plan for the run-time check")
			}
			for _, want := range tc.contains {
				found := false
				for _, f := range byPlan.findings {
					found = found || f == want
				}
				if !found {
					t.Errorf("expected finding %q; got %v", want, byPlan.findings)
				}
			}
		})
	}
}

// The provider and policy check build the same input document: a team rule
// that echoes its input (minus the address, which Terraform does not give
// the provider) warns with the same text on both sides.
func TestE2E_SameInputDocument(t *testing.T) {
	x := newE2E(t)
	team := t.TempDir()
	writeFile(t, team, "echo.rego", `package team.echo

# METADATA
# title: echo the input document
# custom:
#   id: TEAM-ECHO-001
#   class: Echo
#   enforcement: advisory
warn contains {"id": "TEAM-ECHO-001", "class": "Echo", "attribute": "", "msg": json.marshal(object.remove(input, ["address"])), "fix": ""} if {
	input.kind != "tenant_sandbox"
}
`)
	dir := t.TempDir()
	writeFile(t, dir, "main.tf", providerBlock(fmt.Sprintf("  policy_paths = [%q]\n", team))+`
resource "sandboxio_network_policy" "deny" {}

resource "sandboxio_network_policy" "e2b" {
  backend = "e2b://"
  allow   = ["pypi.org", "10.0.0.0/8"]
}

resource "sandboxio_resource_caps" "small" {
  memory_mb = 1024
  pids      = 128
}

resource "sandboxio_resource_caps" "defaults" {}

resource "sandboxio_template" "full" {
  name              = "full"
  image             = "python:3.12-slim"
  runtime           = "runsc"
  require_isolation = "GVISOR"
  network           = sandboxio_network_policy.deny.policy
  resources         = sandboxio_resource_caps.small.caps
  timeout_seconds   = 120
  lifetime_seconds  = 600
  env               = { LANG = "C.UTF-8" }
  secret_names      = ["OPENAI_API_KEY"]
  labels            = { team = "agents" }
}

resource "sandboxio_template" "minimal" {
  name  = "minimal"
  image = "img"
}

resource "sandboxio_template" "e2b" {
  for_each = toset(["a", "b"])
  name     = "e2b-${each.key}"
  backend  = "e2b://?request_timeout=30"
  image    = "base"
  network  = { allow = ["pypi.org"] }
}
`)
	byPlan, ok := x.plan(t, dir)
	if !ok {
		t.Fatalf("plan refused: %v", byPlan.findings)
	}
	byCheck := x.check(t, dir, "--policy", team)
	if len(byPlan.messages) != 8 {
		t.Fatalf("the provider echoed %d documents, want 8: %v", len(byPlan.messages), byPlan.findings)
	}
	for addr, doc := range byPlan.messages {
		if byCheck.messages[addr] != doc {
			t.Errorf("%s: input documents differ\nprovider:     %s\npolicy check: %s", addr, doc, byCheck.messages[addr])
		}
	}
	if len(byCheck.messages) != len(byPlan.messages) {
		t.Errorf("policy check echoed %d documents, the provider %d", len(byCheck.messages), len(byPlan.messages))
	}
}
