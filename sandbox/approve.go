package sandbox

import (
	"context"
	"slices"
)

// Approver decides a call that the pre-execution hook says requires
// approval (a rule whose decision is require_approval at a mandatory
// enforcement level). It is asked once per such rule, before anything runs;
// false (or an error) refuses the call with ApprovalRequired. It must be
// safe for concurrent use.
type Approver interface {
	Approve(ctx context.Context, req ApprovalRequest) (bool, error)
}

// ApprovalRequest is what an Approver is asked about. It holds no code:
// Command is the argv of a run call (nil for run_code), Language the
// language of a run_code call, Findings the static analysers' finding IDs
// ("bandit:B602", "shellcheck:SC2086").
type ApprovalRequest struct {
	Rule, Reason, Tenant, Session string
	Command                       []string
	Language                      string
	Findings                      []string
}

// ApproverFunc adapts a function to an Approver.
type ApproverFunc func(ctx context.Context, req ApprovalRequest) (bool, error)

// Approve calls f.
func (f ApproverFunc) Approve(ctx context.Context, req ApprovalRequest) (bool, error) {
	return f(ctx, req)
}

// ApproveRules returns an Approver that approves exactly the named rules
// and declines every other: the CLI's --approve RULE.
func ApproveRules(rules ...string) Approver {
	ids := slices.Clone(rules)
	return ApproverFunc(func(_ context.Context, req ApprovalRequest) (bool, error) {
		return slices.Contains(ids, req.Rule), nil
	})
}
