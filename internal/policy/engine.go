// Package policy compiles the embedded Rego bundle (plus a team's own
// policies) once per process and evaluates it on input documents, turning
// the findings into typed refusals and warnings.
package policy

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/topdown"
	"github.com/open-policy-agent/opa/v1/util"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/boundedfile"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
	"github.com/sandboxio/terraform-provider-sandboxio/policies"
)

// BuiltinNamespace is the package namespace of the embedded bundle. Team
// policies may not declare packages in it, so they can neither shadow nor
// extend the built-in safety rules.
const BuiltinNamespace = "sandboxio"

// Finding is one decision of one rule.
type Finding struct {
	ID        string `json:"id"`
	Class     string `json:"class"`
	Attribute string `json:"attribute"`
	Message   string `json:"msg"`
	Fix       string `json:"fix"`
	Title     string `json:"title,omitempty"`
	Package   string `json:"package"`
	Deny      bool   `json:"deny"`
	Builtin   bool   `json:"builtin"`
	// Decision is set on the findings of the pre-execution hook's
	// packages (see EvaluateExec): DecisionBlock or DecisionApproval.
	Decision string `json:"decision,omitempty"`
}

// Error returns the finding as a typed model.Error.
func (f Finding) Error() *model.Error {
	return &model.Error{Class: model.ErrorClass(f.Class), Rule: f.ID, Attribute: f.Attribute, Message: f.Message, Fix: f.Fix}
}

// Warning returns the finding as a model.Warning.
func (f Finding) Warning() model.Warning {
	return model.Warning{Class: model.WarningClass(f.Class), Rule: f.ID, Attribute: f.Attribute, Message: f.Message, Fix: f.Fix}
}

// Decision holds every finding of one evaluation, refusals first.
type Decision struct {
	Denies   []Finding
	Warnings []Finding
}

// Allowed reports whether no rule refused.
func (d Decision) Allowed() bool { return len(d.Denies) == 0 }

// Err returns the first refusal as a *model.Error, or nil.
func (d Decision) Err() error {
	if len(d.Denies) == 0 {
		return nil
	}
	return d.Denies[0].Error()
}

// RuleInfo is a rule's METADATA, for the rule catalogue and diagnostics.
type RuleInfo struct {
	ID          string
	Title       string
	Description string
	Class       string
	Attribute   string
	Fix         string
	Package     string
	Deny        bool
	Builtin     bool
	// Decision is the decision of a pre-execution rule (DecisionBlock or
	// DecisionApproval); empty for the configuration rules.
	Decision string
	// level is the enforcement a team gave a built-in pre-execution rule
	// (see ExecEnforcement); empty otherwise.
	level Enforcement
	// Custom holds every custom METADATA field, e.g. a team rule's
	// severity and enforcement level.
	Custom map[string]any
}

// Engine evaluates the compiled bundle. It is safe for concurrent use.
//
// The built-in rules and the team's rules are two separate evaluations:
// the built-in one runs on a compiler that holds the embedded bundle only,
// so no team package, however it is written, can change what a built-in
// rule decides. Team rules run on a second compiler (the bundle plus the
// team's modules, so that team rules can use the bundle's helpers) and only
// when there are any.
type Engine struct {
	builtin  decisionQuery
	team     *decisionQuery // nil without team decision rules
	exec     execQueries    // the pre-execution hook's packages
	store    storage.Store
	base     capsBaseCache       // data.capabilities, shared read-only by every evaluation
	rules    map[string]RuleInfo // by rule ID
	compiler *ast.Compiler       // the bundle plus the team's modules: annotations, team checks, reads
	budget   time.Duration
	reads    sync.Map // TeamReads' answers, by paths
}

// decisionQuery is one compiled query over a compiler's deny and warn sets.
type decisionQuery struct {
	compiler *ast.Compiler
	query    ast.Body
	refs     []ruleRef
	wrapped  bool // each set read as [] or [set]
}

