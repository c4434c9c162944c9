package policycheck

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	tfjson "github.com/hashicorp/terraform-json"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/verdict"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Options configure a check.
type Options struct {
	Waivers *verdict.Waivers
	Now     time.Time // decides which waivers have expired; zero means now
}

// Report is the outcome of checking one plan.
type Report struct {
	Plan      string
	Resources []ResourceReport
	Waivers   []WaiverReport
	// Rules is the catalogue the findings refer to: every rule of the
	// loaded bundle, then the Go-side rules.
	Rules []RuleDoc
	// ProviderPolicyPaths and ProviderWaivers are the root provider's
	// policy_paths and policy_waivers when the plan holds them as
	// constants, so the CLI can say when it is not deciding with the same
	// policies as the provider.
	ProviderPolicyPaths []string
	ProviderWaivers     string
}

// ResourceReport is the decision on one resource.
type ResourceReport struct {
	Address string
	Type    string // with a data. prefix for data sources
	Action  string
	Kind    string // the input document's kind; empty when no document was evaluated
	// Deferred lists what is unknown until apply. With Kind empty the
	// whole resource is checked at apply; otherwise only part of it.
	Deferred []string
	// Skipped says why the check did not decide on the resource (deleted,
	// deferred to a later plan, a type without rules); empty when it did.
	Skipped string
	// later: skipped, yet it will exist after apply (see planResource).
	later   bool
	Results []verdict.Result
}

// Checked reports whether the resource was decided on at plan: a document
// was evaluated, or it was refused before one existed.
func (r ResourceReport) Checked() bool { return r.Kind != "" || len(r.Results) > 0 }

// Count returns the number of results with the outcome.
func (r ResourceReport) Count(o verdict.Outcome) int {
	return verdict.Verdict{Results: r.Results}.Count(o)
}

// WaiverReport says what became of one waiver.
type WaiverReport struct {
	Waiver *verdict.Waiver
	Status string // active, expired or refused
	Detail string
	Used   int // findings it waived
}

// Summary counts a report.
type Summary struct {
	Resources, Failed, Warnings, Waived, Deferred int
	FailedResources                               int
	// Skipped counts the sandboxio resources the check did not decide on.
	Skipped int
}

// Summary counts findings and resources.
func (r *Report) Summary() Summary {
	s := Summary{Resources: len(r.Resources)}
	for _, res := range r.Resources {
		f := res.Count(verdict.Fail)
		s.Failed += f
		s.Warnings += res.Count(verdict.Warn)
		s.Waived += res.Count(verdict.Waived)
		if f > 0 {
			s.FailedResources++
		}
		if len(res.Deferred) > 0 {
			s.Deferred++
		}
		if res.Skipped != "" {
			s.Skipped++
		}
	}
	return s
}

// Passed reports whether the plan passes: no refusal and, with failOnWarn,
// no warning either.
func (r *Report) Passed(failOnWarn bool) bool {
	s := r.Summary()
	return s.Failed == 0 && (!failOnWarn || s.Warnings == 0)
}

// Undecided reports whether anything is checked only at apply (wholly or
// in part), or only by a later plan: what --fail-on-deferred fails on.
func (r *Report) Undecided() bool {
	if r.Summary().Deferred > 0 {
		return true
	}
	for _, res := range r.Resources {
		if res.later {
			return true
		}
	}
	return false
}

// PassedWith reports whether the plan passes under the render options:
// Passed, and with FailOnDeferred nothing left to apply.
func (r *Report) PassedWith(o RenderOptions) bool {
	return r.Passed(o.FailOnWarn) && (!o.FailOnDeferred || !r.Undecided())
}

// Check reads plan JSON and decides on every sandboxio resource in it. An
// unreadable plan is an *InputError.
func Check(ctx context.Context, eng *policy.Engine, name string, data []byte, opts Options) (*Report, error) {
	p, err := parsePlan(name, data)
	if err != nil {
		return nil, err
	}
	res, err := p.resources(name)
	if err != nil {
		return nil, err
	}
	docs := make([]document, len(res))
	cache := newValues()
	for i, r := range res {
		if r.skip != "" {
			continue
		}
		if docs[i], err = r.build(cache); err != nil {
			return nil, &InputError{File: name, Msg: err.Error()}
		}
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	rep := &Report{Plan: name, Resources: make([]ResourceReport, len(res))}
	// The engine is safe for concurrent use and evaluations are
	// independent: spread them over the CPUs.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	jobs := make(chan int)
	workers := min(runtime.GOMAXPROCS(0), len(res))
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				rr, err := decide(ctx, eng, res[i], docs[i], opts.Waivers, now)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
				rep.Resources[i] = rr
			}
		}()
	}
	for i := range res {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	rep.Waivers = waiverReports(eng, opts.Waivers, rep.Resources, now)
	rep.ProviderPolicyPaths, rep.ProviderWaivers = p.providerPolicy()
	rep.Rules = planRules(catalogue(eng))
	return rep, nil
}

