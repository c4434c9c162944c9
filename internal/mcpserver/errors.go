package mcpserver

import (
	"context"
	"errors"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
	"github.com/sandboxio/terraform-provider-sandboxio/sandbox"
)

// ErrorInfo is the structured content of a failed tool call, under "error".
type ErrorInfo struct {
	// Class is the error class (ConfigurationError, ExecutionTimeout,
	// ResourceLimitExceeded, SandboxGone, ... and the pre-execution hook's
	// ExecutionBlocked and ApprovalRequired), BackendError for a backend
	// failure outside the classes, Cancelled when the client cancelled the
	// call, Busy when the server already serves its most calls at once
	// (limit max_calls), or Error.
	Class     string `json:"class"`
	Rule      string `json:"rule,omitempty"`
	Attribute string `json:"attribute,omitempty"`
	Limit     string `json:"limit,omitempty"`
	Message   string `json:"message"`
	Fix       string `json:"fix,omitempty"`
}

// toolError is a failure as an MCP tool error: the text a model reads starts
// with the class, and the structured content carries the class, rule and
// fix, every string redacted.
func (s *server) toolError(err error) *mcp.CallToolResult {
	info := ErrorInfo{Class: "Error", Message: err.Error()}
	var me *model.Error
	var be *busyError
	switch {
	case errors.As(err, &be):
		info = ErrorInfo{Class: "Busy", Limit: "max_calls", Message: err.Error(),
			Fix: "retry when a running call has ended, send fewer calls at once, or start the server with a higher --max-calls"}
	case errors.As(err, &me):
		info = ErrorInfo{Class: string(me.Class), Rule: me.Rule, Attribute: me.Attribute, Limit: me.Limit, Message: me.Message, Fix: me.Fix}
		if me.Err != nil {
			info.Message += ": " + me.Err.Error()
		}
	case sandbox.ClassOf(err) != "":
		info.Class = string(sandbox.ClassOf(err))
	case errors.Is(err, sandbox.ErrBackend):
		info.Class = "BackendError"
	case errors.Is(err, context.Canceled):
		info.Class, info.Message = "Cancelled", "the call was cancelled: "+err.Error()
	}
	for _, f := range []*string{&info.Rule, &info.Attribute, &info.Message, &info.Fix} {
		*f = s.redact(*f)
	}
	text := err.Error()
	if me == nil || !strings.HasPrefix(text, info.Class) {
		text = info.Class + ": " + text
	}
	res := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: s.redact(text)}},
		StructuredContent: map[string]any{"error": info}}
	return res
}

// argError refuses a tool's arguments: a ConfigurationError naming the
// argument.
func argError(arg, msg, fix string) error {
	return &model.Error{Class: model.ErrConfiguration, Attribute: arg, Message: msg, Fix: fix}
}
