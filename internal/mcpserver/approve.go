package mcpserver

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandboxio/terraform-provider-sandboxio/sandbox"
)

// sessionKey carries the MCP session of a tool call to the Approver, which
// the helper calls with the call's context.
type sessionKey struct{}

func withSession(ctx context.Context, ss *mcp.ServerSession) context.Context {
	if ss == nil {
		return ctx
	}
	return context.WithValue(ctx, sessionKey{}, ss)
}

// Approval decides the calls the pre-execution hook says require approval (a
// sandbox.Approver): rules in Rules (--approve) are approved; with Elicit, any
// other is asked of the user through MCP elicitation and approved only on an
// explicit accept; otherwise it is refused (ApprovalRequired). Elicit is off by
// default: the server cannot tell a person's answer from a client that accepts
// everything, which would turn require_approval into allow.
type Approval struct {
	Rules  []string
	Elicit bool
	// Secrets redact the question; set before the first call.
	Secrets sandbox.Secrets
}

// Approve implements sandbox.Approver.
func (a *Approval) Approve(ctx context.Context, req sandbox.ApprovalRequest) (bool, error) {
	if slices.Contains(a.Rules, req.Rule) {
		return true, nil
	}
	ss, _ := ctx.Value(sessionKey{}).(*mcp.ServerSession)
	if !a.Elicit || ss == nil {
		return false, nil
	}
	if p := ss.InitializeParams(); p == nil || p.Capabilities == nil || p.Capabilities.Elicitation == nil {
		return false, nil
	}
	res, err := ss.Elicit(ctx, &mcp.ElicitParams{Message: a.Secrets.RedactString(approvalMessage(req)), RequestedSchema: approvalSchema})
	if err != nil {
		return false, nil // unanswered: refused, and the hook says ApprovalRequired
	}
	ok, _ := res.Content["approve"].(bool)
	return res.Action == "accept" && ok, nil
}

var approvalSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"approve": map[string]any{"type": "boolean", "title": "Run it", "description": "Run this call in the sandbox"},
	},
	"required": []string{"approve"},
}

// approvalMessage says what is to be approved: the rule, its reason, the
// tenant and the command (the code of run_code is not shown, only its
// language and the analysers' findings).
func approvalMessage(req sandbox.ApprovalRequest) string {
	var b strings.Builder
	fmt.Fprintf(&b, "sandboxio: approve a call for tenant %s session %s? Rule %s: %s.", req.Tenant, req.Session, req.Rule, req.Reason)
	if len(req.Command) > 0 {
		fmt.Fprintf(&b, " Command: %q.", req.Command)
	}
	if req.Language != "" {
		fmt.Fprintf(&b, " A %s program.", req.Language)
	}
	if len(req.Findings) > 0 {
		fmt.Fprintf(&b, " Findings: %s.", strings.Join(req.Findings, ", "))
	}
	return b.String()
}
