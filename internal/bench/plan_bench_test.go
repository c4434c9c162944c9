// Package bench measures whole-command performance against baselines run in
// the same process, so that noisy machines still give meaningful ratios.
package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
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

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkPlan200Templates plans 200 sandboxio_template resources, 200
// terraform_data resources with the same inputs, and 200 resources of a
// framework provider that does nothing (once with the template's exact
// schema, once with a bare one), interleaved in the same run. It reports the
// medians and the ratios: against terraform_data (a do-nothing framework
// provider measured 3.3x on these machines), and against the do-nothing
// provider with the same schema, which is what sandboxio's own policy, spec
// and validation work adds.
func BenchmarkPlan200Templates(b *testing.B) {
	root := repoRoot(b)
	tmp := b.TempDir()
	bin := filepath.Join(tmp, "bin")
	goBuild(b, root, filepath.Join(bin, "terraform-provider-sandboxio"), ".")
	goBuild(b, root, filepath.Join(bin, "terraform-provider-noop"), "./internal/bench/noopprovider")
	rc := filepath.Join(tmp, "terraformrc")
	err := os.WriteFile(rc, []byte(fmt.Sprintf(`provider_installation {
  dev_overrides {
    "sandboxio/sandboxio" = %q
    "sandboxio/noop" = %q
  }
  direct {}
}
`, bin, bin)), 0o644)
	if err != nil {
		b.Fatal(err)
	}
	env := append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1")

	sbx := workspace(b, filepath.Join(tmp, "sandboxio"),
		"terraform {\n  required_providers {\n    sandboxio = { source = \"sandboxio/sandboxio\" }\n  }\n}\n",
		func(i int) string {
			return fmt.Sprintf("resource \"sandboxio_template\" \"t%d\" {\n    %s\n}\n", i, fmt.Sprintf(inputs, i))
		})
	tfd := workspace(b, filepath.Join(tmp, "terraform_data"), "",
		func(i int) string {
			return fmt.Sprintf("resource \"terraform_data\" \"t%d\" {\n  input = {\n    %s\n  }\n}\n", i,
				strings.ReplaceAll(fmt.Sprintf(inputs, i), "\n", "\n  "))
		})
	noopHeader := "terraform {\n  required_providers {\n    noop = { source = \"sandboxio/noop\" }\n  }\n}\n"
	noop := workspace(b, filepath.Join(tmp, "noop"), noopHeader, func(i int) string {
		return fmt.Sprintf("resource \"noop_template\" \"t%d\" {\n    %s\n}\n", i, fmt.Sprintf(inputs, i))
	})
	bare := workspace(b, filepath.Join(tmp, "bare"), noopHeader, func(i int) string {
		return fmt.Sprintf("resource \"noop_bare\" \"t%d\" {\n    %s\n}\n", i, fmt.Sprintf(inputs, i))
	})

	rounds := 5
	if v := os.Getenv("SANDBOXIO_BENCH_ROUNDS"); v != "" {
		if _, err := fmt.Sscan(v, &rounds); err != nil || rounds < 1 {
			b.Fatalf("SANDBOXIO_BENCH_ROUNDS=%q: want a positive number", v)
		}
	}
	// Warm the file cache and the plugin binaries once.
	plan(b, env, sbx)
	plan(b, env, tfd)
	plan(b, env, noop)
	plan(b, env, bare)
	b.ResetTimer()
	var ts, td, tn, tb []time.Duration
	for range b.N {
		for range rounds {
			ts = append(ts, plan(b, env, sbx))
			td = append(td, plan(b, env, tfd))
			tn = append(tn, plan(b, env, noop))
			tb = append(tb, plan(b, env, bare))
		}
	}
	b.StopTimer()
	ms, md, mn, mb := median(ts), median(td), median(tn), median(tb)
	b.ReportMetric(float64(ms.Milliseconds()), "sandboxio-ms")
	b.ReportMetric(float64(md.Milliseconds()), "terraform_data-ms")
	b.ReportMetric(float64(mn.Milliseconds()), "noop-same-schema-ms")
	b.ReportMetric(float64(mb.Milliseconds()), "noop-bare-ms")
	b.ReportMetric(float64(ms)/float64(md), "x-terraform_data")
	b.ReportMetric(float64(ms)/float64(mn), "x-noop-same-schema")
	b.ReportMetric(float64(mb)/float64(md), "bare-x-terraform_data")
	fmt.Printf("plan of %d resources, median of %d rounds: sandboxio %v, terraform_data %v, "+
		"do-nothing provider with the same schema %v, do-nothing provider with a bare schema %v\n"+
		"  sandboxio / terraform_data           = %.2fx\n"+
		"  bare do-nothing / terraform_data     = %.2fx (the plugin-protocol floor)\n"+
		"  sandboxio / same-schema do-nothing   = %.2fx (policy, spec and validation work; goal <= 1.15)\n",
		planResources, len(ts), ms, md, mn, mb,
		float64(ms)/float64(md), float64(mb)/float64(md), float64(ms)/float64(mn))
}
