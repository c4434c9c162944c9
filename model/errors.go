package model

import (
	"fmt"
	"strings"
)

// ErrorClass names a class of failure. Each class is a sentinel error:
// callers write errors.Is(err, model.ErrResourceLimitExceeded), and
// errors.As(err, &e) with e a *Error for its details.
type ErrorClass string

const (
	ErrCapabilityNotSupported ErrorClass = "CapabilityNotSupported"
	ErrConfiguration          ErrorClass = "ConfigurationError"
	ErrCreateTimeout          ErrorClass = "CreateTimeout"
	ErrExecutionTimeout       ErrorClass = "ExecutionTimeout"
	ErrSandboxGone            ErrorClass = "SandboxGone"
	ErrResourceLimitExceeded  ErrorClass = "ResourceLimitExceeded"
	// ErrExecutionBlocked: the pre-execution hook (policy package
	// sandboxio.exec and the team's exec packages) blocked a run or
	// run_code call; nothing ran. Rule names the rule, Message the reason.
	ErrExecutionBlocked ErrorClass = "ExecutionBlocked"
	// ErrApprovalRequired: the pre-execution hook requires approval of the
	// call under Rule, and none was given (no Approver, the CLI without
	// --approve RULE) or the Approver declined; nothing ran.
	ErrApprovalRequired ErrorClass = "ApprovalRequired"
)

// The names before the Err prefix, kept for one release: the same values,
// so errors.Is matches either.
const (
	// Deprecated: use ErrCapabilityNotSupported.
	CapabilityNotSupported = ErrCapabilityNotSupported
	// Deprecated: use ErrConfiguration.
	ConfigurationError = ErrConfiguration
	// Deprecated: use ErrCreateTimeout.
	CreateTimeout = ErrCreateTimeout
	// Deprecated: use ErrExecutionTimeout.
	ExecutionTimeout = ErrExecutionTimeout
	// Deprecated: use ErrSandboxGone.
	SandboxGone = ErrSandboxGone
	// Deprecated: use ErrResourceLimitExceeded.
	ResourceLimitExceeded = ErrResourceLimitExceeded
	// Deprecated: use ErrExecutionBlocked.
	ExecutionBlocked = ErrExecutionBlocked
	// Deprecated: use ErrApprovalRequired.
	ApprovalRequired = ErrApprovalRequired
)

// ErrorClasses lists every error class.
var ErrorClasses = []ErrorClass{
	ErrCapabilityNotSupported, ErrConfiguration, ErrCreateTimeout,
	ErrExecutionTimeout, ErrSandboxGone, ErrResourceLimitExceeded,
	ErrExecutionBlocked, ErrApprovalRequired,
}

func (c ErrorClass) Error() string { return string(c) }

// Limits named by ErrResourceLimitExceeded.
const (
	LimitMemory = "memory"
	LimitPids   = "pids"
	LimitDisk   = "disk"
	LimitCPU    = "cpu"
	// LimitOutput is the fixed cap on what one command may print on each
	// stream (64 MiB); it is not a spec attribute.
	LimitOutput = "output"
)

// Error is a refusal or failure with its class, the policy rule that decided
// it (if any), the attribute concerned and what to change.
type Error struct {
	Class     ErrorClass
	Rule      string // stable rule ID, e.g. SBX-NET-003; empty for run-time failures
	Attribute string // dotted attribute path, e.g. network.allow
	Message   string // what is wrong; never holds a secret value
	Fix       string // what to change
	Limit     string // for ErrResourceLimitExceeded: memory, pids, disk, cpu or output
	Err       error  // underlying cause, if any
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(string(e.Class))
	if e.Limit != "" {
		fmt.Fprintf(&b, "(%s)", e.Limit)
	}
	b.WriteString(": ")
	b.WriteString(e.Message)
	if e.Rule != "" || e.Attribute != "" {
		b.WriteString(" [")
		if e.Rule != "" {
			b.WriteString(e.Rule)
		}
		if e.Attribute != "" {
			if e.Rule != "" {
				b.WriteString(", ")
			}
			b.WriteString("attribute ")
			b.WriteString(e.Attribute)
		}
		b.WriteString("]")
	}
	if e.Fix != "" {
		b.WriteString("; fix: ")
		b.WriteString(e.Fix)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Is matches the error's class, so errors.Is(err, model.ErrSandboxGone) works.
func (e *Error) Is(target error) bool {
	c, ok := target.(ErrorClass)
	return ok && c == e.Class
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf builds an Error of class c with a formatted message.
func Errorf(c ErrorClass, format string, args ...any) *Error {
	return &Error{Class: c, Message: fmt.Sprintf(format, args...)}
}

// WarningClass names a class of warning.
type WarningClass string

const (
	UnverifiedIsolationWarning WarningClass = "UnverifiedIsolationWarning"
	OrphanedSandboxWarning     WarningClass = "OrphanedSandboxWarning"
	OpenEgressWarning          WarningClass = "OpenEgressWarning"
	SecretInEnvWarning         WarningClass = "SecretInEnvWarning"
	// IdleLifetimeWarning: the backend ends a sandbox only after it has
	// been idle for its lifetime (Daytona), not at an absolute deadline.
	IdleLifetimeWarning WarningClass = "IdleLifetimeWarning"
	// EgressLearnWarning: egress = "learn" lets nothing out; it records the
	// attempts, for discovering an allow list.
	EgressLearnWarning WarningClass = "EgressLearnWarning"
	// CapNotAppliedWarning: a default cap the backend cannot set per
	// sandbox; the backend's own limit applies instead.
	CapNotAppliedWarning WarningClass = "CapNotAppliedWarning"
)

// Warning is a finding that does not stop the operation.
type Warning struct {
	Class     WarningClass
	Rule      string
	Attribute string
	Message   string
	Fix       string
	SandboxID string            // OrphanedSandboxWarning: the sandbox left behind
	Labels    map[string]string // OrphanedSandboxWarning: its labels, to find it
}

func (w Warning) String() string {
	var b strings.Builder
	b.WriteString(string(w.Class))
	b.WriteString(": ")
	b.WriteString(w.Message)
	if w.SandboxID != "" {
		fmt.Fprintf(&b, " (sandbox %s", w.SandboxID)
		if len(w.Labels) > 0 {
			fmt.Fprintf(&b, ", labels %s", formatLabels(w.Labels))
		}
		b.WriteString(")")
	}
	if w.Rule != "" {
		fmt.Fprintf(&b, " [%s]", w.Rule)
	}
	if w.Fix != "" {
		b.WriteString("; fix: ")
		b.WriteString(w.Fix)
	}
	return b.String()
}
