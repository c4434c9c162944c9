package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/analysers"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/execscan"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// The pre-execution hook. Every run and run_code call is decided, before it
// executes, by sandboxio.exec and every team package ending in .exec, with two
// sets instead of deny and warn:
//
//	block contains f if { ... }             # the call must not run
//	require_approval contains f if { ... }  # it runs only once approved
//
// Built-in exec rules are advisory unless a team raises them (ExecEnforcement);
// team exec rules default to hard-mandatory. See docs/design/exec-hook.md.

// KindExec is the kind of the pre-execution hook's input document.
const KindExec = "exec"

// Decision sets of the exec packages.
const (
	DecisionBlock    = "block"
	DecisionApproval = "require_approval"
)

// Ops of the exec document.
const (
	OpRun     = "run"
	OpRunCode = "run_code"
)

// ExecEnforcementKey is the custom METADATA key by which a team sets the
// enforcement of built-in exec rules:
//
//	# METADATA
//	# custom:
//	#   exec_enforcement:
//	#     SBX-EXE-001: hard-mandatory
//	#     SBX-EXE-004: soft-mandatory
//	package acme.exec
const ExecEnforcementKey = "exec_enforcement"

func isExecSet(name string) bool { return name == DecisionBlock || name == DecisionApproval }

// isExecPackage reports whether a package holds pre-execution rules: its
// last name is exec (data.sandboxio.exec, data.acme.exec).
func isExecPackage(path ast.Ref) bool {
	if len(path) < 2 {
		return false
	}
	last, ok := path[len(path)-1].Value.(ast.String)
	return ok && last == "exec"
}

// execQueries are the prepared queries of the exec packages.
type execQueries struct {
	builtin *decisionQuery
	team    *decisionQuery
	levels  map[string]Enforcement // built-in exec rule ID -> the team's level
}

// checkExecForms refuses a deny or warn in an exec package (it would be
// evaluated on configuration documents, never on a call), a block or
// require_approval outside one (it would never be evaluated), and either
// set written as anything but a partial set rule.
func checkExecForms(modules map[string]*ast.Module) error {
	var problems []string
	for key, m := range modules {
		exec := isExecPackage(m.Package.Path)
		for _, r := range m.Rules {
			ref := r.Head.Ref()
			if len(ref) == 0 {
				continue
			}
			name, ok := ref[0].Value.(ast.Var)
			if !ok {
				continue
			}
			where := strings.TrimPrefix(strings.TrimPrefix(key, "team:"), "builtin:")
			if r.Location != nil {
				where = fmt.Sprintf("%s:%d", r.Location.File, r.Location.Row)
			}
			pkg := packageName(m.Package.Path)
			switch {
			case exec && (name == "deny" || name == "warn"):
				problems = append(problems, fmt.Sprintf("%s: %s in exec package %s: exec packages decide with block and require_approval", where, name, pkg))
			case !exec && isExecSet(string(name)):
				problems = append(problems, fmt.Sprintf("%s: %s in package %s, which is not an exec package (its name must end in .exec)", where, name, pkg))
			case exec && isExecSet(string(name)) && (r.Default || len(r.Head.Args) > 0 || len(ref) != 1 || r.Head.RuleKind() != ast.MultiValue):
				problems = append(problems, fmt.Sprintf("%s: %s in package %s is %s, not a partial set rule", where, name, pkg, describeRuleForm(r)))
			}
		}
	}
	if len(problems) == 0 {
		return nil
	}
	sort.Strings(problems)
	return configErr("exec policies refused: "+strings.Join(problems, "; "),
		"write pre-execution rules in a package whose name ends in .exec (package acme.exec), as "+
			"`block contains f if { ... }` or `require_approval contains f if { ... }`; keep deny and warn in the other packages")
}

// execRefs lists the block and require_approval sets of the exec packages
// of c, built-in ones or team ones.
func execRefs(c *ast.Compiler, builtin bool) []ruleRef {
	seen := map[ruleRef]bool{}
	var refs []ruleRef
	for _, m := range c.Modules {
		if !isExecPackage(m.Package.Path) || isBuiltinPackage(m.Package.Path) != builtin {
			continue
		}
		pkg := packageName(m.Package.Path)
		for _, r := range m.Rules {
			name := r.Head.Name.String()
			if len(r.Head.Reference) > 0 {
				name = r.Head.Reference[0].Value.(ast.Var).String()
			}
			if !isExecSet(name) {
				continue
			}
			ref := ruleRef{pkg: pkg, deny: true, builtin: builtin, set: name}
			if !seen[ref] {
				seen[ref] = true
				refs = append(refs, ref)
			}
		}
	}
	sort.Slice(refs, func(i, j int) bool {
		if refs[i].pkg != refs[j].pkg {
			return refs[i].pkg < refs[j].pkg
		}
		return refs[i].set < refs[j].set
	})
	return refs
}

