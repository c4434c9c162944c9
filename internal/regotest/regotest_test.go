package regotest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRun_EmbeddedBundle(t *testing.T) {
	res, err := Run(t.Context(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Passed() || len(res.Tests) < 100 || res.Builtin != "embedded" {
		t.Fatalf("embedded bundle: passed=%v tests=%d builtin=%s", res.Passed(), len(res.Tests), res.Builtin)
	}
	// Coverage is over the policy files only, never the tests.
	for _, c := range res.Coverage {
		if strings.HasSuffix(c.File, "_test.rego") {
			t.Errorf("test file in the coverage: %s", c.File)
		}
	}
	if res.Percent <= 0 || res.Percent > 100 {
		t.Errorf("coverage %.1f", res.Percent)
	}
}

func TestRun_FilterAndUncovered(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.rego"), []byte("package team.p\n\ndeny contains \"a\" if input.x == 1\n\ndeny contains \"b\" if input.x == 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "p_test.rego"), []byte("package team.p_test\n\nimport data.team.p\n\ntest_a if { p.deny == {\"a\"} with input as {\"x\": 1} }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := Run(t.Context(), Options{Dirs: []string{dir}, Run: "team"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tests) != 1 || !res.Passed() {
		t.Fatalf("filtered run: %+v", res.Tests)
	}
	for _, c := range res.Coverage {
		if strings.HasSuffix(c.File, "p.rego") && (c.Percent == 100 || len(c.NotCoveredLines) == 0) {
			t.Errorf("the second rule is not covered, yet: %+v", c)
		}
	}
}

func TestRun_TwoBundleCopiesRefused(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	for _, d := range []string{a, b} {
		if err := os.MkdirAll(filepath.Join(d, "capabilities"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "capabilities", "data.json"), []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Run(t.Context(), Options{Dirs: []string{a, b}})
	var le *LoadError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "both copies") {
		t.Fatalf("two bundle copies: %v", err)
	}
}
