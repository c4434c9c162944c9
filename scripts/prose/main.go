// Command prose renders the lists of backends and capabilities from the
// capability data (internal/prose): the "prose" section of
// policies/capabilities/data.json, which the Rego rules read, and the
// <!--list:NAME--> regions of the Markdown files and templates it is given.
// go generate runs it from the module root, before tfplugindocs.
//
//	go run ./scripts/prose README.md templates
package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/prose"
	"github.com/sandboxio/terraform-provider-sandboxio/policies"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "prose:", err)
		os.Exit(1)
	}
}

func run(paths []string) error {
	data := filepath.Join("policies", policies.CapabilitiesPath)
	if err := rewrite(data, prose.WithProseSection); err != nil {
		return err
	}
	for _, root := range paths {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || (!strings.HasSuffix(p, ".md") && !strings.HasSuffix(p, ".tmpl")) {
				return err
			}
			return rewrite(p, prose.FillRegions)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// rewrite writes the file only when its text changes.
func rewrite(path string, fill func([]byte) ([]byte, error)) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := fill(old)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if bytes.Equal(out, old) {
		return nil
	}
	return os.WriteFile(path, out, 0o644)
}