// DefaultBudget bounds one evaluation. The bundle decides in well under a
// millisecond; a team rule that loops or waits until the budget runs out is
// refused (SBX-POL-004), never read as "no findings".
const DefaultBudget = 5 * time.Second

type ruleRef struct {
	pkg     string // e.g. sandboxio.network
	deny    bool
	builtin bool
	set     string // a pre-execution decision set (block, require_approval); "" for deny and warn
}

var (
	cacheMu sync.Mutex
	cache   = map[string]*Engine{}
)

// Shared returns the process-wide engine for the given team policy paths,
// compiling it on first use: the bundle is compiled once per process.
func Shared(ctx context.Context, policyPaths []string) (*Engine, error) {
	paths := append([]string(nil), policyPaths...)
	sort.Strings(paths)
	key := strings.Join(paths, "\x00")
	cacheMu.Lock()
	defer cacheMu.Unlock()
	if e, ok := cache[key]; ok {
		return e, nil
	}
	e, err := New(ctx, paths)
	if err != nil {
		return nil, err
	}
	cache[key] = e
	return e, nil
}

// New compiles the embedded bundle plus the .rego files found under
// policyPaths (files or directories; *_test.rego files are skipped).
func New(ctx context.Context, policyPaths []string) (*Engine, error) {
	modules := map[string]*ast.Module{}
	builtinFiles, err := fs.Glob(policies.Bundle, "*.rego")
	if err != nil {
		return nil, fmt.Errorf("bundle list: %w", err)
	}
	for _, name := range builtinFiles {
		if strings.HasSuffix(name, "_test.rego") {
			continue
		}
		src, err := policies.Bundle.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("bundle read: %w", err)
		}
		m, err := parseModule("policies/"+name, src)
		if err != nil {
			return nil, fmt.Errorf("bundle parse: %w", err)
		}
		modules["builtin:"+name] = m
	}
	teamFiles, err := teamPolicyFiles(policyPaths)
	if err != nil {
		return nil, err
	}
	for _, file := range teamFiles {
		src, err := boundedfile.ReadFile(file, maxPolicyFile)
		if err != nil {
			return nil, configErr(fmt.Sprintf("cannot read team policy %s: %v", file, err),
				"check that every entry of policy_paths is a readable .rego file (at most 4 MiB) or a directory of them")
		}
		m, err := parseModule(file, src)
		if err != nil {
			return nil, configErr(fmt.Sprintf("team policy %s does not parse: %v", file, err),
				"fix the Rego syntax (v1: `deny contains msg if { ... }`); run `opa check --strict` on it")
		}
		if isBuiltinPackage(m.Package.Path) || isCapabilitiesPackage(m.Package.Path) {
			// data.capabilities is what the built-in rules trust about each
			// backend: a team package there could rewrite a tier rank.
			return nil, configErr(fmt.Sprintf("team policy %s declares package %s, inside a reserved namespace (%s or %s)",
				file, packageName(m.Package.Path), BuiltinNamespace, capabilitiesNamespace),
				"rename the package (for example `package team.sandboxes`): built-in rules and the capability data cannot be shadowed or extended")
		}
		modules["team:"+file] = m
	}

	if err := checkDecisionForms(modules); err != nil {
		return nil, err
	}
	if err := checkExecForms(modules); err != nil {
		return nil, err
	}
	builtinModules := map[string]*ast.Module{}
	for k, m := range modules {
		if strings.HasPrefix(k, "builtin:") {
			builtinModules[k] = m
		}
	}
	builtinCompiler, err := compile(builtinModules)
	if err != nil {
		return nil, fmt.Errorf("bundle compile: %w", err)
	}
	compiler := builtinCompiler
	if len(modules) > len(builtinModules) {
		if compiler, err = compile(modules); err != nil {
			return nil, configErr("the policies do not compile: "+err.Error(),
				"fix the team policy named in the error; run `opa check --strict` on it")
		}
	}

	capData, err := policies.Bundle.ReadFile(policies.CapabilitiesPath)
	if err != nil {
		return nil, fmt.Errorf("bundle read: %w", err)
	}
	// util.UnmarshalJSON keeps numbers as json.Number: decoded as float64,
	// 2592000 would print as 2.592e+06 in every message that names it.
	var capObj map[string]any
	if err := util.UnmarshalJSON(capData, &capObj); err != nil {
		return nil, fmt.Errorf("capabilities decode: %w", err)
	}
	store := inmem.NewFromObjectWithOpts(map[string]any{"capabilities": capObj}, inmem.OptReturnASTValuesOnRead(true))

	e := &Engine{compiler: compiler, rules: map[string]RuleInfo{}, budget: DefaultBudget}
	builtinRefs, teamRefs := splitRefs(decisionRules(compiler))
	if len(builtinRefs) == 0 {
		return nil, fmt.Errorf("bundle: no deny or warn rules compiled")
	}
	if e.builtin, err = prepare(builtinCompiler, builtinRefs, false); err != nil {
		return nil, err
	}
	if len(teamRefs) > 0 {
		q, err := prepare(compiler, teamRefs, true)
		if err != nil {
			return nil, err
		}
		e.team = &q
	}
	e.store = store
	if e.base, err = readCapabilities(ctx, store); err != nil {
		return nil, err
	}
	if e.exec, err = prepareExec(builtinCompiler, compiler); err != nil {
		return nil, err
	}
	e.indexAnnotations()
	if e.exec.levels, err = execLevels(compiler, e.rules); err != nil {
		return nil, err
	}
	return e, nil
}

