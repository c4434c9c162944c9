package sandbox

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/analysers"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/execscan"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/verdict"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// AnalyserConfig locates and bounds the static analysers of the
// pre-execution hook. The zero value finds bandit and shellcheck on PATH
// and bounds each run by analysers.DefaultTimeout (20 s).
type AnalyserConfig struct {
	BanditPath     string
	ShellCheckPath string
	Timeout        time.Duration
}

// Hook decisions, as the audit record names them.
const (
	HookAllow    = "allow"            // no mandatory finding (advisory ones are warnings)
	HookBlock    = "block"            // a mandatory block finding: nothing ran
	HookApproval = "require_approval" // a mandatory require_approval finding was not approved: nothing ran
	HookApproved = "approved"         // every mandatory require_approval finding was approved: the call ran
)

// HookRecord is the pre-execution hook's part of an audit record: the
// decision, every rule that found something, and the analysers' finding
// IDs. It never holds the code or a finding's message.
type HookRecord struct {
	Decision   string           `json:"decision"`
	Rules      []HookRule       `json:"rules"`
	Analysers  []AnalyserRecord `json:"analysers"`
	DurationMS float64          `json:"duration_ms"`
}

// HookRule is one rule's finding and what it did.
type HookRule struct {
	Rule        string `json:"rule"`
	Decision    string `json:"decision"`    // block or require_approval: what the rule asks for
	Enforcement string `json:"enforcement"` // advisory, soft-mandatory, hard-mandatory
	Outcome     string `json:"outcome"`     // warn (advisory), waived, enforced, approved, declined
	Waiver      string `json:"waiver,omitempty"`
}

// AnalyserRecord is one analyser's run.
type AnalyserRecord struct {
	Tool       string   `json:"tool"`
	Status     string   `json:"status"`
	Findings   []string `json:"findings"`
	DurationMS float64  `json:"duration_ms"`
}

// ExecutionAdvisoryWarning is the warning class of an advisory
// pre-execution finding: the call ran, and the finding is in the audit
// record.
const ExecutionAdvisoryWarning model.WarningClass = "ExecutionAdvisoryWarning"

// call is one run or run_code call, before it executes.
type call struct {
	op       string
	argv     []string
	language string
	code     string
	stdin    []byte   // the call's standard input (nil: none)
	env      []string // the names the call's environment sets
	// onWarning is the call's own RunOptions.OnWarning.
	onWarning func(model.Warning)
}

