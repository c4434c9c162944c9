package policy

import (
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// PackageReads reports whether the rules of a package (a Finding's Package,
// such as "team.registries") may read the input document at one of paths
// (key lists from the root: {"template", "image"}), directly or through the
// packages they refer to. It errs on the side of yes (whole input, a containing
// part, a computed key); a bare presence test is no read. The provider asks
// before evaluating placeholders for values unknown at plan: the findings of a
// package that may read them are no decisions.
func (e *Engine) PackageReads(pkg string, paths ...[]string) bool {
	key := pkg + "\x02" + joinPaths(paths)
	if v, ok := e.reads.Load(key); ok {
		return v.(bool)
	}
	reads := false
	seen := map[*ast.Module]bool{}
	for _, m := range e.compiler.Modules {
		if packageName(m.Package.Path) == pkg && e.moduleReads(m, paths, seen) {
			reads = true
			break
		}
	}
	e.reads.Store(key, reads)
	return reads
}

// TeamReads reports whether any team package may read the input at one of
// paths (see PackageReads). With no team policies it is false.
func (e *Engine) TeamReads(paths ...[]string) bool {
	if e.team == nil {
		return false
	}
	for _, r := range e.team.refs {
		if e.PackageReads(r.pkg, paths...) {
			return true
		}
	}
	return false
}

func joinPaths(paths [][]string) string {
	parts := make([]string, len(paths))
	for i, p := range paths {
		parts[i] = strings.Join(p, "\x00")
	}
	return strings.Join(parts, "\x01")
}

// moduleReads reports whether a compiled module refers to input at one of
// paths, itself or through the modules its references into data reach
// (seen holds the modules already followed).
func (e *Engine) moduleReads(m *ast.Module, paths [][]string, seen map[*ast.Module]bool) bool {
	if seen[m] {
		return false
	}
	seen[m] = true
	found := false
	var vis *ast.GenericVisitor
	vis = ast.NewGenericVisitor(func(x any) bool {
		if found {
			return true
		}
		switch x := x.(type) {
		case *ast.Expr:
			// A reference alone in an expression (input.template) only
			// tests that the value is there, which a placeholder is: only
			// the keys it is looked up by are read.
			if t, ok := x.Terms.(*ast.Term); ok && len(x.With) == 0 {
				if r, ok := t.Value.(ast.Ref); ok && r.HasPrefix(ast.InputRootRef) {
					for _, k := range r[1:] {
						vis.Walk(k)
					}
					return true
				}
			}
		case ast.Ref:
			switch {
			case x.HasPrefix(ast.InputRootRef):
				found = overlaps(x[1:], paths)
			case x.HasPrefix(ast.DefaultRootRef):
				found = e.dataReads(x, paths, seen)
			}
		}
		return found
	})
	vis.Walk(m)
	return found
}

// dataReads follows a reference into data to the modules whose package it
// may name (the capability data is no module and reads nothing).
func (e *Engine) dataReads(r ast.Ref, paths [][]string, seen map[*ast.Module]bool) bool {
	for _, m := range e.compiler.Modules {
		if refsOverlap(r[1:], m.Package.Path[1:]) && e.moduleReads(m, paths, seen) {
			return true
		}
	}
	return false
}

// refsOverlap reports whether two paths below a root may name the same
// document or one inside the other: they agree on every constant key they
// both have.
func refsOverlap(a, b ast.Ref) bool {
	for i := 0; i < len(a) && i < len(b); i++ {
		x, xok := a[i].Value.(ast.String)
		y, yok := b[i].Value.(ast.String)
		if xok && yok && x != y {
			return false
		}
	}
	return true
}

// overlaps reports whether a reference into input (rest: the keys after
// input) may read at one of paths: it names a part of the document that
// contains the path, or lies inside it. A key that is not a constant
// matches any key.
func overlaps(rest ast.Ref, paths [][]string) bool {
	for _, p := range paths {
		if overlapsPath(rest, p) {
			return true
		}
	}
	return false
}

func overlapsPath(rest ast.Ref, p []string) bool {
	for i := 0; i < len(rest) && i < len(p); i++ {
		switch k := rest[i].Value.(type) {
		case ast.String:
			if string(k) != p[i] {
				return false
			}
		case ast.Number, ast.Boolean, ast.Null:
			return false // a constant key that is no attribute name
		}
	}
	return true
}
