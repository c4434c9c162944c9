// Command crosscheck type-checks packages, and every package they import,
// from source for the GOOS/GOARCH of its environment, without compiling
// them: a platform-only break (a call to a function that only a _linux.go
// file defines, a syscall another OS lacks) shows as a type error, at a
// fraction of the CPU a cross-compile of every dependency costs.
//
//	GOOS=darwin GOARCH=arm64 crosscheck ./...
//
// It must run on the host: build it first (go run would build it for GOOS).
package main

import (
	"fmt"
	"os"

	"golang.org/x/tools/go/packages"
)

func main() {
	patterns := os.Args[1:]
	if len(patterns) == 0 {
		patterns = []string{"./..."}
	}
	cfg := &packages.Config{
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedImports | packages.NeedDeps |
			packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo,
		Env: append(os.Environ(), "CGO_ENABLED=0"),
	}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "crosscheck:", err)
		os.Exit(2)
	}
	n := 0
	packages.Visit(pkgs, nil, func(p *packages.Package) { n++ })
	if packages.PrintErrors(pkgs) > 0 {
		fmt.Fprintf(os.Stderr, "crosscheck: type errors for %s/%s\n", os.Getenv("GOOS"), os.Getenv("GOARCH"))
		os.Exit(1)
	}
	fmt.Printf("crosscheck: %d packages type-check for %s/%s\n", n, goEnv("GOOS"), goEnv("GOARCH"))
}

func goEnv(k string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return "host"
}
