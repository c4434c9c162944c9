package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/policycheck"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/verdict"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

func init() {
	register(&command{
		name:    "policy check",
		summary: "check a Terraform plan (terraform show -json) against the policies",
		usage:   "policy check [--policy DIR]... [--format text|json|sarif|junit] [--fail-on-warn] [--waivers FILE] PLAN.json",
		help: `Checks every sandboxio resource of a Terraform plan against the embedded policy bundle
and the team policies in each --policy directory, as terraform plan does with the
provider's policy_paths: each resource becomes the same input document the provider
builds, and the same rules, enforcement levels and waivers decide.

  terraform plan -out=tfplan
  terraform show -json tfplan > plan.json
  sandboxio policy check --policy ./policies --waivers waivers.yaml plan.json

PLAN.json is the JSON of a plan file ("-" reads standard input). Resources whose
values Terraform knows only at apply are reported as checked at apply (rule
SBX-CHK-001): the provider checks them again then, before anything is stored.

Team rules declare custom.enforcement in their METADATA: advisory findings warn;
soft-mandatory and hard-mandatory findings refuse. Built-in rules are hard-mandatory.
A waiver file (YAML or JSON) lists exceptions to soft-mandatory rules:

  waivers:
    - rule: TEAM-IMG-001                    # a soft-mandatory team rule
      address: module.legacy.sandboxio_template.*   # glob over resource addresses
      reason: legacy images move to the internal registry (TICKET-123)
      expires: 2026-09-30                   # applies through that day (UTC)

Expired waivers stop applying and are reported; waivers of built-in, hard-mandatory
or advisory rules are refused and reported. Every waived finding is reported as
waived, with its reason, in every format.

Formats: text (for people), json (report_version 1), sarif (SARIF 2.1.0: one rule
descriptor per rule ID, results at the resource address as a logical location,
waived findings as accepted suppressions), junit (a test case per resource and rule).
The rule catalogue is docs/policies.md; the input document is described in
docs/guides/policy-input.md.`,
		setup: func(fs *flag.FlagSet) runFunc {
			var c checkFlags
			c.format = choiceFlag{value: "text", choices: policycheck.Formats}
			fs.Var(&c.policies, "policy", "a team policy `DIR`ectory (or .rego file), as in the provider's policy_paths; repeatable")
			fs.Var(&c.format, "format", "output `format`: text, json, sarif or junit")
			fs.BoolVar(&c.failOnWarn, "fail-on-warn", false, "exit 1 on warnings (advisory findings) as well")
			fs.StringVar(&c.waivers, "waivers", "", "waiver `FILE` (YAML or JSON) for soft-mandatory team rules")
			fs.StringVar(&c.output, "output", "", "write the report to `FILE` instead of standard output")
			return c.run
		},
	})
}

type checkFlags struct {
	policies   stringsFlag
	format     choiceFlag
	failOnWarn bool
	waivers    string
	output     string
}

func (c *checkFlags) run(ctx context.Context, e *env, args []string) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(e.stderr, "sandboxio policy check: "+format+"\n", a...)
		return exitUsage
	}
	if len(args) != 1 {
		return fail("want exactly one PLAN.json argument, got %d (run `sandboxio policy check --help`)", len(args))
	}
	name := args[0]
	var data []byte
	var err error
	if name == "-" {
		name = "<stdin>"
		data, err = io.ReadAll(e.stdin)
	} else {
		data, err = os.ReadFile(name)
	}
	if err != nil {
		return fail("read plan: %v; pass the JSON of `terraform show -json plan.bin` (or - for standard input)", err)
	}
	eng, err := policy.Load(ctx, c.policies)
	if err != nil {
		return fail("load policies: %v", err)
	}
	opts := policycheck.Options{Now: e.now()}
	if c.waivers != "" {
		if opts.Waivers, err = verdict.LoadWaivers(c.waivers); err != nil {
			// As the provider and `sandboxio run` report it.
			return fail("load waivers: %v", &model.Error{Class: model.ConfigurationError, Rule: "SBX-POL-002", Attribute: "policy_waivers",
				Message: err.Error(), Fix: "pass an existing waiver file (YAML or JSON) and fix the waiver the message names; see `sandboxio policy check --help` for the format"})
		}
	}
	rep, err := policycheck.Check(ctx, eng, name, data, opts)
	if err != nil {
		// A malformed plan (*policycheck.InputError) names the file and
		// what is wrong with it.
		return fail("%v", err)
	}
	c.warnIfNotProviderPolicies(e, rep)
	out := e.stdout
	if c.output != "" {
		f, err := os.Create(c.output)
		if err != nil {
			return fail("write report: %v", err)
		}
		defer f.Close()
		out = f
	}
	if err := policycheck.Render(out, rep, policycheck.RenderOptions{Format: c.format.value, FailOnWarn: c.failOnWarn, Version: versionInfo().Version}); err != nil {
		return fail("write report: %v", err)
	}
	if !rep.Passed(c.failOnWarn) {
		return exitDenied
	}
	return exitOK
}

// warnIfNotProviderPolicies says when the plan's provider loads other team
// policies or waivers than this check: the two would not decide alike.
func (c *checkFlags) warnIfNotProviderPolicies(e *env, rep *policycheck.Report) {
	clean := func(ps []string) []string {
		out := make([]string, len(ps))
		for i, p := range ps {
			out[i] = filepath.Clean(p)
		}
		slices.Sort(out)
		return out
	}
	if rep.ProviderPolicyPaths != nil && !slices.Equal(clean(rep.ProviderPolicyPaths), clean(c.policies)) {
		fmt.Fprintf(e.stderr, "sandboxio policy check: note: the plan's provider sets policy_paths = [%s] but this check loads [%s]; "+
			"pass the same directories with --policy to decide as terraform plan does\n",
			strings.Join(rep.ProviderPolicyPaths, ", "), strings.Join(c.policies, ", "))
	}
	if rep.ProviderWaivers != "" && filepath.Clean(rep.ProviderWaivers) != filepath.Clean(c.waivers) {
		fmt.Fprintf(e.stderr, "sandboxio policy check: note: the plan's provider sets policy_waivers = %q but this check reads %q\n",
			rep.ProviderWaivers, c.waivers)
	}
}
