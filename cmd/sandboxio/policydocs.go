package main

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strings"
	"text/template"

	"github.com/spf13/pflag"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/policycheck"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/policies"
)

func init() {
	register(&command{
		name:    "policy docs",
		summary: "print the rule catalogue (Markdown) from the policies' METADATA",
		usage:   "policy docs [--policy DIR]... [-o FILE]",
		help: `Writes the rule catalogue as Markdown from the rules' METADATA, followed by the refusals
made in Go; with --policy, the team rules too. The guide docs/guides/policies.md is this
output for the embedded bundle.`,
		example: `sandboxio policy docs -o catalogue.md
sandboxio policy docs --policy ./policies`,
		setup: func(fs *pflag.FlagSet) runFunc {
			var policyDirs stringsFlag
			var output string
			fs.Var(&policyDirs, "policy", "also list the team rules in `DIR`; repeatable")
			fs.StringVarP(&output, "o", "o", "", "write to `FILE` instead of standard output")
			return func(ctx context.Context, e *env, args []string) int {
				if len(args) > 0 {
					fmt.Fprintf(e.stderr, "sandboxio policy docs: unexpected argument %q\n", args[0])
					return exitUsage
				}
				eng, err := policy.Load(ctx, policyDirs)
				if err != nil {
					fmt.Fprintf(e.stderr, "sandboxio policy docs: load policies: %v\n", err)
					return exitUsage
				}
				var buf bytes.Buffer
				if err := writeCatalogue(&buf, eng, len(policyDirs) > 0); err != nil {
					fmt.Fprintf(e.stderr, "sandboxio policy docs: %v\n", err)
					return exitUsage
				}
				if output == "" {
					_, err = e.stdout.Write(buf.Bytes())
				} else {
					err = os.WriteFile(output, buf.Bytes(), 0o644)
				}
				if err != nil {
					fmt.Fprintf(e.stderr, "sandboxio policy docs: %v\n", err)
					return exitUsage
				}
				return exitOK
			}
		},
	})
}

// packageDoc is a built-in package's own METADATA.
type packageDoc struct{ title, description string }

// packageDocs reads the package annotations of the embedded bundle; the
// engine indexes rule annotations only.
func packageDocs() (map[string]packageDoc, error) {
	names, err := fs.Glob(policies.Bundle, "*.rego")
	if err != nil {
		return nil, err
	}
	out := map[string]packageDoc{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.rego") {
			continue
		}
		src, err := policies.Bundle.ReadFile(name)
		if err != nil {
			return nil, err
		}
		m, err := ast.ParseModuleWithOpts(name, string(src), ast.ParserOptions{RegoVersion: ast.RegoV1, ProcessAnnotation: true})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		for _, a := range m.Annotations {
			if a.Scope == "package" {
				out[strings.TrimPrefix(m.Package.Path.String(), "data.")] = packageDoc{a.Title, a.Description}
			}
		}
	}
	return out, nil
}

// catalogueTemplate is the prose of the rule catalogue; writeCatalogue
// fills in the rules.
//
//go:embed catalogue.md.tmpl
var catalogueTemplate string

var catalogue = template.Must(template.New("catalogue").Funcs(template.FuncMap{
	"kind": kindName, "code": code, "cell": cell, "para": oneParagraph, "sentence": sentence, "lower": strings.ToLower,
}).Parse(catalogueTemplate))

// catalogueSection is one Rego package of the catalogue with its rules.
type catalogueSection struct {
	Name, Title, Description string
	Rules                    []policycheck.RuleDoc
}

func writeCatalogue(w io.Writer, eng *policy.Engine, withTeam bool) error {
	pkgs, err := packageDocs()
	if err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	var data struct {
		Packages []*catalogueSection
		GoRules  []policycheck.RuleDoc
	}
	byPkg := map[string]*catalogueSection{}
	for _, r := range policycheck.Catalogue(eng) {
		switch {
		case r.Package == "go":
			data.GoRules = append(data.GoRules, r)
		case r.Builtin || withTeam:
			s := byPkg[r.Package]
			if s == nil {
				doc := pkgs[r.Package]
				s = &catalogueSection{Name: r.Package, Title: doc.title, Description: doc.description}
				byPkg[r.Package] = s
				data.Packages = append(data.Packages, s)
			}
			s.Rules = append(s.Rules, r)
		}
	}
	sort.SliceStable(data.Packages, func(i, j int) bool {
		a, b := data.Packages[i], data.Packages[j]
		if a.Rules[0].Builtin != b.Rules[0].Builtin {
			return a.Rules[0].Builtin
		}
		return a.Name < b.Name
	})
	return catalogue.Execute(w, data)
}

func kindName(r policycheck.RuleDoc) string {
	switch {
	case r.ID == rules.CheckedAtApply:
		return "note"
	case r.Decision != "":
		return r.Decision // block or require_approval: a pre-execution rule
	case r.Deny:
		return "deny"
	}
	return "warn"
}

func code(s string) string {
	if s == "" {
		return ""
	}
	return "`" + s + "`"
}

// cell keeps a table cell on one line.
func cell(s string) string {
	return strings.ReplaceAll(oneParagraph(s), "|", `\|`)
}

func oneParagraph(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func sentence(s string) string {
	s = oneParagraph(s)
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
