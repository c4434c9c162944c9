package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/boundedfile"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/policycheck"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/verdict"
)

func init() {
	register(&command{
		name:    "policy check",
		summary: "check a Terraform plan (terraform show -json) against the policies",
		usage:   "policy check [flags] PLAN.json",
		help: `Checks every sandboxio resource of a Terraform plan (PLAN.json, the JSON of
terraform show -json; - reads standard input) against the embedded policy bundle and the
team policies of each --policy directory, as terraform plan does with the provider's
policy_paths. --waivers lists exceptions to soft-mandatory team rules.`,
		example: `terraform plan -out=tfplan && terraform show -json tfplan > plan.json
sandboxio policy check --policy ./policies --waivers waivers.yaml plan.json
sandboxio policy check --format sarif --output report.sarif plan.json`,
		setup: func(fs *pflag.FlagSet) runFunc {
			var c checkFlags
			c.format = choiceFlag{value: "text", choices: policycheck.Formats}
			fs.Var(&c.policies, "policy", "a team policy `DIR`ectory or .rego file, as in policy_paths; repeatable")
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
// are a few MiB, and a far larger one costs seconds and gigabytes to check.
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
	files, err := policy.RegoFiles(p, false)
	if err != nil {
		return nil // the engine reports it
	}
	for _, f := range files {
		if _, err := boundedfile.CheckRegular(f, limit); err != nil {
			return err
		}
	}
	return nil
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