// readCapabilities reads data.capabilities back from the store, as the AST
// value evaluations would read.
func readCapabilities(ctx context.Context, store storage.Store) (capsBaseCache, error) {
	var c capsBaseCache
	err := storage.Txn(ctx, store, storage.TransactionParams{}, func(txn storage.Transaction) error {
		v, err := store.Read(ctx, txn, storage.MustParsePath("/capabilities"))
		if err != nil {
			return err
		}
		av, ok := v.(ast.Value)
		if !ok {
			return fmt.Errorf("store returned %T, not an AST value", v)
		}
		c.caps = av
		return nil
	})
	if err != nil {
		return c, fmt.Errorf("capabilities read: %w", err)
	}
	return c, nil
}

func compile(modules map[string]*ast.Module) (*ast.Compiler, error) {
	c := ast.NewCompiler().
		WithEnablePrintStatements(false).
		WithUseTypeCheckAnnotations(true)
	c.Compile(modules)
	if c.Failed() {
		return nil, c.Errors
	}
	return c, nil
}

// prepare compiles the query that reads every listed deny and warn set.
// A team's set is read through an array comprehension, [v | v :=
// data.pkg.deny]: a comprehension is always defined, so a set that is
// undefined gives an empty array instead of taking the whole query's result
// away. The built-in sets are read directly (each is a partial set rule,
// checked at load, so never undefined); should one ever be, the query has
// no result, which run refuses as SBX-POL-003.
func prepare(c *ast.Compiler, refs []ruleRef, wrap bool) (decisionQuery, error) {
	terms := make([]*ast.Term, len(refs))
	for i, r := range refs {
		ref := ast.RefTerm(append(ast.MustParseRef("data."+r.pkg), ast.StringTerm(r.kind()))...)
		if !wrap {
			terms[i] = ref
			continue
		}
		v := ast.VarTerm(fmt.Sprintf("%s%d", resultVar, i))
		terms[i] = ast.ArrayComprehensionTerm(v, ast.NewBody(ast.Assign.Expr(v, ref)))
	}
	query := ast.NewBody(ast.Equality.Expr(ast.VarTerm(resultVar), ast.ArrayTerm(terms...)))
	compiled, err := c.QueryCompiler().Compile(query)
	if err != nil {
		return decisionQuery{}, fmt.Errorf("policy prepare: %w", err)
	}
	return decisionQuery{compiler: c, query: compiled, refs: refs, wrapped: wrap}, nil
}

