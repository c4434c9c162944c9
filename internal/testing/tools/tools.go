// Package tools lets a test say which optional tool its result depends on:
// without the tool it skips, naming it, or fails under the variable that
// make test sets after installing it. A test never meets a missing tool as
// an unrelated assertion.
package tools

import (
	"os"
	"os/exec"
	"testing"
)

// RequireAnalysersEnv makes a missing analyser fail the test instead of
// skipping it; make test installs the analysers and sets it.
const RequireAnalysersEnv = "SANDBOXIO_REQUIRE_ANALYSERS"

// NeedAnalysers skips the test when one of the analysers is not on PATH,
// or fails it under SANDBOXIO_REQUIRE_ANALYSERS=1. A test whose output would
// carry the hook's advisory warning for a missing analyser names it here.
func NeedAnalysers(t testing.TB, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv(RequireAnalysersEnv) == "1" {
				t.Fatalf("%s is not installed and %s=1 (make analysers installs it)", tool, RequireAnalysersEnv)
			}
			t.Skipf("%s is not installed (make analysers installs it)", tool)
		}
	}
}
