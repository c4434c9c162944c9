package backends

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// ruleTextInGo lists, with the reason, the places still allowed to write a
// policy rule's user-facing text in Go. The domain model sits below the
// backends and the engine and cannot read the catalogue; its conversions
// refuse values no document could carry, and the backends raise them again
// as backstop errors (BackstopOf).
var ruleTextInGo = map[string]string{
	"model/caps.go": "domain model: cap bounds conversion (SBX-RES-001), re-raised by BackstopOf",
	"model/tier.go": "domain model: tier parsing (SBX-ISO-002)",
}

var prose = regexp.MustCompile(`[A-Za-z]{2,}\s+[A-Za-z]{2,}`)

// A rule that the policy bundle decides has its text in its METADATA, and
// Go raises it, where it must (a backstop, a check of what no input
// document holds), through Backstop or RuleRefusal with the catalogue's
// words. This test fails when Go code builds an error or warning that names
// a Rego rule and writes its message or fix itself.
func TestNoRegoRuleTextInGo(t *testing.T) {
	rules := builtinRules()
	if len(rules) < 20 {
		t.Fatalf("the catalogue has %d rules; the bundle's METADATA was not read", len(rules))
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	ids := ruleConstants(t, filepath.Join(root, "internal", "rules", "rules.go"))
	var found []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "testdata", "vendor", "node_modules", "bin", "dist": // bin holds release-check clones
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			var rule string
			var text bool
			for _, e := range lit.Elts {
				kv, ok := e.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				key, _ := kv.Key.(*ast.Ident)
				if key == nil {
					continue
				}
				switch key.Name {
				case "Rule":
					switch v := kv.Value.(type) {
					case *ast.BasicLit:
						if v.Kind == token.STRING {
							rule, _ = strconv.Unquote(v.Value)
						}
					case *ast.SelectorExpr: // rules.NetLearn: every ID is declared there
						if pkg, ok := v.X.(*ast.Ident); ok && pkg.Name == "rules" {
							rule = ids[v.Sel.Name]
						}
					}
				case "Message", "Fix":
					text = text || hasProse(kv.Value)
				}
			}
			if _, rego := rules[rule]; rego && text {
				if _, ok := ruleTextInGo[rel]; !ok {
					found = append(found, fset.Position(lit.Pos()).String()+": "+rule)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Errorf("%s: the rule's text is written in Go; raise it with backends.Backstop or RuleRefusal (the catalogue's text)", strings.TrimPrefix(f, root+"/"))
	}
}

// hasProse reports whether an expression holds a string literal of words.
func hasProse(e ast.Expr) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if b, ok := n.(*ast.BasicLit); ok && b.Kind == token.STRING {
			if s, err := strconv.Unquote(b.Value); err == nil && prose.MatchString(s) {
				found = true
			}
		}
		return !found
	})
	return found
}

// ruleConstants maps each constant of internal/rules to the ID it holds.
func ruleConstants(t *testing.T, file string) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range vs.Names {
			if i < len(vs.Values) {
				if b, ok := vs.Values[i].(*ast.BasicLit); ok && b.Kind == token.STRING {
					ids[name.Name], _ = strconv.Unquote(b.Value)
				}
			}
		}
		return true
	})
	if len(ids) < 20 {
		t.Fatalf("read %d rule constants from %s", len(ids), file)
	}
	return ids
}
