package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// goModVersion returns the version go.mod requires of module path.
func goModVersion(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(f) >= 2 && f[0] == path {
			return f[1]
		}
	}
	t.Fatalf("go.mod requires no %s", path)
	return ""
}

// The versions printed are the ones go.mod pins: OPA from the build info of
// this binary, the framework from the constant that must follow go.mod.
func TestVersion_MatchesGoMod(t *testing.T) {
	if want := goModVersion(t, "github.com/hashicorp/terraform-plugin-framework"); frameworkVersion != want {
		t.Errorf("frameworkVersion = %s, go.mod requires terraform-plugin-framework %s: update cmd/sandboxio/version.go", frameworkVersion, want)
	}
	code, out, _ := cli(t, "", "version")
	for _, want := range []string{
		"opa             " + goModVersion(t, opaModule) + "\n",
		"framework       " + goModVersion(t, "github.com/hashicorp/terraform-plugin-framework") + "\n",
		"go              " + runtime.Version() + "\n",
	} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("sandboxio version: code %d, want a line %q in\n%s", code, want, out)
		}
	}
}

// The commit comes from the ldflags when set (the release), else from the
// VCS stamp of the go command; ldflags win over the stamp.
func TestVersion_Commit(t *testing.T) {
	stamped := &debug.BuildInfo{
		Main:     debug.Module{Path: "github.com/sandboxio/terraform-provider-sandboxio", Version: "(devel)"},
		Deps:     []*debug.Module{{Path: opaModule, Version: "v1.2.3"}},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "stamped"}},
	}
	for _, tc := range []struct {
		name, version, commit string
		bi                    *debug.BuildInfo
		wantVersion           string
		wantCommit, wantOPA   string
	}{
		{"ldflags", "1.0.0", "0123456789abcdef", stamped, "1.0.0", "0123456789abcdef", "v1.2.3"},
		{"vcs stamp", "dev", "", stamped, "dev", "stamped", "v1.2.3"},
		{"no build info", "dev", "", nil, "dev", "", "unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := versionFrom(tc.version, tc.commit, tc.bi)
			if v.Version != tc.wantVersion || v.Commit != tc.wantCommit || v.OPA != tc.wantOPA || v.Framework != frameworkVersion {
				t.Errorf("versionFrom(%q, %q) = %+v; want version %q, commit %q, opa %q, framework %q",
					tc.version, tc.commit, v, tc.wantVersion, tc.wantCommit, tc.wantOPA, frameworkVersion)
			}
		})
	}
}

// A binary built as the release builds it (-trimpath, -buildvcs=false, no
// build ID, version and commit by -X) prints what the ldflags set, with the
// OPA version still read from its build info. scripts/release-check.sh checks
// the binary goreleaser itself builds the same way.
func TestVersion_ReleaseLdflags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CLI")
	}
	bin := filepath.Join(t.TempDir(), "sandboxio")
	const commitHash = "0123456789abcdef0123456789abcdef01234567"
	build := exec.Command("go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags", "-s -w -buildid= -X main.version=9.8.7 -X main.commit="+commitHash, "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version", "--json").Output()
	if err != nil {
		t.Fatalf("sandboxio version --json: %v", err)
	}
	var v versions
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := versions{Version: "9.8.7", Commit: commitHash, OPA: goModVersion(t, opaModule),
		Framework: goModVersion(t, "github.com/hashicorp/terraform-plugin-framework")}
	if v.Version != want.Version || v.Commit != want.Commit || v.OPA != want.OPA || v.Framework != want.Framework {
		t.Errorf("release build prints %+v; want version %s, commit %s, opa %s, framework %s", v, want.Version, want.Commit, want.OPA, want.Framework)
	}
}
