// Package regotest is `sandboxio policy test`: it runs the Rego unit tests of
// the built-in bundle and of team policy directories through OPA's tester,
// with coverage, exactly as the engine loads the policies (Rego v1, the
// capability data at data.capabilities, team packages beside the built-in
// ones).
package regotest

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/cover"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/tester"
	"github.com/open-policy-agent/opa/v1/util"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/policies"
)

// Options select what to test.
type Options struct {
	// Dirs are team policy directories (or files). A directory holding
	// capabilities/data.json is a copy of the built-in bundle (policies/ in
	// this repository) and replaces the embedded one, so that reviewers
	// test the rules they are editing.
	Dirs []string
	// Run keeps only the tests whose name matches this regular expression.
	Run string
	// Timeout bounds each test; zero means 5 s.
	Timeout time.Duration
}

// Test is one test's outcome.
type Test struct {
	Package  string
	Name     string
	File     string
	Row      int
	Pass     bool
	Skip     bool
	Fail     bool
	Error    string // set when the test errored rather than failed
	Duration time.Duration
	Output   string // print() output of a failed test
}

// FileCoverage is the coverage of one policy file.
type FileCoverage struct {
	File       string
	Covered    int
	NotCovered int
	Percent    float64
	// NotCoveredLines lists the rows no test reached.
	NotCoveredLines []int
}

// Result is the outcome of a run.
type Result struct {
	Tests    []Test
	Coverage []FileCoverage // policy files only (tests excluded), sorted by file
	Percent  float64        // over every policy file
	Builtin  string         // where the built-in bundle came from: "embedded" or a directory
}

// Passed reports whether every test passed.
func (r *Result) Passed() bool {
	for _, t := range r.Tests {
		if !t.Pass && !t.Skip {
			return false
		}
	}
	return len(r.Tests) > 0
}

// LoadError is a policy set that does not load or compile: a usage or
// input error, not a failed test.
type LoadError struct{ Err error }

func (e *LoadError) Error() string { return e.Err.Error() }
func (e *LoadError) Unwrap() error { return e.Err }

// Run loads the policies and their tests and runs the tests.
func Run(ctx context.Context, opts Options) (*Result, error) {
	modules, capData, builtin, err := load(opts.Dirs)
	if err != nil {
		return nil, &LoadError{err}
	}
	// util.UnmarshalJSON keeps numbers as json.Number: decoded as float64,
	// 2592000 would print as 2.592e+06 in every message that names it.
	var capObj map[string]any
	if err := util.UnmarshalJSON(capData, &capObj); err != nil {
		return nil, &LoadError{fmt.Errorf("capability data: %w", err)}
	}
	store := inmem.NewFromObject(map[string]any{"capabilities": capObj})
	txn, err := store.NewTransaction(ctx, storage.WriteParams)
	if err != nil {
		return nil, fmt.Errorf("policy test: %w", err)
	}
	defer store.Abort(ctx, txn)

	compiler := ast.NewCompiler().
		WithPathConflictsCheck(storage.NonEmpty(ctx, store, txn)).
		WithEnablePrintStatements(true).
		WithUseTypeCheckAnnotations(true)
	cov := cover.New()
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	runner := tester.NewRunner().
		SetCompiler(compiler).
		SetStore(store).
		SetModules(modules).
		CapturePrintOutput(true).
		SetCoverageQueryTracer(cov).
		SetTimeout(timeout).
		Filter(opts.Run)
	ch, err := runner.RunTests(ctx, txn)
	if err != nil {
		return nil, &LoadError{fmt.Errorf("the policies do not compile: %w", err)}
	}
	res := &Result{Builtin: builtin}
	for r := range ch {
		t := Test{Package: strings.TrimPrefix(r.Package, "data."), Name: r.Name, Pass: r.Pass(), Skip: r.Skip, Fail: r.Fail,
			Duration: r.Duration}
		if r.Location != nil {
			t.File, t.Row = r.Location.File, r.Location.Row
		}
		if r.Error != nil {
			t.Error = r.Error.Error()
		}
		if !t.Pass && len(r.Output) > 0 {
			t.Output = string(r.Output)
		}
		res.Tests = append(res.Tests, t)
	}
	sort.Slice(res.Tests, func(i, j int) bool {
		a, b := res.Tests[i], res.Tests[j]
		if a.File != b.File {
			return a.File < b.File
		}
		return a.Row < b.Row
	})
	res.Coverage, res.Percent = coverage(cov.Report(modules), modules)
	return res, nil
}

