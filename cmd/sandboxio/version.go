package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
	"github.com/sandboxio/terraform-provider-sandboxio/sandbox"
)

func init() {
	register(&command{
		name:    "version",
		summary: "print the version, the policy input version, the embedded OPA and the backends",
		usage:   "version [--json]",
		help: `Prints the CLI's version and what decides with it: the version of the policy input
document, the spec format, the OPA release embedded, the Go toolchain, and the backends
this build can provision sandboxes on (run, run-code). A policy check's result depends on
these, so CI logs should carry them.`,
		setup: func(fs *flag.FlagSet) runFunc {
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
				fmt.Fprintf(e.stdout, "  policy input    v%d\n  spec format     v%d\n  opa             %s\n  go              %s\n  backends        %s\n",
					info.InputVersion, info.SpecVersion, info.OPA, info.Go, strings.Join(info.Backends, ", "))
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
	Go           string `json:"go"`
	// Backends are the DSN schemes run and run-code provision on.
	Backends []string `json:"backends"`
}

func versionInfo() versions {
	v := versions{Version: version, InputVersion: policy.InputVersion, SpecVersion: model.SpecVersion, OPA: "unknown", Go: runtime.Version(), Backends: sandbox.Backends()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v.Version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v.Version = bi.Main.Version
		}
		for _, d := range bi.Deps {
			if d.Path == "github.com/open-policy-agent/opa" {
				v.OPA = d.Version
			}
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				v.Commit = s.Value
			}
		}
	}
	return v
}
