// Package bench measures whole-command performance against baselines run in
// the same process, so that noisy machines still give meaningful ratios.
package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/testing/medians"
)

const planResources = 200

// repoRoot is two levels above this package's directory, where go test
// runs it (runtime.Caller would give a module path under -trimpath).
func repoRoot(b *testing.B) string {
	b.Helper()
	wd, err := os.Getwd()
	if err != nil {
		b.Fatal(err)
	}
	return filepath.Join(wd, "..", "..")
}

func terraformPath() string {
	if p := os.Getenv("TF_ACC_TERRAFORM_PATH"); p != "" {
		return p
	}
	if p, err := exec.LookPath("terraform"); err == nil {
		return p
	}
	return "/usr/local/bin/terraform"
}

// baselineCommit is the code the plan cost is held to (issue 26): today's
// provider must plan no slower than it does, measured in the same run.
const baselineCommit = "555fc26"

// baselineProvider builds the provider at baselineCommit once, from a git
// archive of that commit, and caches it under bin/ keyed by the full hash.
// It returns the directory holding the binary, or why there is none (no git,
// or a clone without that commit, as a shallow one is).
func baselineProvider(b *testing.B, root, tmp string) (dir, skipped string) {
	b.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		return "", "git is not on PATH"
	}
	out, err := exec.Command("git", "-C", root, "rev-parse", "--verify", "--quiet", baselineCommit+"^{commit}").Output()
	if err != nil {
		return "", "commit " + baselineCommit + " is not in this clone (a shallow clone?)"
	}
	hash := strings.TrimSpace(string(out))
	dir = filepath.Join(root, "bin", "bench-baseline-"+hash)
	exe := filepath.Join(dir, "terraform-provider-sandboxio")
	if _, err := os.Stat(exe); err == nil {
		return dir, ""
	}
	src := filepath.Join(tmp, "baseline-src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		b.Fatal(err)
	}
	archive := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", root, hash, src)
	if o, err := archive.CombinedOutput(); err != nil {
		b.Fatalf("git archive %s: %v\n%s", baselineCommit, err, o)
	}
	// Build to a temporary name and rename, so an interrupted build leaves
	// no half-written binary in the cache.
	goBuild(b, src, exe+".tmp", ".")
	if err := os.Rename(exe+".tmp", exe); err != nil {
		b.Fatal(err)
	}
	return dir, ""
}

func goBuild(b *testing.B, root, out, pkg string) {
	b.Helper()
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = root
	if o, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build %s: %v\n%s", pkg, err, o)
	}
}

