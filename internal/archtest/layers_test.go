// Package archtest checks the layers the tree shows: product code, the
// test-support tree (internal/fakes, internal/testing) and the policy
// engine, which knows backends only as capability data.
package archtest

import (
	"bufio"
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/sandboxio/terraform-provider-sandboxio"

// testSupport holds the fakes and the test helpers: the only non-test
// packages that may import "testing".
var testSupport = []string{module + "/internal/fakes", module + "/internal/testing"}

// engineMustNotLink are the dependencies the policy engine must not have:
// any backend implementation, and the SDKs they bring.
var engineMustNotLink = []string{
	module + "/internal/backends",
	"k8s.io/client-go",
	"github.com/docker/docker",
	"github.com/modal-labs/",
}

// engineMayLink is the backends' capability data, read from data.json.
const engineMayLink = module + "/internal/backends/capabilities"

func inTestSupport(pkg string) bool {
	for _, p := range testSupport {
		if pkg == p || strings.HasPrefix(pkg, p+"/") {
			return true
		}
	}
	return false
}

// goList runs go list in the module root and returns its output's lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), "go", append([]string{"list"}, args...)...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var lines []string
	for sc := bufio.NewScanner(bytes.NewReader(out)); sc.Scan(); {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// No product package imports "testing" or the test-support tree: test
// code ships in no binary but the fakes' own.
func TestProductImportsNoTestCode(t *testing.T) {
	for _, line := range goList(t, "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...") {
		fields := strings.Fields(line)
		pkg, imports := fields[0], fields[1:]
		if inTestSupport(pkg) {
			continue
		}
		for _, imp := range imports {
			switch {
			case imp == "testing":
				t.Errorf("%s imports testing: move it under internal/fakes or internal/testing", pkg)
			case inTestSupport(imp):
				t.Errorf("%s imports the test-support package %s", pkg, imp)
			}
		}
	}
}

// The policy engine links no backend implementation and none of their SDKs.
func TestEngineLinksNoBackend(t *testing.T) {
	deps := goList(t, "-deps", "./internal/policy")
	for _, dep := range deps {
		if dep == engineMayLink {
			continue
		}
		for _, bad := range engineMustNotLink {
			if dep == bad || strings.HasPrefix(dep, strings.TrimSuffix(bad, "/")+"/") {
				t.Errorf("internal/policy links %s", dep)
				break
			}
		}
	}
	t.Logf("internal/policy links %d packages", len(deps))
}