// envNames lists the variables a call's environment sets: the template's,
// the Request's and the call's.
func (s *Sandbox) envNames(call map[string]string) []string {
	var out []string
	for _, m := range []map[string]string{s.plan.spec.Env, s.env, call} {
		for k := range m {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// preExec evaluates the pre-execution hook on a call, fills the record's
// hook part, and returns the refusal (ExecutionBlocked, ApprovalRequired,
// or a failed evaluation, never read as allow) or nil when the call may run.
func (s *Sandbox) preExec(ctx context.Context, rec *Record, c call) error {
	start := time.Now()
	in := s.execInput(c)
	hr := &HookRecord{Decision: HookAllow, Rules: []HookRule{}, Analysers: []AnalyserRecord{}}
	rec.Hook = hr
	defer func() { hr.DurationMS = ms(time.Since(start)) }()
	var runs []analysers.Report
	in.Analysers, runs = s.c.analyse(ctx, in.Scan)
	if err := ctx.Err(); err != nil {
		// The caller cancelled: that is the answer, not an analyser
		// failure that would read as "needs approval".
		hr.Decision = HookBlock
		return fmt.Errorf("pre-execution hook: %w", err)
	}
	var ids []string
	for _, r := range runs {
		hr.Analysers = append(hr.Analysers, AnalyserRecord{Tool: r.Tool, Status: string(r.Status), Findings: r.IDs(), DurationMS: ms(r.Duration)})
		ids = append(ids, r.IDs()...)
	}
	d, err := s.c.eng.EvaluateExec(ctx, in)
	if err != nil {
		hr.Decision = HookBlock
		return err
	}
	v := verdict.Decide(s.c.eng, d, policy.KindExec, verdict.Options{Address: in.Address(), Waivers: s.c.waivers})
	// Blocks first: a call that is blocked is not put to an approver.
	var refusal error
	for _, r := range v.Results {
		rule := HookRule{Rule: r.ID, Decision: r.Decision, Enforcement: string(r.Enforcement), Outcome: string(r.Outcome)}
		if r.Waiver != nil && r.Outcome == verdict.Waived {
			rule.Waiver = r.Waiver.Source
		}
		if r.Outcome == verdict.Fail {
			rule.Outcome = "enforced"
			if r.Decision != policy.DecisionApproval && refusal == nil {
				hr.Decision = HookBlock
				refusal = &model.Error{Class: model.ErrExecutionBlocked, Rule: r.ID, Attribute: r.Attribute, Message: r.Message, Fix: r.Fix}
			}
		}
		hr.Rules = append(hr.Rules, rule)
	}
	if refusal != nil {
		return refusal
	}
	for i, r := range v.Results {
		switch r.Outcome {
		case verdict.Fail:
			// The argv goes to the approver (a person may read it) with
			// every secret value redacted, as in the audit record.
			ok, err := s.c.approve(ctx, ApprovalRequest{Rule: r.ID, Reason: s.secrets.RedactString(r.Message), Tenant: s.info.TenantID,
				Session: s.info.SessionID, Command: s.redactArgv(c.argv), Language: c.language, Findings: ids})
			if !ok {
				hr.Rules[i].Outcome = "declined"
				hr.Decision = HookApproval
				return approvalError(r, s.c.cfg.Approver == nil, err)
			}
			hr.Rules[i].Outcome = "approved"
			hr.Decision = HookApproved
		case verdict.Warn:
			w := model.Warning{Class: ExecutionAdvisoryWarning, Rule: r.ID, Attribute: r.Attribute,
				Message: fmt.Sprintf("%s (advisory %s; the call runs)", r.Message, r.Decision), Fix: r.Fix}
			s.c.warn(w, s.secrets)
			if c.onWarning != nil {
				c.onWarning(redactWarning(w, s.secrets))
			}
		}
	}
	return nil
}

func approvalError(r verdict.Result, noApprover bool, err error) error {
	why := "the Approver declined it"
	if noApprover {
		why = "no Approver was given"
	} else if err != nil {
		why = "the Approver failed"
	}
	return &model.Error{Class: model.ErrApprovalRequired, Rule: r.ID, Attribute: r.Attribute,
		Message: fmt.Sprintf("%s; the call requires approval under %s and %s, so nothing ran", r.Message, r.ID, why),
		Fix:     fmt.Sprintf("have the call reviewed and approve %s (sandboxio run --approve %s; the Go API's Config.Approver), or: %s", r.ID, r.ID, r.Fix),
		Err:     err}
}

func (s *Sandbox) redactArgv(a []string) []string {
	if a == nil {
		return nil
	}
	out := make([]string, len(a))
	for i, x := range a {
		out[i] = s.secrets.RedactString(x)
	}
	return out
}

// approve asks the configured Approver; none refuses.
func (c *Client) approve(ctx context.Context, req ApprovalRequest) (bool, error) {
	if c.cfg.Approver == nil {
		return false, nil
	}
	ok, err := c.cfg.Approver.Approve(ctx, req)
	if err != nil {
		return false, fmt.Errorf("approver: %w", err)
	}
	return ok, nil
}

// execInput builds the hook's document of a call: what it runs, as
// execscan reads it (argv, code and standard input), and the code the
// analysers read.
func (s *Sandbox) execInput(c call) policy.ExecInput {
	in := policy.ExecInput{Op: c.op, Argv: c.argv, Language: c.language, Code: c.code,
		Template: s.info.Template, TenantID: s.info.TenantID, SessionID: s.info.SessionID,
		Backend: s.info.Backend, Network: s.info.Network, StdinBytes: -1}
	if c.stdin != nil {
		in.StdinBytes = len(c.stdin)
	}
	sc := execscan.Classify(execscan.Call{Op: c.op, Argv: c.argv, Language: c.language, Code: c.code, Stdin: c.stdin, Env: c.env})
	in.Scan = &sc
	if len(sc.Sources) > 0 {
		in.Source = &policy.ExecSource{Language: sc.Sources[0].Language, Text: sc.Sources[0].Text}
	}
	return in
}

// maxAnalyserRuns bounds the analyser runs of one call; code past it is
// reported as not analysed.
const maxAnalyserRuns = 8

// analyse runs the analyser of each piece of code's language (bandit on
// Python, shellcheck on shell), once per distinct piece, and merges each
// tool's reports: ok only when every piece was analysed, the findings of
// all. It returns the merged reports by tool and each run.
func (c *Client) analyse(ctx context.Context, sc *execscan.Scan) (map[string]analysers.Report, []analysers.Report) {
	out := map[string]analysers.Report{}
	var runs []analysers.Report
	if sc == nil {
		return out, nil
	}
	cfg := analysers.Config{BanditPath: c.cfg.Analysers.BanditPath, ShellCheckPath: c.cfg.Analysers.ShellCheckPath, Timeout: c.cfg.Analysers.Timeout}
	seen := map[string]bool{}
	for _, src := range sc.Sources {
		var tool string
		switch {
		case src.Language == "python":
			tool = analysers.Bandit
		case execscan.IsShell(src.Language):
			tool = analysers.ShellCheck
		default:
			continue
		}
		if key := src.Language + "\x00" + src.Text; seen[key] {
			continue
		} else {
			seen[key] = true
		}
		var r analysers.Report
		if len(runs) >= maxAnalyserRuns {
			r = analysers.Report{Tool: tool, Status: analysers.Failed, Detail: "the call holds more code than the hook analyses", Findings: []analysers.Finding{}}
		} else {
			start := time.Now()
			if tool == analysers.Bandit {
				r = cfg.RunBandit(ctx, src.Text)
			} else {
				r = cfg.RunShellCheck(ctx, src.Text, shellcheckDialect(src.Language))
			}
			r.Duration = time.Since(start)
			runs = append(runs, r)
		}
		m, ok := out[tool]
		if !ok {
			out[tool] = r
			continue
		}
		if m.Status == analysers.OK && r.Status != analysers.OK {
			m.Status, m.Detail = r.Status, r.Detail
		}
		m.Findings = append(m.Findings, r.Findings...)
		m.Duration += r.Duration
		out[tool] = m
	}
	return out, runs
}

func shellcheckDialect(lang string) string {
	switch lang {
	case "bash", "dash", "ksh":
		return lang
	case "zsh":
		return "bash"
	}
	return "sh"
}