func splitRefs(refs []ruleRef) (builtin, team []ruleRef) {
	for _, r := range refs {
		if r.builtin {
			builtin = append(builtin, r)
		} else {
			team = append(team, r)
		}
	}
	return builtin, team
}

// checkDecisionForms refuses a deny or warn that is not a partial set rule
// (`deny contains f if { ... }`). A complete rule (`deny := ...`), a
// function (`deny(x) := ...`), a default, an object (`deny[k] := v`) or a
// nested reference (`deny.x contains ...`) has a value that can be
// undefined or of another shape, and the evaluation decides on sets.
func checkDecisionForms(modules map[string]*ast.Module) error {
	var problems []string
	for key, m := range modules {
		for _, r := range m.Rules {
			ref := r.Head.Ref()
			if len(ref) == 0 {
				continue
			}
			name, ok := ref[0].Value.(ast.Var)
			if !ok || (name != "deny" && name != "warn") {
				continue
			}
			if r.Default || len(r.Head.Args) > 0 || len(ref) != 1 || r.Head.RuleKind() != ast.MultiValue {
				where := strings.TrimPrefix(strings.TrimPrefix(key, "team:"), "builtin:")
				if r.Location != nil {
					where = fmt.Sprintf("%s:%d", r.Location.File, r.Location.Row)
				}
				problems = append(problems, fmt.Sprintf("%s: %s in package %s is %s, not a partial set rule",
					where, name, packageName(m.Package.Path), describeRuleForm(r)))
			}
		}
	}
	if len(problems) == 0 {
		return nil
	}
	sort.Strings(problems)
	return configErr("team policies refused: "+strings.Join(problems, "; "),
		"write each decision as a partial set rule, one finding per element: "+
			"`deny contains msg if { <conditions>; msg := \"...\" }` (and `warn contains msg if { ... }`); "+
			"a set with no elements means no findings")
}

func describeRuleForm(r *ast.Rule) string {
	switch {
	case r.Default:
		return "a default rule"
	case len(r.Head.Args) > 0:
		return "a function"
	case len(r.Head.Ref()) != 1:
		return fmt.Sprintf("a rule on the reference %s", r.Head.Ref())
	default:
		return "a complete rule (:=), whose value can be undefined"
	}
}

func parseModule(name string, src []byte) (*ast.Module, error) {
	return ast.ParseModuleWithOpts(name, string(src), ast.ParserOptions{
		RegoVersion:       ast.RegoV1,
		ProcessAnnotation: true,
	})
}

func teamPolicyFiles(paths []string) ([]string, error) {
	var files []string
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, configErr(fmt.Sprintf("policy path %q does not exist or cannot be read", p),
				"point policy_paths at a directory (or file) of .rego policies")
		}
		if !info.IsDir() {
			if !info.Mode().IsRegular() {
				return nil, configErr(fmt.Sprintf("policy path %q is a %s, not a regular file or a directory", p, info.Mode().Type()),
					"point policy_paths at a directory (or file) of .rego policies")
			}
			files = append(files, p)
			continue
		}
		dirFiles, err := RegoFiles(p, false)
		if err != nil {
			return nil, configErr(fmt.Sprintf("cannot walk policy path %q: %v", p, err),
				"point policy_paths at a readable directory of .rego policies")
		}
		files = append(files, dirFiles...)
	}
	sort.Strings(files)
	return files, nil
}

// maxPolicyFile bounds one team policy file: Rego written by people is
// kilobytes; a device or a runaway generator must not exhaust memory.
const maxPolicyFile = 4 << 20

func isBuiltinPackage(path ast.Ref) bool {
	return len(path) > 1 && path[1].Value.Compare(ast.String(BuiltinNamespace)) == 0
}

func isCapabilitiesPackage(path ast.Ref) bool {
	return len(path) > 1 && path[1].Value.Compare(ast.String(capabilitiesNamespace)) == 0
}

func packageName(path ast.Ref) string {
	return strings.TrimPrefix(path.String(), "data.")
}

