package policycheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
)

const rulesImport = "github.com/sandboxio/terraform-provider-sandboxio/internal/rules"

var anyID = regexp.MustCompile(`SBX-[A-Z]{3}-[0-9]{3}`)

// goSources parses every non-test Go file of the module but those of
// internal/rules, keyed by their path from the module root.
func goSources(t *testing.T) (map[string]*ast.File, *token.FileSet) {
	t.Helper()
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel == filepath.Join("internal", "rules") || rel == "bin" || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = f
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 50 {
		t.Fatalf("found only %d Go files under %s", len(files), root)
	}
	return files, fset
}

// declaredIDs reads the constants of internal/rules: name -> ID.
func declaredIDs(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join("..", "rules", "rules.go"), nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	byID := map[string]string{}
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok {
					t.Errorf("rules.%s is not a string literal", name.Name)
					continue
				}
				id, _ := strconv.Unquote(lit.Value)
				if prev, dup := byID[id]; dup {
					t.Errorf("%s is declared twice: rules.%s and rules.%s", id, prev, name.Name)
				}
				byID[id] = name.Name
				out[name.Name] = id
			}
		}
	}
	return out
}

// TestIDsDeclaredOnce holds the rule catalogue and the code to each other:
// every ID that Go or Rego names is in the catalogue, Go names an ID only
// through the constants of internal/rules (declared once each), every
// Go-side catalogue entry is raised somewhere, and the waiver-file refusal
// is made in one place.
func TestIDsDeclaredOnce(t *testing.T) {
	eng, err := policy.Load(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	inCatalogue := map[string]bool{}
	for _, r := range Catalogue(eng) {
		if inCatalogue[r.ID] {
			t.Errorf("the catalogue lists %s twice", r.ID)
		}
		inCatalogue[r.ID] = true
	}

	declared := declaredIDs(t)
	for name, id := range declared {
		if !inCatalogue[id] {
			t.Errorf("rules.%s = %q is in no catalogue entry (Rego METADATA or rules.Docs)", name, id)
		}
	}

	files, fset := goSources(t)
	uses := map[string][]string{} // constant name -> where
	for path, f := range files {
		importsRules := false
		for _, imp := range f.Imports {
			if imp.Path.Value == strconv.Quote(rulesImport) && imp.Name == nil {
				importsRules = true
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BasicLit:
				if n.Kind != token.STRING {
					return true
				}
				s, err := strconv.Unquote(n.Value)
				if err != nil {
					return true
				}
				if anyID.FindString(s) == s && s != "" {
					t.Errorf("%s: the rule ID %q is written as a literal; use its constant in internal/rules", fset.Position(n.Pos()), s)
				}
				for _, id := range anyID.FindAllString(s, -1) {
					if !inCatalogue[id] {
						t.Errorf("%s: %s is named in a string but is in no catalogue entry", fset.Position(n.Pos()), id)
					}
				}
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok && importsRules && x.Name == "rules" {
					if _, ok := declared[n.Sel.Name]; ok {
						uses[n.Sel.Name] = append(uses[n.Sel.Name], path)
					}
				}
			}
			return true
		})
	}

	constOf := map[string]string{}
	for name, id := range declared {
		constOf[id] = name
	}
	for _, d := range rules.Docs {
		name, ok := constOf[d.ID]
		if !ok {
			t.Errorf("the Go-side catalogue entry %s has no constant in internal/rules", d.ID)
			continue
		}
		if len(uses[name]) == 0 {
			t.Errorf("the Go-side catalogue entry %s (rules.%s) is raised nowhere in Go", d.ID, name)
		}
	}
	for name := range declared {
		if len(uses[name]) == 0 {
			t.Errorf("rules.%s is declared but no Go code uses it", name)
		}
	}
	if got := uses["WaiversLoad"]; len(got) != 1 {
		t.Errorf("SBX-POL-002 (a waiver file that cannot be read) is raised in %v; raise it once, in verdict.LoadWaivers", got)
	}

	// The Rego side: every ID the bundle's policies name (in METADATA or in
	// a message) is in the catalogue; their own rules are, by construction.
	regoFiles, err := filepath.Glob(filepath.Join("..", "..", "policies", "*.rego"))
	if err != nil || len(regoFiles) == 0 {
		t.Fatalf("no Rego files: %v", err)
	}
	for _, p := range regoFiles {
		if strings.HasSuffix(p, "_test.rego") {
			continue
		}
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range anyID.FindAllString(string(src), -1) {
			if !inCatalogue[id] {
				t.Errorf("%s names %s, which is in no catalogue entry", p, id)
			}
		}
	}
}