// prepareExec prepares the exec queries: the built-in one on the bundle's
// own compiler, the team's on the compiler with the team's modules.
func prepareExec(builtinCompiler, compiler *ast.Compiler) (execQueries, error) {
	var q execQueries
	if refs := execRefs(builtinCompiler, true); len(refs) > 0 {
		b, err := prepare(builtinCompiler, refs, true)
		if err != nil {
			return q, err
		}
		q.builtin = &b
	}
	if compiler != builtinCompiler {
		if refs := execRefs(compiler, false); len(refs) > 0 {
			t, err := prepare(compiler, refs, true)
			if err != nil {
				return q, err
			}
			q.team = &t
		}
	}
	return q, nil
}

// execLevels reads the teams' exec_enforcement declarations. Every ID must
// be a built-in exec rule and every level a known one; two declarations of
// different levels for one rule are refused, as two team rules sharing an
// ID with different levels are.
func execLevels(c *ast.Compiler, known map[string]RuleInfo) (map[string]Enforcement, error) {
	levels := map[string]Enforcement{}
	var problems []string
	for _, a := range c.GetAnnotationSet().Flatten() {
		ann := a.Annotations
		if ann == nil || ann.Custom == nil || len(a.Path) < 1 || isBuiltinPackage(a.Path) {
			continue
		}
		raw, ok := ann.Custom[ExecEnforcementKey]
		if !ok {
			continue
		}
		where := locFile(ann.Location)
		m, ok := raw.(map[string]any)
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: custom.%s must map built-in exec rule IDs to levels", where, ExecEnforcementKey))
			continue
		}
		for id, v := range m {
			s, _ := v.(string)
			info, known := known[id]
			switch {
			case !known || !info.Builtin || info.Decision == "":
				problems = append(problems, fmt.Sprintf("%s: %s names %s, which is not a built-in exec rule", where, ExecEnforcementKey, id))
			case !validEnforcement(s):
				problems = append(problems, fmt.Sprintf("%s: %s gives %s the level %v; use advisory, soft-mandatory or hard-mandatory", where, ExecEnforcementKey, id, v))
			case levels[id] != "" && levels[id] != Enforcement(s):
				problems = append(problems, fmt.Sprintf("%s: %s is given two levels (%s and %s)", where, id, levels[id], s))
			default:
				levels[id] = Enforcement(s)
			}
		}
	}
	if len(problems) == 0 {
		return levels, nil
	}
	sort.Strings(problems)
	return nil, configErr("team policies refused: "+strings.Join(problems, "; "),
		"declare exec_enforcement as a map from built-in exec rule IDs (SBX-EXE-...) to advisory, soft-mandatory or hard-mandatory, once per rule")
}

// withLevel gives a built-in exec rule the level the team declared.
func (e *Engine) withLevel(r RuleInfo) RuleInfo {
	if r.Builtin && r.Decision != "" {
		r.level = e.exec.levels[r.ID]
	}
	return r
}

// ExecEnforcement returns the level of every built-in exec rule the team's
// exec_enforcement sets, by ID.
func (e *Engine) ExecEnforcement() map[string]Enforcement {
	out := make(map[string]Enforcement, len(e.exec.levels))
	for k, v := range e.exec.levels {
		out[k] = v
	}
	return out
}

// ExecInput is the document of one run or run_code call: what is about to
// execute, where, for whom, and what the static analysers found.
type ExecInput struct {
	Op       string   // OpRun or OpRunCode
	Argv     []string // run: the command
	Language string   // run_code: the language
	Code     string   // run_code: the program
	// Source is the code the analysers read: run_code's program, or the
	// script of a shell (sh -c SCRIPT) or Python (python3 -c CODE) command;
	// nil when the call has none.
	Source    *ExecSource
	Template  string
	TenantID  string
	SessionID string
	Backend   string // the backend's scheme
	Network   model.NetworkPolicy
	// Analysers holds one report per analyser that applies to Source's
	// language, by tool name (bandit, shellcheck): over every source of
	// that language, ok only when each was analysed.
	Analysers map[string]analysers.Report
	// Scan is what the call runs, as execscan read it (commands, code,
	// what could not be read). Nil leaves exec.commands out, which the
	// built-in rules read as a call they cannot analyse.
	Scan *execscan.Scan
	// StdinBytes is the size of the call's standard input (-1: none).
	StdinBytes int
}