// decisionRules lists every package that defines deny or warn, in a stable
// order: built-in packages first.
func decisionRules(c *ast.Compiler) []ruleRef {
	seen := map[ruleRef]bool{}
	var refs []ruleRef
	for _, m := range c.Modules {
		pkg := packageName(m.Package.Path)
		builtin := isBuiltinPackage(m.Package.Path)
		for _, r := range m.Rules {
			name := r.Head.Name.String()
			if len(r.Head.Reference) > 0 {
				name = r.Head.Reference[0].Value.(ast.Var).String()
			}
			if name != "deny" && name != "warn" {
				continue
			}
			ref := ruleRef{pkg: pkg, deny: name == "deny", builtin: builtin}
			if !seen[ref] {
				seen[ref] = true
				refs = append(refs, ref)
			}
		}
	}
	sort.Slice(refs, func(i, j int) bool {
		a, b := refs[i], refs[j]
		if a.builtin != b.builtin {
			return a.builtin
		}
		if a.pkg != b.pkg {
			return a.pkg < b.pkg
		}
		return a.deny && !b.deny
	})
	return refs
}

func (e *Engine) indexAnnotations() {
	for _, a := range e.compiler.GetAnnotationSet().Flatten() {
		ann := a.Annotations
		if ann == nil || ann.Custom == nil {
			continue
		}
		id, _ := ann.Custom["id"].(string)
		if id == "" || len(a.Path) < 2 {
			continue
		}
		last := a.Path[len(a.Path)-1].Value
		name, _ := last.(ast.String)
		pkgPath := a.Path[:len(a.Path)-1]
		info := RuleInfo{
			ID:          id,
			Title:       policies.Expand(ann.Title), // ${NAME} lists, as lib.finding fills them
			Description: policies.Expand(ann.Description),
			Package:     packageName(pkgPath),
			Deny:        string(name) == "deny" || isExecSet(string(name)),
			Builtin:     isBuiltinPackage(pkgPath),
		}
		if isExecPackage(pkgPath) && isExecSet(string(name)) {
			info.Decision = string(name)
		}
		info.Class, _ = ann.Custom["class"].(string)
		info.Attribute, _ = ann.Custom["attribute"].(string)
		fix, _ := ann.Custom["fix"].(string)
		info.Fix = policies.Expand(fix)
		info.Custom = ann.Custom
		e.rules[id] = info
	}
}

