//go:build unix

package policy_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
)

// RegoFiles lists as the hand-written walk before OPA's loader did: .rego
// files at any depth, *_test.rego only with tests, symlinks to files (and a
// dangling one named like a policy, for its reader to refuse), but neither
// the inside of a symlinked directory nor a dangling link of another name.
func TestRegoFiles(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	for _, f := range []string{"a.rego", "a_test.rego", "data.json", "README.md", "sub/b.rego", "sub/deep/c.rego", "sub/c_test.rego"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), []byte("package team.x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(other, "outside.rego"), []byte("package team.y\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"linked.rego": filepath.Join(other, "outside.rego"), "linkdir": other,
		".#lock": "user@host.1234", "gone.rego": filepath.Join(other, "missing.rego"),
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		tests bool
		want  []string
	}{
		{false, []string{"a.rego", "gone.rego", "linked.rego", "sub/b.rego", "sub/deep/c.rego"}},
		{true, []string{"a.rego", "a_test.rego", "gone.rego", "linked.rego", "sub/b.rego", "sub/c_test.rego", "sub/deep/c.rego"}},
	} {
		got, err := policy.RegoFiles(dir, tc.tests)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]string, len(tc.want))
		for i, f := range tc.want {
			want[i] = filepath.Join(dir, f)
		}
		if !slices.Equal(got, want) {
			t.Errorf("tests %v:\n got %v\nwant %v", tc.tests, got, want)
		}
	}
}
