// Package verdict turns the engine's findings into the decision: each
// finding's enforcement level (from its rule's METADATA) and any waiver
// decide whether it refuses, warns or is waived. The provider at plan and
// apply, `sandboxio policy check` and the run-time helper all decide
// through Check, so a configuration gets one decision everywhere.
package verdict

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
)

// Outcome is what one finding does to the decision.
type Outcome string

// Outcomes.
const (
	Fail   Outcome = "fail"   // a mandatory finding: the configuration is refused
	Warn   Outcome = "warn"   // an advisory finding
	Waived Outcome = "waived" // a soft-mandatory finding covered by an active waiver
)

// Result is one finding with its level and outcome.
type Result struct {
	policy.Finding
	Enforcement policy.Enforcement
	Severity    string
	Outcome     Outcome
	// Waiver is the waiver that applied (Waived), or one that matched the
	// finding but could not apply (see Note).
	Waiver *Waiver
	// Note says how a waiver applied, or why a matching one did not.
	Note string
}

// Verdict is the decision on one input document.
type Verdict struct {
	Results []Result // failures, then waived findings, then warnings
}

// Failed reports whether a finding refuses the configuration.
func (v Verdict) Failed() bool {
	for _, r := range v.Results {
		if r.Outcome == Fail {
			return true
		}
	}
	return false
}

// Count returns the number of results with the outcome.
func (v Verdict) Count(o Outcome) int {
	n := 0
	for _, r := range v.Results {
		if r.Outcome == o {
			n++
		}
	}
	return n
}

// Err returns the first refusal as a *model.Error, or nil.
func (v Verdict) Err() error {
	for _, r := range v.Results {
		if r.Outcome == Fail {
			return r.Error()
		}
	}
	return nil
}

// Options are what the decision depends on beside the document.
type Options struct {
	// Address is the resource address; empty falls back to the document's.
	// When neither is known (Terraform does not tell a provider the address
	// of what it plans, and the run-time helper has a spec), a waiver
	// applies if its pattern could name a resource of the document's type;
	// `sandboxio policy check`, which sees addresses, applies it exactly.
	Address string
	Waivers *Waivers
	// Now decides which waivers have expired; zero means time.Now().
	Now time.Time
}

// Check evaluates the document and decides: the one decision function.
func Check(ctx context.Context, eng *policy.Engine, in policy.Input, opts Options) (Verdict, error) {
	d, err := eng.Evaluate(ctx, in)
	if err != nil {
		return Verdict{}, err
	}
	if opts.Address == "" {
		opts.Address = in.Address
	}
	return Decide(eng, d, in.Kind, opts), nil
}

// Decide applies enforcement levels and waivers to an evaluated decision.
func Decide(eng *policy.Engine, d policy.Decision, kind string, opts Options) Verdict {
	if len(d.Denies) == 0 && len(d.Warnings) == 0 {
		return Verdict{}
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	var v Verdict
	for _, group := range [][]policy.Finding{d.Denies, d.Warnings} {
		for _, f := range group {
			v.Results = append(v.Results, decideOne(eng, f, kind, opts, now))
		}
	}
	rank := map[Outcome]int{Fail: 0, Waived: 1, Warn: 2}
	sort.SliceStable(v.Results, func(i, j int) bool { return rank[v.Results[i].Outcome] < rank[v.Results[j].Outcome] })
	return v
}

func decideOne(eng *policy.Engine, f policy.Finding, kind string, opts Options, now time.Time) Result {
	info := eng.RuleFor(f)
	r := Result{Finding: f, Enforcement: info.Enforcement(), Severity: info.Severity(), Outcome: Warn}
	if f.Title == "" {
		r.Title = info.Title
	}
	if !r.Enforcement.Mandatory() {
		return r
	}
	r.Outcome = Fail
	if opts.Waivers == nil {
		return r
	}
	for _, w := range opts.Waivers.List {
		exact, ok := w.covers(f.ID, opts.Address, kind)
		if !ok {
			continue
		}
		status, detail := w.Status(eng, now)
		// A built-in rule cannot be waived, except a pre-execution rule
		// that the team made soft-mandatory (exec_enforcement).
		if status != StatusActive || (f.Builtin && f.Decision == "") || r.Enforcement != policy.SoftMandatory {
			if r.Waiver == nil {
				r.Waiver = w
				if status == StatusActive {
					detail = fmt.Sprintf("%s is %s and cannot be waived", f.ID, r.Enforcement)
				}
				r.Note = fmt.Sprintf("waiver %s not applied: %s", w.Source, detail)
			}
			continue
		}
		r.Outcome, r.Waiver = Waived, w
		r.Note = fmt.Sprintf("waived by %s until %s: %s", w.Source, w.Expires, w.Reason)
		if !exact {
			r.Note += fmt.Sprintf(" (the address is not known here, so the waiver applies to every %s its pattern %q could name; "+
				"`sandboxio policy check` applies it to exact addresses)", typesOf(kind), w.Address)
		}
		return r
	}
	return r
}

// covers reports whether the waiver names the rule and the resource, and
// whether the address was matched exactly (rather than by type).
func (w *Waiver) covers(rule, address, kind string) (exact, ok bool) {
	if w.Rule != rule {
		return false, false
	}
	if address != "" {
		return true, globMatch(w.Address, address)
	}
	for _, t := range kindTypes[kind] {
		if couldName(w.Address, t) {
			return false, true
		}
	}
	return false, false
}

func typesOf(kind string) string {
	ts := kindTypes[kind]
	switch len(ts) {
	case 0:
		return "resource"
	case 1:
		return ts[0]
	}
	return ts[0] + " or " + ts[1]
}

// WithoutTeamReads sets aside the findings of the team packages that may
// read any of paths: input values that are placeholders at plan (see
// inputs.DecisionFree). No built-in rule decides on them, so the other
// findings stand; the set-aside ones are decided at apply, on the real
// values. It reports whether any team package may read them.
func WithoutTeamReads(eng *policy.Engine, v Verdict, paths [][]string) (Verdict, bool) {
	if len(paths) == 0 || !eng.TeamReads(paths...) {
		return v, false
	}
	kept := v.Results[:0:0]
	for _, r := range v.Results {
		if r.Builtin || !eng.PackageReads(r.Package, paths...) {
			kept = append(kept, r)
		}
	}
	v.Results = kept
	return v, true
}
