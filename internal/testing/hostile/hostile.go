// Package hostile holds team policy packages written to break the policy
// engine: values that can be undefined, complete rules, functions,
// conflicting definitions, runtime errors, references to data that does not
// exist and rules that run until the evaluation budget is gone. The engine,
// the provider, `sandboxio policy check` and the run-time helper are each
// tested with every one of them; none may make a built-in refusal
// disappear. Test support only.
package hostile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
)

// Outcome is what the engine must do with a hostile package.
type Outcome int

const (
	// RefusedAtLoad: loading the policies fails with SBX-POL-001.
	RefusedAtLoad Outcome = iota
	// EvalRefused: the policies load, and every evaluation fails closed
	// with the given SBX-POL rule instead of returning a decision.
	EvalRefused
	// BuiltinsIntact: the policies load and evaluate; the built-in
	// findings are exactly those without the team package.
	BuiltinsIntact
)

// Case is one hostile team bundle.
type Case struct {
	Name  string
	Files map[string]string // file name -> Rego source
	Want  Outcome
	// Rule is the SBX-POL rule of the refusal (load or evaluation).
	Rule string
	// Slow marks a case that runs until the evaluation budget is spent.
	Slow bool
}

// Cases lists every hostile bundle.
func Cases() []Case {
	return []Case{
		{Name: "complete deny that is undefined", Want: RefusedAtLoad, Rule: rules.PolicyLoad, Files: one(`package team.silence
deny := "never" if { input.kind == "no-such-kind" }
`)},
		{Name: "warn from a missing input value", Want: RefusedAtLoad, Rule: rules.PolicyLoad, Files: one(`package team.silence
warn := input.nope
`)},
		{Name: "deny from a missing template attribute", Want: RefusedAtLoad, Rule: rules.PolicyLoad, Files: one(`package team.silence
deny := input.template.nonexistent
`)},
		{Name: "deny as a function", Want: RefusedAtLoad, Rule: rules.PolicyLoad, Files: one(`package team.silence
deny(x) := x if { x == "never" }
`)},
		{Name: "default deny", Want: RefusedAtLoad, Rule: rules.PolicyLoad, Files: one(`package team.silence
default deny := set()
`)},
		{Name: "deny as an object", Want: RefusedAtLoad, Rule: rules.PolicyLoad, Files: one(`package team.silence
deny[k] := "x" if { some k in input.nope }
`)},
		{Name: "deny on a nested reference", Want: RefusedAtLoad, Rule: rules.PolicyLoad, Files: one(`package team.silence
deny.inner contains "x" if { input.nope }
`)},
		{Name: "set and complete deny in two files of one package", Want: RefusedAtLoad, Rule: rules.PolicyLoad, Files: map[string]string{
			"a.rego": "package team.silence\ndeny contains \"a\" if { input.nope }\n",
			"b.rego": "package team.silence\ndeny := {\"b\"} if { input.nope }\n",
		}},
		{Name: "package inside the built-in namespace", Want: RefusedAtLoad, Rule: rules.PolicyLoad, Files: one(`package sandboxio.network
deny contains "x" if { input.nope }
`)},
		{Name: "conflicting function values at run time", Want: EvalRefused, Rule: rules.PolicyEval, Files: one(`package team.conflict
f(x) := 1 if { x }
f(x) := 2 if { x }
deny contains "conflict" if { f(true) == 3 }
`)},
		{Name: "conflicting complete values at run time", Want: EvalRefused, Rule: rules.PolicyEval, Files: one(`package team.conflict
mode := "a" if { input.kind }
mode := "b" if { input.kind }
deny contains "conflict" if { mode == "c" }
`)},
		{Name: "runtime error in a built-in function", Want: EvalRefused, Rule: rules.PolicyEval, Files: one(`package team.broken
deny contains msg if {
	n := to_number("not a number")
	msg := sprintf("%v", [n])
}
`)},
		{Name: "division by zero", Want: EvalRefused, Rule: rules.PolicyEval, Files: one(`package team.broken
deny contains msg if {
	n := 1 / count([])
	msg := sprintf("%v", [n])
}
`)},
		{Name: "references to data that does not exist", Want: BuiltinsIntact, Files: one(`package team.ghost
deny contains msg if {
	data.no.such.document
	msg := "never"
}
deny contains data.team.ghost.missing
warn contains x if { some x in data.nothing.here }
`)},
		{Name: "rules that never fire", Want: BuiltinsIntact, Files: one(`package team.quiet
deny contains "never" if { input.kind == "no-such-kind" }
warn contains "never" if { false }
`)},
		{Name: "nested iteration until the budget runs out", Want: EvalRefused, Rule: rules.PolicyTimedOut, Slow: true, Files: one(`package team.loop
deny contains msg if {
	some i in numbers.range(1, 100000)
	some j in numbers.range(1, 100000)
	i + j < 0
	msg := "unreachable"
}
`)},
	}
}

func one(src string) map[string]string { return map[string]string{"team.rego": src} }

// Write writes the case's files into a new directory and returns it.
func (c Case) Write(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for name, src := range c.Files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