// coverage keeps the policy files (tests say nothing about coverage).
func coverage(rep cover.Report, modules map[string]*ast.Module) ([]FileCoverage, float64) {
	var out []FileCoverage
	covered, total := 0, 0
	for name := range modules {
		if strings.HasSuffix(name, "_test.rego") {
			continue
		}
		fc := FileCoverage{File: name}
		if fr := rep.Files[name]; fr != nil {
			for _, r := range fr.Covered {
				fc.Covered += r.End.Row - r.Start.Row + 1
			}
			for _, r := range fr.NotCovered {
				fc.NotCovered += r.End.Row - r.Start.Row + 1
				for row := r.Start.Row; row <= r.End.Row; row++ {
					fc.NotCoveredLines = append(fc.NotCoveredLines, row)
				}
			}
		}
		if n := fc.Covered + fc.NotCovered; n > 0 {
			fc.Percent = 100 * float64(fc.Covered) / float64(n)
		} else {
			fc.Percent = 100
		}
		covered += fc.Covered
		total += fc.Covered + fc.NotCovered
		out = append(out, fc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].File < out[j].File })
	pct := 100.0
	if total > 0 {
		pct = 100 * float64(covered) / float64(total)
	}
	return out, pct
}

// load parses the built-in bundle (embedded, or a directory copy of it)
// and every team directory, tests included.
func load(dirs []string) (map[string]*ast.Module, []byte, string, error) {
	modules := map[string]*ast.Module{}
	var bundleDir string
	var team []string
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, policies.CapabilitiesPath)); err == nil {
			if bundleDir != "" {
				return nil, nil, "", fmt.Errorf("%s and %s are both copies of the built-in bundle (they hold %s); pass one",
					bundleDir, d, policies.CapabilitiesPath)
			}
			bundleDir = d
			continue
		}
		team = append(team, d)
	}
	var capData []byte
	builtin := "embedded"
	if bundleDir == "" {
		names, err := fs.Glob(policies.Bundle, "*.rego")
		if err != nil {
			return nil, nil, "", fmt.Errorf("bundle list: %w", err)
		}
		for _, name := range names {
			src, err := policies.Bundle.ReadFile(name)
			if err != nil {
				return nil, nil, "", fmt.Errorf("bundle read: %w", err)
			}
			if err := add(modules, "policies/"+name, src); err != nil {
				return nil, nil, "", err
			}
		}
		if capData, err = policies.Bundle.ReadFile(policies.CapabilitiesPath); err != nil {
			return nil, nil, "", fmt.Errorf("bundle read: %w", err)
		}
	} else {
		builtin = bundleDir
		files, err := regoFiles(bundleDir)
		if err != nil {
			return nil, nil, "", err
		}
		for _, f := range files {
			if err := addFile(modules, f); err != nil {
				return nil, nil, "", err
			}
		}
		if capData, err = os.ReadFile(filepath.Join(bundleDir, policies.CapabilitiesPath)); err != nil {
			return nil, nil, "", fmt.Errorf("capability data: %w", err)
		}
	}
	if len(team) > 0 {
		// The team policies must load in production too: the engine's
		// checks (reserved namespaces, rule IDs, enforcement levels) run
		// on them here, so a bundle that passes its tests also loads.
		eng, err := policy.New(context.Background(), team)
		if err == nil {
			err = eng.CheckTeam()
		}
		if err != nil {
			return nil, nil, "", err
		}
	}
	for _, d := range team {
		files, err := regoFiles(d)
		if err != nil {
			return nil, nil, "", err
		}
		for _, f := range files {
			if err := addFile(modules, f); err != nil {
				return nil, nil, "", err
			}
		}
	}
	return modules, capData, builtin, nil
}

func regoFiles(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("policy path %s: %w", path, err)
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	files, err := policy.RegoFiles(path, true)
	if err != nil {
		return nil, fmt.Errorf("policy path %s: %w", path, err)
	}
	return files, nil
}

func addFile(modules map[string]*ast.Module, file string) error {
	src, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	return add(modules, file, src)
}

func add(modules map[string]*ast.Module, name string, src []byte) error {
	if _, dup := modules[name]; dup {
		return nil // the same file named twice
	}
	m, err := ast.ParseModuleWithOpts(name, string(src), ast.ParserOptions{RegoVersion: ast.RegoV1, ProcessAnnotation: true})
	if err != nil {
		return fmt.Errorf("%s does not parse: %w", name, err)
	}
	modules[name] = m
	return nil
}