func decide(ctx context.Context, eng *policy.Engine, r *planResource, doc document, w *verdict.Waivers, now time.Time) (ResourceReport, error) {
	rr := ResourceReport{Address: r.Address, Type: r.Type, Action: r.Action, Deferred: doc.deferred}
	if r.Mode == tfjson.DataResourceMode {
		rr.Type = "data." + r.Type
	}
	if r.skip != "" {
		rr.Skipped, rr.later = r.skip, r.later
		return rr, nil
	}
	opts := verdict.Options{Address: r.Address, Waivers: w, Now: now}
	if doc.refusal != nil {
		// Refused before any document existed: Kind stays empty, the
		// rules did not run.
		rr.Results = []verdict.Result{refusalResult(doc.refusal)}
		return rr, nil
	}
	if doc.in.Kind == "" {
		return rr, nil
	}
	rr.Kind = doc.in.Kind
	doc.in.Address = r.Address
	v, err := verdict.Check(ctx, eng, doc.in, opts)
	if err != nil {
		return rr, fmt.Errorf("%s: %w", r.Address, err)
	}
	if len(doc.placeholders) > 0 {
		// As the provider does: the built-in rules decide with the
		// placeholders; a team package that may read them is left to apply.
		var teamReads bool
		if v, teamReads = verdict.WithoutTeamReads(eng, v, inputs.PlaceholderPaths(doc.placeholders)); teamReads {
			rr.Deferred = doc.placeholders
		}
	}
	if r.Type == typeTenantSandbox && !doc.part {
		// The data source reports warnings from its tenant part only (the
		// template's own warnings are on the template); its refusals come
		// from the whole per-tenant spec. Do the same.
		partIn := tenantPart(doc.in)
		pv, err := verdict.Check(ctx, eng, partIn, opts)
		if err != nil {
			return rr, fmt.Errorf("%s: %w", r.Address, err)
		}
		kept := v.Results[:0:0]
		for _, res := range v.Results {
			if res.Outcome != verdict.Warn {
				kept = append(kept, res)
			}
		}
		for _, res := range pv.Results {
			if res.Outcome == verdict.Warn {
				kept = append(kept, res)
			}
		}
		v.Results = kept
	}
	rr.Results = v.Results
	return rr, nil
}

func tenantPart(full policy.Input) policy.Input {
	t := inputs.Tenant{}
	if full.Tenant != nil {
		t = inputs.Tenant{TenantID: full.Tenant.TenantID, SessionID: full.Tenant.SessionID, ExtraLabels: full.Tenant.Labels}
	}
	in := t.Part()
	in.Address = full.Address
	return in
}

// refusalResult reports a refusal that came before any document (a DSN or a
// spec that does not parse) as the provider does: built-in, hard-mandatory.
func refusalResult(me *model.Error) verdict.Result {
	title := ""
	if d, ok := rules.Lookup(me.Rule); ok {
		title = d.Title
	}
	return verdict.Result{
		Finding: policy.Finding{ID: me.Rule, Class: string(me.Class), Attribute: me.Attribute, Message: me.Message,
			Fix: me.Fix, Title: title, Deny: true, Builtin: true},
		Enforcement: policy.HardMandatory, Severity: "high", Outcome: verdict.Fail,
	}
}

func waiverReports(eng *policy.Engine, w *verdict.Waivers, res []ResourceReport, now time.Time) []WaiverReport {
	if w == nil {
		return nil
	}
	used := map[*verdict.Waiver]int{}
	for _, r := range res {
		for _, x := range r.Results {
			if x.Outcome == verdict.Waived {
				used[x.Waiver]++
			}
		}
	}
	out := make([]WaiverReport, len(w.List))
	for i, wv := range w.List {
		status, detail := wv.Status(eng, now)
		out[i] = WaiverReport{Waiver: wv, Status: status, Detail: detail, Used: used[wv]}
	}
	return out
}
