package sandbox

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/analysers"
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
	// onWarning is the call's own RunOptions.OnWarning.
	onWarning func(model.Warning)
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
	in.Analysers = s.c.analyse(ctx, in.Source)
	if err := ctx.Err(); err != nil {
		// The caller cancelled: that is the answer, not an analyser
		// failure that would read as "needs approval".
		hr.Decision = HookBlock
		return fmt.Errorf("pre-execution hook: %w", err)
	}
	var ids []string
	for _, tool := range []string{analysers.Bandit, analysers.ShellCheck} {
		if r, ok := in.Analysers[tool]; ok {
			hr.Analysers = append(hr.Analysers, AnalyserRecord{Tool: tool, Status: string(r.Status), Findings: r.IDs(), DurationMS: ms(r.Duration)})
			ids = append(ids, r.IDs()...)
		}
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
				refusal = &model.Error{Class: model.ExecutionBlocked, Rule: r.ID, Attribute: r.Attribute, Message: r.Message, Fix: r.Fix}
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
	return &model.Error{Class: model.ApprovalRequired, Rule: r.ID, Attribute: r.Attribute,
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

// execInput builds the hook's document of a call.
func (s *Sandbox) execInput(c call) policy.ExecInput {
	in := policy.ExecInput{Op: c.op, Argv: c.argv, Language: c.language, Code: c.code,
		Template: s.info.Template, TenantID: s.info.TenantID, SessionID: s.info.SessionID,
		Backend: s.info.Backend, Network: s.info.Network}
	if c.op == policy.OpRunCode {
		in.Source = &policy.ExecSource{Language: codeLanguage(c.language), Text: c.code}
	} else {
		in.Source = sourceOfArgv(c.argv)
	}
	return in
}

// codeLanguage names run_code's language as the rules and analysers do.
func codeLanguage(lang string) string {
	if strings.HasPrefix(lang, "python") {
		return "python"
	}
	return lang
}

// shellFlags is a shell's option word that ends in c (-c, -ec, -xc, -lc).
var shellFlags = regexp.MustCompile(`^-[a-z]*c$`)

// sourceOfArgv finds the code a command runs: the script of a shell's -c
// (sh -c SCRIPT, bash -lc SCRIPT) or the program of python3 -c. Other
// commands have none (the rules still read their argv).
func sourceOfArgv(argv []string) *policy.ExecSource {
	if len(argv) < 3 || !shellFlags.MatchString(argv[1]) {
		return nil
	}
	name := path.Base(argv[0])
	switch {
	case name == "sh" || name == "bash" || name == "dash" || name == "ash" || name == "ksh":
		return &policy.ExecSource{Language: name, Text: argv[2]}
	case argv[1] == "-c" && (name == "python" || strings.HasPrefix(name, "python3")):
		return &policy.ExecSource{Language: "python", Text: argv[2]}
	}
	return nil
}

// analyse runs the analysers that apply to the source's language.
func (c *Client) analyse(ctx context.Context, src *policy.ExecSource) map[string]analysers.Report {
	out := map[string]analysers.Report{}
	if src == nil {
		return out
	}
	cfg := analysers.Config{BanditPath: c.cfg.Analysers.BanditPath, ShellCheckPath: c.cfg.Analysers.ShellCheckPath, Timeout: c.cfg.Analysers.Timeout}
	start := time.Now()
	switch src.Language {
	case "python":
		r := cfg.RunBandit(ctx, src.Text)
		r.Duration = time.Since(start)
		out[analysers.Bandit] = r
	case "sh", "bash", "dash", "ash", "ksh":
		dialect := src.Language
		if dialect == "ash" {
			dialect = "sh"
		}
		r := cfg.RunShellCheck(ctx, src.Text, dialect)
		r.Duration = time.Since(start)
		out[analysers.ShellCheck] = r
	}
	return out
}
