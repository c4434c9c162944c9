package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/boundedfile"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/policycheck"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/verdict"
)

func init() {
	register(&command{
		name:    "policy check",
		summary: "check a Terraform plan (terraform show -json) against the policies",
		usage:   "policy check [--policy DIR]... [--format text|json|sarif|junit] [--fail-on-warn] [--fail-on-deferred] [--waivers FILE] [--max-input-mib N] PLAN.json",
		help: `Checks every sandboxio resource of a Terraform plan against the embedded policy bundle
and the team policies in each --policy directory, as terraform plan does with the
provider's policy_paths: each resource becomes the same input document the provider
builds, and the same rules, enforcement levels and waivers decide.

  terraform plan -out=tfplan
  terraform show -json tfplan > plan.json
  sandboxio policy check --policy ./policies --waivers waivers.yaml plan.json

PLAN.json is the JSON of a plan file ("-" reads standard input). Every sandboxio
resource of the plan is reported: the managed resources it creates, updates or
keeps, the data sources Terraform reads during the plan (prior_state) or at apply.
Resources whose values Terraform knows only at apply are reported as checked at
apply (rule SBX-CHK-001): the provider checks them again then, before anything is
stored; --fail-on-deferred fails the check on them (exit 3), for CI that must decide
at plan. A sandboxio resource the check does not decide on (being deleted, deferred
by Terraform to a later plan, left out of a -target plan, data.sandboxio_backend,
or a type this build has no rules for) is reported as not checked (SBX-CHK-002),
in every format.

Inputs are bounded: the plan, every --policy file and the waiver file must be
regular files (no devices, FIFOs or sockets) of at most --max-input-mib MiB (64 by
default), checked before they are read; standard input stops at the same limit.
A plan whose JSON holds a key twice in any object is refused (exit 2), with the key's
path: readers disagree on which value counts.

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
The rule catalogue is docs/guides/policies.md; the input document is described in
docs/guides/policy-input.md.`,
		setup: func(fs *flag.FlagSet) runFunc {
			var c checkFlags
			c.format = choiceFlag{value: "text", choices: policycheck.Formats}
			fs.Var(&c.policies, "policy", "a team policy `DIR`ectory (or .rego file), as in the provider's policy_paths; repeatable")
			fs.Var(&c.format, "format", "output `format`: text, json, sarif or junit")
			fs.BoolVar(&c.failOnWarn, "fail-on-warn", false, "exit 1 on warnings (advisory findings) as well")
			fs.BoolVar(&c.failOnDeferred, "fail-on-deferred", false, "exit 3 when anything is checked only at apply (values unknown in the plan)")
			fs.Int64Var(&c.maxInputMiB, "max-input-mib", defaultMaxInputMiB, "refuse a plan, policy or waiver file larger than `N` MiB")
			fs.StringVar(&c.waivers, "waivers", "", "waiver `FILE` (YAML or JSON) for soft-mandatory team rules")
			fs.StringVar(&c.output, "output", "", "write the report to `FILE` instead of standard output")
			return c.run
		},
		exitCodes: policyCheckExitCodes,
	})
}

type checkFlags struct {
	policies       stringsFlag
	format         choiceFlag
	failOnWarn     bool
	failOnDeferred bool
	maxInputMiB    int64
	waivers        string
	output         string
}

// defaultMaxInputMiB bounds what policy check reads: the largest real plans
// are a few MiB, and a 200 MB plan took 45 s and 1.4 GB to check.
const defaultMaxInputMiB = 64

// exitDeferred is policy check's exit code, with --fail-on-deferred, for a
// plan nothing refuses but that leaves something to be checked at apply.
const exitDeferred = 3

const policyCheckExitCodes = `Exit codes:
  0  clean: nothing refused (and, with --fail-on-deferred, nothing left for apply)
  1  denied: a policy refused a resource (or, with --fail-on-warn, warned)
  2  usage or input error: bad flags or arguments; a plan, policy or waiver file that is
     unreadable, malformed, not a regular file or over --max-input-mib; a key twice in
     the plan's JSON; policies that do not load
  3  undecided, with --fail-on-deferred: nothing refused, but something is checked only
     at apply (SBX-CHK-001); a refusal (1) takes precedence`

func (c *checkFlags) run(ctx context.Context, e *env, args []string) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(e.stderr, "sandboxio policy check: "+format+"\n", a...)
		return exitUsage
	}
	if len(args) != 1 {
		return fail("want exactly one PLAN.json argument, got %d (run `sandboxio policy check --help`)", len(args))
	}
	if c.maxInputMiB <= 0 || c.maxInputMiB > 1<<20 {
		return fail("--max-input-mib %d: want a number of MiB from 1 to 1048576", c.maxInputMiB)
	}
	limit := c.maxInputMiB << 20
	name := args[0]
	var data []byte
	var err error
	if name == "-" {
		name = "<stdin>"
		data, err = boundedfile.ReadLimited(e.stdin, name, limit)
	} else {
		data, err = boundedfile.ReadFile(name, limit)
	}
	if err != nil {
		return fail("read plan: %v; pass the JSON of `terraform show -json plan.bin` (or - for standard input)%s", err, c.raiseHint(err))
	}
	for _, p := range c.policies {
		if err := checkPolicyPath(p, limit); err != nil {
			return fail("load policies: %v%s", err, c.raiseHint(err))
		}
	}
	if c.waivers != "" {
		if _, err := boundedfile.CheckRegular(c.waivers, limit); err != nil {
			var fe *boundedfile.FileError
			if errors.As(err, &fe) {
				return fail("load waivers: %v%s", err, c.raiseHint(err))
			}
			// A missing file is reported by LoadWaivers below, as the
			// provider reports it.
		}
	}
	eng, err := policy.Load(ctx, c.policies)
	if err != nil {
		return fail("load policies: %v", err)
	}
	opts := policycheck.Options{Now: e.now()}
	if c.waivers != "" {
		if opts.Waivers, err = verdict.LoadWaivers(c.waivers); err != nil {
			return fail("load waivers: %v", err) // SBX-POL-002, as the provider and `sandboxio run` report it
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
	if err := policycheck.Render(out, rep, policycheck.RenderOptions{Format: c.format.value, FailOnWarn: c.failOnWarn,
		FailOnDeferred: c.failOnDeferred, Version: versionInfo().Version}); err != nil {
		return fail("write report: %v", err)
	}
	if !rep.Passed(c.failOnWarn) {
		return exitDenied
	}
	if c.failOnDeferred && rep.Undecided() {
		return exitDeferred
	}
	return exitOK
}

// raiseHint says how to read a larger file, for a file over the limit.
func (c *checkFlags) raiseHint(err error) string {
	if errors.Is(err, boundedfile.ErrTooLarge) {
		return fmt.Sprintf(" (raise the limit with --max-input-mib, now %d)", c.maxInputMiB)
	}
	return ""
}

// checkPolicyPath refuses, before the engine reads anything, a --policy
// path that is neither a directory nor a regular file, and any policy file
// the engine would read from a directory (*.rego but *_test.rego, symlinks
// followed) that is not a regular file within the limit: /dev/zero as a
// policy ran the check out of memory.
func checkPolicyPath(p string, limit int64) error {
	fi, err := os.Stat(p)
	if err != nil {
		return nil // the engine reports a missing path as the provider does
	}
	if !fi.IsDir() {
		_, err := boundedfile.CheckRegular(p, limit)
		return err
	}
	return filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".rego") || strings.HasSuffix(path, "_test.rego") {
			return nil // walk errors: the engine reports them
		}
		_, err = boundedfile.CheckRegular(path, limit)
		return err
	})
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
