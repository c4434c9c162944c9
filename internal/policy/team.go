package policy

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// Enforcement says what a finding does to the decision. Team rules declare
// it in their METADATA (custom.enforcement); built-in rules cannot lower it.
type Enforcement string

// Enforcement levels, Sentinel's names: advisory findings warn, mandatory
// ones refuse; a soft-mandatory refusal can be waived, a hard-mandatory one
// cannot.
const (
	Advisory      Enforcement = "advisory"
	SoftMandatory Enforcement = "soft-mandatory"
	HardMandatory Enforcement = "hard-mandatory"
)

// Mandatory reports whether a finding at this level refuses.
func (l Enforcement) Mandatory() bool { return l == SoftMandatory || l == HardMandatory }

// Severities a rule may declare in custom.severity.
var Severities = []string{"low", "medium", "high", "critical"}

// ReservedIDPrefix starts every built-in rule ID (and the Go-side refusals).
// Team rules may not use it, so a team annotation can never stand in for a
// built-in rule's metadata.
const ReservedIDPrefix = "SBX-"

// capabilitiesNamespace is where the capability data lives (data.capabilities).
// The built-in rules read it, so a team package there would rewrite what
// they believe a backend can enforce.
const capabilitiesNamespace = "capabilities"

// Enforcement returns a rule's level. Built-in refusals are hard-mandatory
// and built-in warnings advisory, whatever an annotation says. A team rule
// takes its custom.enforcement, and without one deny means hard-mandatory
// and warn advisory: a refusal is never weakened by omission.
func (r RuleInfo) Enforcement() Enforcement {
	if r.Builtin && r.Decision != "" {
		// A built-in pre-execution rule is advisory unless the team's
		// exec_enforcement raised it (RuleFor and Rule set level).
		if r.level != "" {
			return r.level
		}
		return Advisory
	}
	if !r.Builtin {
		if s, ok := r.Custom["enforcement"].(string); ok && validEnforcement(s) {
			return Enforcement(s)
		}
	}
	if r.Deny {
		return HardMandatory
	}
	return Advisory
}

// Severity returns the rule's custom.severity; built-in refusals are high
// and built-in warnings medium.
func (r RuleInfo) Severity() string {
	if !r.Builtin {
		if s, ok := r.Custom["severity"].(string); ok && validSeverity(s) {
			return s
		}
	}
	if r.Deny {
		return "high"
	}
	return "medium"
}

// RuleFor returns the METADATA that governs a finding. A built-in finding
// is looked up among the built-in rules only and a team finding among the
// team rules only, so neither can borrow the other's enforcement. A finding
// with no annotated rule (a team rule returning a plain message) gets a
// description built from its package and kind.
func (e *Engine) RuleFor(f Finding) RuleInfo {
	if info, ok := e.rules[f.ID]; ok && info.Builtin == f.Builtin {
		return e.withLevel(info)
	}
	return RuleInfo{ID: f.ID, Title: f.Title, Class: f.Class, Attribute: f.Attribute, Fix: f.Fix,
		Package: f.Package, Deny: f.Deny, Builtin: f.Builtin}
}

// Load returns the process-wide engine for policyPaths (see Shared) after
// CheckTeam: every caller that loads team policies (the provider, the CLI,
// the run-time helper) goes through it, so all refuse the same bundles.
func Load(ctx context.Context, policyPaths []string) (*Engine, error) {
	e, err := Shared(ctx, policyPaths)
	if err != nil {
		return nil, err
	}
	if err := e.CheckTeam(); err != nil {
		return nil, err
	}
	return e, nil
}

// CheckTeam refuses team policies that could change what a built-in rule
// decides or what it is reported as: a package under data.capabilities, a
// rule ID in the reserved SBX- range, two team rules sharing an ID with
// different levels, and an enforcement or severity outside the known values.
// (Packages under the sandboxio namespace are refused when the bundle is
// compiled.)
func (e *Engine) CheckTeam() error {
	var problems []string
	for _, m := range e.compiler.Modules {
		if isBuiltinPackage(m.Package.Path) {
			continue
		}
		if len(m.Package.Path) > 1 && m.Package.Path[1].Value.Compare(ast.String(capabilitiesNamespace)) == 0 {
			problems = append(problems, fmt.Sprintf("%s declares package %s, over the capability data the built-in rules read",
				locFile(m.Package.Location), packageName(m.Package.Path)))
		}
	}
	seen := map[string]RuleInfo{}
	for _, a := range e.compiler.GetAnnotationSet().Flatten() {
		ann := a.Annotations
		if ann == nil || ann.Custom == nil || len(a.Path) < 2 || isBuiltinPackage(a.Path) {
			continue
		}
		id, _ := ann.Custom["id"].(string)
		where := locFile(ann.Location)
		if raw, ok := ann.Custom["id"]; ok && id == "" {
			problems = append(problems, fmt.Sprintf("%s: custom.id must be a non-empty string, not %v", where, raw))
			continue
		}
		if id == "" {
			continue
		}
		if strings.HasPrefix(strings.ToUpper(id), ReservedIDPrefix) {
			problems = append(problems, fmt.Sprintf("%s: rule ID %s is in the reserved %s range of the built-in rules", where, id, ReservedIDPrefix))
		}
		if raw, ok := ann.Custom["enforcement"]; ok {
			if s, _ := raw.(string); !validEnforcement(s) {
				problems = append(problems, fmt.Sprintf("%s: rule %s has enforcement %v; use advisory, soft-mandatory or hard-mandatory", where, id, raw))
			}
		}
		if raw, ok := ann.Custom["severity"]; ok {
			if s, _ := raw.(string); !validSeverity(s) {
				problems = append(problems, fmt.Sprintf("%s: rule %s has severity %v; use %s", where, id, raw, strings.Join(Severities, ", ")))
			}
		}
		info := RuleInfo{Custom: ann.Custom}
		last, _ := a.Path[len(a.Path)-1].Value.(ast.String)
		info.Deny = string(last) == "deny"
		if prev, ok := seen[id]; ok && prev.Enforcement() != info.Enforcement() {
			problems = append(problems, fmt.Sprintf("%s: rule ID %s is declared twice with different enforcement (%s and %s)",
				where, id, prev.Enforcement(), info.Enforcement()))
		}
		seen[id] = info
	}
	if len(problems) == 0 {
		return nil
	}
	sort.Strings(problems)
	return configErr("team policies refused: "+strings.Join(problems, "; "),
		"give team rules their own IDs (not SBX-...), packages outside sandboxio and capabilities, "+
			"and METADATA custom.enforcement advisory, soft-mandatory or hard-mandatory")
}

func validEnforcement(s string) bool {
	switch Enforcement(s) {
	case Advisory, SoftMandatory, HardMandatory:
		return true
	}
	return false
}

func validSeverity(s string) bool {
	for _, v := range Severities {
		if s == v {
			return true
		}
	}
	return false
}

func locFile(l *ast.Location) string {
	if l == nil {
		return "team policy"
	}
	return fmt.Sprintf("%s:%d", l.File, l.Row)
}