// workspace writes one configuration of n resources built by block.
func workspace(b *testing.B, dir, header string, block func(i int) string) string {
	b.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	var sb strings.Builder
	sb.WriteString(header)
	for i := range planResources {
		sb.WriteString(block(i))
	}
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(sb.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	return dir
}

const inputs = `name = "t%[1]d"
    backend = "docker://"
    image = "python:3.12-slim"
    runtime = "runsc"
    require_isolation = "GVISOR"
    timeout_seconds = 120
    lifetime_seconds = 600
    env = { LANG = "C.UTF-8" }
    labels = { team = "agents" }`

func plan(b *testing.B, env []string, dir string) time.Duration {
	b.Helper()
	cmd := exec.Command(terraformPath(), "plan", "-input=false", "-lock=false", "-no-color", "-out=/dev/null")
	cmd.Dir = dir
	cmd.Env = env
	start := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(start)
	if err != nil {
		b.Fatalf("terraform plan in %s: %v\n%s", dir, err, out)
	}
	if !strings.Contains(string(out), fmt.Sprintf("%d to add", planResources)) {
		b.Fatalf("terraform plan in %s did not plan %d resources:\n%s", dir, planResources, out)
	}
	return d
}

// BenchmarkPlan200Templates plans 200 sandboxio_template resources with
// today's provider and with the provider at baselineCommit, 200 terraform_data
// resources with the same inputs, and 200 resources of a framework provider
// that does nothing (once with the template's exact schema, once with a bare
// one), interleaved in the same run. It reports the medians and the ratios
// issue 26 holds the provider to: against the do-nothing provider with the
// same schema (what sandboxio's own policy, spec and validation work adds)
// and against baselineCommit. Without git or that commit the baseline ratio
// is skipped and the reason printed. The do-nothing provider logs as the
// SDKs default, while sandboxio turns the SDK loggers off when Terraform
// would drop their lines; set TF_LOG_SDK=OFF TF_LOG_SDK_PROTO=OFF
// TF_LOG_SDK_FRAMEWORK=OFF TF_LOG_PROVIDER=OFF to compare all of them quiet.
func BenchmarkPlan200Templates(b *testing.B) {
	root := repoRoot(b)
	tmp := b.TempDir()
	bin := filepath.Join(tmp, "bin")
	goBuild(b, root, filepath.Join(bin, "terraform-provider-sandboxio"), ".")
	goBuild(b, root, filepath.Join(bin, "terraform-provider-noop"), "./internal/bench/noopprovider")
	baseBin, baseSkipped := baselineProvider(b, root, tmp)
	overrides := fmt.Sprintf("    \"sandboxio/sandboxio\" = %q\n    \"sandboxio/noop\" = %q\n", bin, bin)
	if baseBin != "" {
		overrides += fmt.Sprintf("    \"sandboxio-baseline/sandboxio\" = %q\n", baseBin)
	}
	rc := filepath.Join(tmp, "terraformrc")
	err := os.WriteFile(rc, []byte("provider_installation {\n  dev_overrides {\n"+overrides+"  }\n  direct {}\n}\n"), 0o644)
	if err != nil {
		b.Fatal(err)
	}
	env := append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1")

	template := func(i int) string {
		return fmt.Sprintf("resource \"sandboxio_template\" \"t%d\" {\n    %s\n}\n", i, fmt.Sprintf(inputs, i))
	}
	sandboxioHeader := func(source string) string {
		return "terraform {\n  required_providers {\n    sandboxio = { source = \"" + source + "\" }\n  }\n}\n"
	}
	noopHeader := "terraform {\n  required_providers {\n    noop = { source = \"sandboxio/noop\" }\n  }\n}\n"
	type target struct {
		name  string
		dir   string
		times []time.Duration
	}
	targets := []*target{
		{name: "sandboxio", dir: workspace(b, filepath.Join(tmp, "sandboxio"), sandboxioHeader("sandboxio/sandboxio"), template)},
		{name: "terraform_data", dir: workspace(b, filepath.Join(tmp, "terraform_data"), "", func(i int) string {
			return fmt.Sprintf("resource \"terraform_data\" \"t%d\" {\n  input = {\n    %s\n  }\n}\n", i,
				strings.ReplaceAll(fmt.Sprintf(inputs, i), "\n", "\n  "))
		})},
		{name: "noop-same-schema", dir: workspace(b, filepath.Join(tmp, "noop"), noopHeader, func(i int) string {
			return fmt.Sprintf("resource \"noop_template\" \"t%d\" {\n    %s\n}\n", i, fmt.Sprintf(inputs, i))
		})},
		{name: "noop-bare", dir: workspace(b, filepath.Join(tmp, "bare"), noopHeader, func(i int) string {
			return fmt.Sprintf("resource \"noop_bare\" \"t%d\" {\n    %s\n}\n", i, fmt.Sprintf(inputs, i))
		})},
	}
	if baseBin != "" {
		targets = append(targets, &target{name: baselineCommit,
			dir: workspace(b, filepath.Join(tmp, "baseline"), sandboxioHeader("sandboxio-baseline/sandboxio"), template)})
	}

	rounds := 5
	if v := os.Getenv("SANDBOXIO_BENCH_ROUNDS"); v != "" {
		if _, err := fmt.Sscan(v, &rounds); err != nil || rounds < 1 {
			b.Fatalf("SANDBOXIO_BENCH_ROUNDS=%q: want a positive number", v)
		}
	}
	// Warm the file cache and the plugin binaries once.
	for _, t := range targets {
		plan(b, env, t.dir)
	}
	b.ResetTimer()
	for range b.N {
		for range rounds {
			for _, t := range targets {
				t.times = append(t.times, plan(b, env, t.dir))
			}
		}
	}
	b.StopTimer()
	med := map[string]time.Duration{}
	for _, t := range targets {
		med[t.name] = medians.Of(t.times)
		b.ReportMetric(float64(med[t.name].Milliseconds()), t.name+"-ms")
	}
	ms := med["sandboxio"]
	ratio := func(of string) float64 { return float64(ms) / float64(med[of]) }
	b.ReportMetric(ratio("terraform_data"), "x-terraform_data")
	b.ReportMetric(ratio("noop-same-schema"), "x-noop-same-schema")
	b.ReportMetric(float64(med["noop-bare"])/float64(med["terraform_data"]), "bare-x-terraform_data")
	fmt.Printf("plan of %d resources, median of %d rounds: sandboxio %v, terraform_data %v, "+
		"do-nothing provider with the same schema %v, do-nothing provider with a bare schema %v\n"+
		"  sandboxio / terraform_data           = %.2fx\n"+
		"  bare do-nothing / terraform_data     = %.2fx (the plugin-protocol floor)\n"+
		"  sandboxio / same-schema do-nothing   = %.2fx (policy, spec and validation work; goal <= 2.5)\n",
		planResources, rounds*b.N, ms, med["terraform_data"], med["noop-same-schema"], med["noop-bare"],
		ratio("terraform_data"), float64(med["noop-bare"])/float64(med["terraform_data"]), ratio("noop-same-schema"))
	if baseBin == "" {
		fmt.Printf("  sandboxio / %s                = skipped: %s\n", baselineCommit, baseSkipped)
		return
	}
	b.ReportMetric(ratio(baselineCommit), "x-"+baselineCommit)
	fmt.Printf("  sandboxio / %s                = %.2fx (%s %v; goal <= 1)\n",
		baselineCommit, ratio(baselineCommit), baselineCommit, med[baselineCommit])
}
