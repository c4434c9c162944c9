package main

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/pflag"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
	"github.com/sandboxio/terraform-provider-sandboxio/sandbox"
)

func init() {
	register(&command{
		name:    "version",
		summary: "print the version, the commit, the embedded OPA, the provider's framework and the backends",
		usage:   "version [--json]",
		help: `Prints the CLI's version, the commit, the policy input and spec format versions, the
embedded OPA release, the provider's terraform-plugin-framework release, the Go toolchain and
the backends of this build. A policy check's result depends on these: CI logs should carry them.`,
		example: `sandboxio version
sandboxio version --json | jq -r .opa`,
		setup: func(fs *pflag.FlagSet) runFunc {
			asJSON := fs.Bool("json", false, "print the versions as a JSON object")
			return func(_ context.Context, e *env, args []string) int {
				if len(args) > 0 {
					fmt.Fprintf(e.stderr, "sandboxio version: unexpected argument %q\n", args[0])
					return exitUsage
				}
				info := versionInfo()
				if *asJSON {
					enc := json.NewEncoder(e.stdout)
					enc.SetIndent("", "  ")
					if err := enc.Encode(info); err != nil {
						fmt.Fprintf(e.stderr, "sandboxio version: %v\n", err)
						return exitUsage
					}
					return exitOK
				}
				fmt.Fprintf(e.stdout, "sandboxio %s\n", info.Version)
				if info.Commit != "" {
					fmt.Fprintf(e.stdout, "  commit          %s\n", info.Commit)
				}
				fmt.Fprintf(e.stdout, "  policy input    v%d\n  spec format     v%d\n  opa             %s\n  framework       %s\n  go              %s\n  backends        %s\n",
					info.InputVersion, info.SpecVersion, info.OPA, info.Framework, info.Go, strings.Join(info.Backends, ", "))
				return exitOK
			}
		},
	})
}

type versions struct {
	Version      string `json:"version"`
	Commit       string `json:"commit,omitempty"`
	InputVersion int    `json:"policy_input_version"`
	SpecVersion  int    `json:"spec_version"`
	OPA          string `json:"opa"`
	// Framework is the terraform-plugin-framework release the provider is
	// built with (the CLI does not link it; see frameworkVersion).
	Framework string `json:"terraform_plugin_framework"`
	Go        string `json:"go"`
	// Backends are the DSN schemes run and run-code provision on.
	Backends []string `json:"backends"`
}

// commit is set at build time (-ldflags "-X main.commit=<full hash>"): the
// release and `make build-cli` set it, since builds here run with
// -buildvcs=false or -trimpath outside a checkout. Without it the VCS
// revision that the go command stamped, if any, is used.
var commit = ""

// frameworkVersion is the terraform-plugin-framework release in go.mod, which
// the provider binary of the same commit links. The CLI links OPA but not the
// framework, so the build info cannot tell it; TestVersion_MatchesGoMod fails
// when go.mod moves and this does not.
const frameworkVersion = "v1.19.0"

const opaModule = "github.com/open-policy-agent/opa"

func versionInfo() versions {
	bi, _ := debug.ReadBuildInfo()
	return versionFrom(version, commit, bi)
}

// versionFrom reads the versions from the ldflags-set values and the build
// info (nil when the binary carries none).
func versionFrom(version, commit string, bi *debug.BuildInfo) versions {
	v := versions{Version: version, Commit: commit, InputVersion: policy.InputVersion, SpecVersion: model.SpecVersion,
		OPA: "unknown", Framework: frameworkVersion, Go: runtime.Version(), Backends: sandbox.Backends()}
	if bi == nil {
		return v
	}
	if v.Version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v.Version = bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == opaModule {
			v.OPA = d.Version
			if d.Replace != nil && d.Replace.Version != "" {
				v.OPA = d.Replace.Version
			}
		}
	}
	if v.Commit == "" {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				v.Commit = s.Value
			}
		}
	}
	return v
}
