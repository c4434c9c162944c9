package verdict

// Address patterns are globs over Terraform resource addresses: `*` matches
// any run of characters (dots and index brackets included), `?` any one
// character, everything else itself. path.Match is not used because
// addresses hold brackets and quotes (sandboxio_template.t["a"]) that it
// would read as character classes.

// globMatch reports whether s matches the pattern.
func globMatch(pattern, s string) bool {
	p, str := []rune(pattern), []rune(s)
	// Iterative matcher with one backtrack point per star.
	pi, si, star, mark := 0, 0, -1, 0
	for si < len(str) {
		switch {
		case pi < len(p) && (p[pi] == '?' || (p[pi] != '*' && p[pi] == str[si])):
			pi++
			si++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, si
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			si = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// globsIntersect reports whether some string matches both globs. The
// provider uses it when it cannot know a resource's address: a waiver
// applies there if its pattern could name a resource of that type.
func globsIntersect(a, b string) bool {
	x, y := []rune(a), []rune(b)
	type state struct{ i, j int }
	seen := map[state]bool{}
	var visit func(i, j int) bool
	visit = func(i, j int) bool {
		s := state{i, j}
		if seen[s] {
			return false
		}
		seen[s] = true
		if i == len(x) && j == len(y) {
			return true
		}
		// A star may match nothing.
		if i < len(x) && x[i] == '*' && visit(i+1, j) {
			return true
		}
		if j < len(y) && y[j] == '*' && visit(i, j+1) {
			return true
		}
		if i == len(x) || j == len(y) {
			return false
		}
		// Both consume one common character.
		cx, cy := x[i], y[j]
		if cx != '*' && cx != '?' && cy != '*' && cy != '?' && cx != cy {
			return false
		}
		ni, nj := i+1, j+1
		if cx == '*' {
			ni = i // a star stays put after consuming
		}
		if cy == '*' {
			nj = j
		}
		if ni == i && nj == j {
			return false // two stars consuming together add nothing
		}
		return visit(ni, nj)
	}
	return visit(0, 0)
}

// couldName reports whether pattern could match the address of some
// resource of the given type (sandboxio_template, data.sandboxio_...), in
// the root module or any child module.
func couldName(pattern, resourceType string) bool {
	return globsIntersect(pattern, resourceType+".*") || globsIntersect(pattern, "module.*."+resourceType+".*")
}

// kindTypes lists the resource types whose documents have each kind. A
// spec (at run time) comes from a template or a tenant sandbox.
var kindTypes = map[string][]string{
	"template":       {"sandboxio_template"},
	"network_policy": {"sandboxio_network_policy"},
	"resource_caps":  {"sandboxio_resource_caps"},
	"tenant_sandbox": {"data.sandboxio_tenant_sandbox"},
	"spec":           {"sandboxio_template", "data.sandboxio_tenant_sandbox"},
	// A run or run_code call: its address is exec/TEMPLATE/TENANT/SESSION.
	"exec": {"exec"},
}