// Rules returns the METADATA of every annotated rule, sorted by ID.
func (e *Engine) Rules() []RuleInfo {
	out := make([]RuleInfo, 0, len(e.rules))
	for _, r := range e.rules {
		out = append(out, e.withLevel(r))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Rule returns one rule's METADATA.
func (e *Engine) Rule(id string) (RuleInfo, bool) {
	r, ok := e.rules[id]
	return e.withLevel(r), ok
}

const resultVar = "x"

// Evaluate runs every deny and warn rule on the input document. It calls OPA's
// evaluator directly with the compiled query, reads the findings as AST
// values and brings its own caches, since the rego package's per-call setup
// costs more than the rules (docs/design/policy-engine-cost.md). A document
// Validate refuses is that ConfigurationError; a panic inside evaluation is
// returned as an error: no input may crash the provider, the CLI or a
// service embedding the helper.
func (e *Engine) Evaluate(ctx context.Context, in Input) (d Decision, err error) {
	if err := in.Validate(); err != nil {
		return Decision{}, err
	}
	defer func() {
		if p := recover(); p != nil {
			d, err = Decision{}, evalErr(fmt.Sprintf("the evaluator failed on this input (%v)", p))
		}
	}()
	return e.evaluate(ctx, in)
}

func (e *Engine) evaluate(ctx context.Context, in Input) (Decision, error) {
	budget := e.budget
	if budget <= 0 {
		budget = DefaultBudget
	}
	now := time.Now()
	bc := &budgetCancel{ctx: ctx, start: now, deadline: now.Add(budget)}
	input := ast.NewTerm(in.Value())
	var d Decision
	if err := e.run(ctx, bc, &e.builtin, input, &d); err != nil {
		return Decision{}, err
	}
	if e.team != nil {
		if err := e.run(ctx, bc, e.team, input, &d); err != nil {
			return Decision{}, err
		}
	}
	sortFindings(d.Denies)
	sortFindings(d.Warnings)
	return d, nil
}

// run evaluates one decision query and adds its findings to d. Anything but
// exactly one result of the expected shape is an error: an evaluation that
// cannot say what it decided has not decided "clean".
func (e *Engine) run(ctx context.Context, bc *budgetCancel, q *decisionQuery, input *ast.Term, d *Decision) error {
	txn, err := e.store.NewTransaction(ctx)
	if err != nil {
		return fmt.Errorf("policy eval: %w", err)
	}
	defer e.store.Abort(ctx, txn)
	vc := getEvalCache()
	defer putEvalCache(vc)
	results := 0
	err = topdown.NewQuery(q.query).
		WithCompiler(q.compiler).
		WithStore(e.store).
		WithTransaction(txn).
		WithInput(input).
		WithMetrics(metrics.NoOp()).
		WithVirtualCache(vc).
		WithBaseCache(e.base).
		WithStrictBuiltinErrors(true).
		WithCancel(bc).
		Iter(ctx, func(qr topdown.QueryResult) error {
			results++
			if results > 1 {
				return errShape("more than one result")
			}
			sets, ok := qr[ast.Var(resultVar)].Value.(*ast.Array)
			if !ok || sets.Len() != len(q.refs) {
				return errShape("the result is not one entry per package")
			}
			for i, ref := range q.refs {
				set, err := decisionSet(ref, sets.Elem(i).Value, q.wrapped)
				if err != nil {
					return err
				}
				if set.Len() == 0 {
					continue // most sets are empty: no closure for them
				}
				set.Foreach(func(t *ast.Term) {
					f := e.finding(ref, t.Value)
					f.Decision = ref.set
					if ref.deny {
						d.Denies = append(d.Denies, f)
					} else {
						d.Warnings = append(d.Warnings, f)
					}
				})
			}
			return nil
		})
	switch {
	case err == nil && results == 1:
		return nil
	case err == nil:
		return evalErr("the policy query returned no result, so nothing was decided")
	case bc.expired.Load():
		return &model.Error{Class: model.ErrConfiguration, Rule: rules.PolicyTimedOut, Attribute: "policy_paths",
			Message: fmt.Sprintf("policy evaluation did not finish within its budget of %s, so the configuration is refused rather than passed", bc.budget()),
			Fix:     "a team rule is looping over a very large collection or waiting on something: make it cheaper (run `opa eval --profile` on it), or remove it from policy_paths"}
	case ctx.Err() != nil:
		return fmt.Errorf("policy eval: %w", ctx.Err())
	default:
		var me *model.Error
		if errors.As(err, &me) {
			return me
		}
		return evalErr("policy evaluation failed: " + err.Error())
	}
}

// budgetCancel stops an evaluation when its budget is spent or its context
// is done. topdown asks Cancelled between evaluation steps (and inside long
// built-ins such as numbers.range); reading the clock every 128th time keeps
// that cheap, and unlike a context with a deadline it costs no timer.
type budgetCancel struct {
	ctx      context.Context
	deadline time.Time
	start    time.Time
	calls    atomic.Uint32
	expired  atomic.Bool // the budget was spent
	stopped  atomic.Bool
}

var _ topdown.Cancel = (*budgetCancel)(nil)

func (c *budgetCancel) Cancel() { c.stopped.Store(true) }

func (c *budgetCancel) Cancelled() bool {
	if c.stopped.Load() {
		return true
	}
	if c.calls.Add(1)&127 != 0 {
		return false
	}
	if time.Now().After(c.deadline) {
		c.expired.Store(true)
		c.stopped.Store(true)
	} else if c.ctx.Err() != nil {
		c.stopped.Store(true)
	}
	return c.stopped.Load()
}

func (c *budgetCancel) budget() time.Duration { return c.deadline.Sub(c.start) }

// decisionSet reads one package's entry of the result: a wrapped entry is
// [] when its deny or warn is undefined, [set] otherwise.
func decisionSet(ref ruleRef, v ast.Value, wrapped bool) (ast.Set, error) {
	if !wrapped {
		set, ok := v.(ast.Set)
		if !ok {
			return nil, errShape(fmt.Sprintf("data.%s.%s is %s, not a set", ref.pkg, ref.kind(), ast.ValueName(v)))
		}
		return set, nil
	}
	arr, ok := v.(*ast.Array)
	if !ok || arr.Len() > 1 {
		return nil, errShape(fmt.Sprintf("data.%s.%s was not read as one value", ref.pkg, ref.kind()))
	}
	if arr.Len() == 0 {
		return ast.NewSet(), nil
	}
	set, ok := arr.Elem(0).Value.(ast.Set)
	if !ok {
		return nil, errShape(fmt.Sprintf("data.%s.%s is %s, not a set", ref.pkg, ref.kind(), ast.ValueName(arr.Elem(0).Value)))
	}
	return set, nil
}

func (r ruleRef) kind() string {
	if r.set != "" {
		return r.set
	}
	if r.deny {
		return "deny"
	}
	return "warn"
}

func errShape(what string) error {
	return evalErr("the policy result has the wrong shape (" + what + "), so nothing was decided")
}

func evalErr(msg string) *model.Error {
	return &model.Error{Class: model.ErrConfiguration, Rule: rules.PolicyEval, Attribute: "policy_paths", Message: msg + "; the configuration is refused rather than passed",
		Fix: "fix the team policy the message names (run `opa eval` on it with this input), or remove it from policy_paths; if no team policy is loaded, this is a bug in sandboxio: please report it"}
}

// finding converts one rule result. Built-in rules return objects; team
// rules may also return a plain message, conftest-style.
func (e *Engine) finding(ref ruleRef, v ast.Value) Finding {
	f := Finding{Package: ref.pkg, Deny: ref.deny, Builtin: ref.builtin}
	switch x := v.(type) {
	case ast.String:
		f.Message = string(x)
	case ast.Object:
		f.ID = objString(x, "id")
		f.Class = objString(x, "class")
		f.Attribute = objString(x, "attribute")
		f.Message = objString(x, "msg")
		f.Fix = objString(x, "fix")
	default:
		f.Message = v.String()
	}
	if info, ok := e.rules[f.ID]; ok {
		f.Title = info.Title
	}
	if f.ID == "" {
		f.ID = ref.pkg
	}
	if f.Class == "" {
		if ref.deny {
			f.Class = string(model.ErrConfiguration)
		} else {
			f.Class = "PolicyWarning"
		}
	}
	return f
}

func objString(o ast.Object, key string) string {
	t := o.Get(ast.InternedTerm(key))
	if t == nil {
		return ""
	}
	if s, ok := t.Value.(ast.String); ok {
		return string(s)
	}
	return t.Value.String()
}

func sortFindings(fs []Finding) {
	sort.SliceStable(fs, func(i, j int) bool {
		if fs[i].ID != fs[j].ID {
			return fs[i].ID < fs[j].ID
		}
		if fs[i].Attribute != fs[j].Attribute {
			return fs[i].Attribute < fs[j].Attribute
		}
		return fs[i].Message < fs[j].Message
	})
}

func configErr(msg, fix string) *model.Error {
	return &model.Error{Class: model.ErrConfiguration, Rule: rules.PolicyLoad, Attribute: "policy_paths", Message: msg, Fix: fix}
}

// WithBudget returns a copy of the engine whose evaluations are bounded by
// d instead of DefaultBudget.
func (e *Engine) WithBudget(d time.Duration) *Engine {
	c := &Engine{builtin: e.builtin, team: e.team, exec: e.exec, store: e.store, base: e.base, rules: e.rules, compiler: e.compiler, budget: d}
	return c
}