// ExecSource is code in a language.
type ExecSource struct {
	Language string // python or sh (bash, dash: shell dialects)
	Text     string
}

// Address names the call for waivers: exec/TEMPLATE/TENANT/SESSION.
func (in ExecInput) Address() string {
	return "exec/" + in.Template + "/" + in.TenantID + "/" + in.SessionID
}

// Value returns the document as an OPA value.
func (in ExecInput) Value() (ast.Value, error) {
	call := map[string]any{"op": in.Op, "argv": strs(in.Argv), "language": in.Language, "code": in.Code}
	if in.Source != nil {
		call["source"] = map[string]any{"language": in.Source.Language, "text": in.Source.Text}
	}
	call["stdin"] = map[string]any{"given": in.StdinBytes >= 0, "bytes": max(in.StdinBytes, 0)}
	if in.Scan != nil {
		if err := scanDoc(call, in.Scan); err != nil {
			return nil, err
		}
	}
	an := map[string]any{}
	for name, r := range in.Analysers {
		fs := make([]any, 0, len(r.Findings))
		for _, f := range r.Findings {
			fs = append(fs, map[string]any{"id": f.ID, "severity": f.Severity, "confidence": f.Confidence, "line": f.Line})
		}
		an[name] = map[string]any{"status": string(r.Status), "detail": r.Detail, "findings": fs}
	}
	net := in.Network.Normalized()
	doc := map[string]any{
		"input_version": InputVersion,
		"kind":          KindExec,
		"address":       in.Address(),
		"exec":          call,
		"template":      map[string]any{"name": in.Template},
		"tenant":        map[string]any{"tenant_id": in.TenantID, "session_id": in.SessionID},
		"backend":       map[string]any{"scheme": in.Backend},
		"network":       map[string]any{"egress": net.Egress, "allow": strs(net.Allow)},
		"analysers":     an,
	}
	return ast.InterfaceToValue(doc)
}

func strs(xs []string) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}

// Map returns the document as generic JSON, for display and tests.
func (in ExecInput) Map() (map[string]any, error) {
	v, err := in.Value()
	if err != nil {
		return nil, err
	}
	j, err := ast.JSON(v)
	if err != nil {
		return nil, err
	}
	m, _ := j.(map[string]any)
	return m, nil
}

// EvaluateExec runs the exec packages on a call's document. Its findings
// are all in Denies (Finding.Decision says block or require_approval); what
// each does to the call is its rule's enforcement, decided by the caller
// (verdict.Decide). Like Evaluate it is bounded by the budget and turns a
// panic into an error: a failed evaluation never reads as "allow".
func (e *Engine) EvaluateExec(ctx context.Context, in ExecInput) (d Decision, err error) {
	defer func() {
		if p := recover(); p != nil {
			d, err = Decision{}, evalErr(fmt.Sprintf("the evaluator failed on this call (%v)", p))
		}
	}()
	v, err := in.Value()
	if err != nil {
		return Decision{}, evalErr("the call's document could not be built: " + err.Error())
	}
	budget := e.budget
	if budget <= 0 {
		budget = DefaultBudget
	}
	now := time.Now()
	bc := &budgetCancel{ctx: ctx, start: now, deadline: now.Add(budget)}
	input := ast.NewTerm(v)
	for _, q := range []*decisionQuery{e.exec.builtin, e.exec.team} {
		if q == nil {
			continue
		}
		if err := e.run(ctx, bc, q, input, &d); err != nil {
			return Decision{}, err
		}
	}
	sortFindings(d.Denies)
	return d, nil
}

// HasExecRules reports whether any exec package is loaded.
func (e *Engine) HasExecRules() bool { return e.exec.builtin != nil || e.exec.team != nil }

// scanDoc puts the scan into the call's document: commands, sources (with
// their text, which the textual rules read) and what was not analysed.
func scanDoc(call map[string]any, sc *execscan.Scan) error {
	var generic struct {
		Commands   []any `json:"commands"`
		Unanalysed []any `json:"unanalysed"`
	}
	raw, err := json.Marshal(map[string]any{"commands": sc.Commands, "unanalysed": sc.Unanalysed})
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, &generic); err != nil {
		return err
	}
	srcs := make([]any, len(sc.Sources))
	for i, s := range sc.Sources {
		srcs[i] = map[string]any{"language": s.Language, "from": s.From, "text": s.Text, "bytes": s.Bytes, "depth": s.Depth}
	}
	call["commands"], call["unanalysed"], call["sources"] = generic.Commands, generic.Unanalysed, srcs
	return nil
}
