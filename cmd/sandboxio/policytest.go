package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/spf13/pflag"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/regotest"
)

func init() {
	register(&command{
		name:    "policy test",
		summary: "run the Rego unit tests of the built-in bundle and of team policies, with coverage",
		usage:   "policy test [flags] [DIR]...",
		help: `Runs the Rego unit tests of the embedded bundle and of every team policy DIR through OPA's
tester, and reports pass or fail per test and the line coverage of each policy file. A DIR
holding capabilities/data.json replaces the embedded bundle.`,
		example: `sandboxio policy test                                # the embedded bundle
sandboxio policy test --threshold 100 ./policies     # team policies and the bundle`,
		setup: func(fs *pflag.FlagSet) runFunc {
			var t testFlags
			t.format = choiceFlag{value: "text", choices: []string{"text", "json"}}
			fs.StringVar(&t.filter, "run", "", "run only the tests whose package-qualified name matches `REGEX`")
			fs.Var(&t.format, "format", "output `format`: text or json")
			fs.Float64Var(&t.threshold, "threshold", 0, "exit 1 when the coverage of the policy files is below `PCT` percent")
			fs.BoolVarP(&t.verbose, "v", "v", false, "text: also list the passing tests' durations and every uncovered line")
			return t.run
		},
	})
}

type testFlags struct {
	filter    string
	format    choiceFlag
	threshold float64
	verbose   bool
}

func (t *testFlags) run(ctx context.Context, e *env, dirs []string) int {
	if t.filter != "" {
		if _, err := regexp.Compile(t.filter); err != nil {
			fmt.Fprintf(e.stderr, "sandboxio policy test: --run: %v\n", err)
			return exitUsage
		}
	}
	if t.threshold < 0 || t.threshold > 100 {
		fmt.Fprintf(e.stderr, "sandboxio policy test: --threshold must be between 0 and 100\n")
		return exitUsage
	}
	res, err := regotest.Run(ctx, regotest.Options{Dirs: dirs, Run: t.filter})
	if err != nil {
		// Policies that do not load (*regotest.LoadError) are an input
		// error, as is anything else that stops the run.
		fmt.Fprintf(e.stderr, "sandboxio policy test: %v\n", err)
		return exitUsage
	}
	if len(res.Tests) == 0 {
		fmt.Fprintf(e.stderr, "sandboxio policy test: no tests found (test rules are named test_... in *_test.rego files)\n")
		return exitUsage
	}
	belowThreshold := t.threshold > 0 && res.Percent < t.threshold
	if t.format.value == "json" {
		if err := writeTestJSON(e.stdout, res, t.threshold); err != nil {
			fmt.Fprintf(e.stderr, "sandboxio policy test: %v\n", err)
			return exitUsage
		}
	} else {
		writeTestText(e.stdout, res, t.verbose)
		if belowThreshold {
			fmt.Fprintf(e.stdout, "coverage %.1f%% is below the threshold of %.1f%%\n", res.Percent, t.threshold)
		}
	}
	if !res.Passed() || belowThreshold {
		return exitDenied
	}
	return exitOK
}

func writeTestText(w io.Writer, res *regotest.Result, verbose bool) {
	passed, failed, skipped := 0, 0, 0
	for _, t := range res.Tests {
		name := t.Package + "." + t.Name
		switch {
		case t.Skip:
			skipped++
			fmt.Fprintf(w, "SKIP  %s\n", name)
		case t.Pass:
			passed++
			if verbose {
				fmt.Fprintf(w, "PASS  %s (%s)\n", name, t.Duration)
			} else {
				fmt.Fprintf(w, "PASS  %s\n", name)
			}
		default:
			failed++
			outcome := "FAIL"
			if t.Error != "" {
				outcome = "ERROR"
			}
			fmt.Fprintf(w, "%-5s %s  (%s:%d)\n", outcome, name, t.File, t.Row)
			if t.Error != "" {
				fmt.Fprintf(w, "      %s\n", t.Error)
			}
			for _, line := range strings.Split(strings.TrimRight(t.Output, "\n"), "\n") {
				if line != "" {
					fmt.Fprintf(w, "      | %s\n", line)
				}
			}
		}
	}
	fmt.Fprintf(w, "\ncoverage (policy files, built-in bundle: %s):\n", res.Builtin)
	for _, c := range res.Coverage {
		fmt.Fprintf(w, "  %6.1f%%  %s", c.Percent, c.File)
		if len(c.NotCoveredLines) > 0 {
			lines := c.NotCoveredLines
			more := ""
			if !verbose && len(lines) > 10 {
				lines, more = lines[:10], fmt.Sprintf(" and %d more", len(c.NotCoveredLines)-10)
			}
			fmt.Fprintf(w, "  (not covered: lines %s%s)", joinInts(lines), more)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "  %6.1f%%  total\n\n", res.Percent)
	fmt.Fprintf(w, "%d passed, %d failed, %d skipped\n", passed, failed, skipped)
}

func joinInts(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprint(x)
	}
	return strings.Join(parts, ",")
}

func writeTestJSON(w io.Writer, res *regotest.Result, threshold float64) error {
	type test struct {
		Package    string  `json:"package"`
		Name       string  `json:"name"`
		File       string  `json:"file"`
		Row        int     `json:"row"`
		Outcome    string  `json:"outcome"` // pass, fail, error, skip
		Error      string  `json:"error,omitempty"`
		Output     string  `json:"output,omitempty"`
		DurationMS float64 `json:"duration_ms"`
	}
	type file struct {
		File            string  `json:"file"`
		Coverage        float64 `json:"coverage"`
		NotCoveredLines []int   `json:"not_covered_lines,omitempty"`
	}
	out := struct {
		Passed    bool    `json:"passed"`
		Builtin   string  `json:"builtin"`
		Coverage  float64 `json:"coverage"`
		Threshold float64 `json:"threshold,omitempty"`
		Tests     []test  `json:"tests"`
		Files     []file  `json:"files"`
	}{Passed: res.Passed() && (threshold == 0 || res.Percent >= threshold), Builtin: res.Builtin, Coverage: res.Percent, Threshold: threshold}
	for _, t := range res.Tests {
		o := "fail"
		switch {
		case t.Skip:
			o = "skip"
		case t.Pass:
			o = "pass"
		case t.Error != "":
			o = "error"
		}
		out.Tests = append(out.Tests, test{Package: t.Package, Name: t.Name, File: t.File, Row: t.Row, Outcome: o, Error: t.Error,
			Output: t.Output, DurationMS: float64(t.Duration.Microseconds()) / 1000})
	}
	for _, c := range res.Coverage {
		out.Files = append(out.Files, file{File: c.File, Coverage: c.Percent, NotCoveredLines: c.NotCoveredLines})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
