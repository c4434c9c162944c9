package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"strings"
	"syscall"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/client"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Error is the typed error of every refusal and failure the helper can
// classify: errors.As(err, &e) gives its Class, Rule, Attribute, Fix and,
// for ResourceLimitExceeded, the Limit.
type Error = model.Error

// The error classes, sentinels for errors.Is(err, sandbox.ErrResourceLimitExceeded).
const (
	ErrCapabilityNotSupported = model.ErrCapabilityNotSupported
	ErrConfiguration          = model.ErrConfiguration
	ErrCreateTimeout          = model.ErrCreateTimeout
	ErrExecutionTimeout       = model.ErrExecutionTimeout
	ErrSandboxGone            = model.ErrSandboxGone
	ErrResourceLimitExceeded  = model.ErrResourceLimitExceeded
	ErrExecutionBlocked       = model.ErrExecutionBlocked
	ErrApprovalRequired       = model.ErrApprovalRequired
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

// ErrBackend matches (errors.Is) a failure of the backend, or of an
// operation on it, that is none of the error classes: the Docker daemon not
// answering, an API error, an upload the sandbox's filesystem refused. It is
// a *BackendError.
var ErrBackend = errors.New("backend failure")

// BackendError is a backend failure outside the error classes.
type BackendError struct {
	Backend string // e.g. docker
	Op      string // open, run, run_code, upload, close, reap
	Err     error
}

func (e *BackendError) Error() string {
	msg := fmt.Sprintf("%s backend failed during %s: %v", e.Backend, e.Op, e.Err)
	var pe *fs.PathError
	switch {
	case e.Backend == "docker" && daemonDown(e.Err):
		msg += "; the Docker daemon does not answer: start it (or point DOCKER_HOST at one that runs), then reap what a failed create left (Client.Reap, or `sandboxio reap`)"
	case errors.As(e.Err, &pe):
		// A file on this host (the busybox an image is built from, say):
		// the daemon is not involved.
		msg += fmt.Sprintf("; %s is a file on this host that could not be used: check the path and its permissions", pe.Path)
	}
	return msg
}

func (e *BackendError) Unwrap() error { return e.Err }

// Is matches ErrBackend.
func (e *BackendError) Is(target error) bool { return target == ErrBackend }

// daemonDown reports whether err says the Docker daemon cannot be reached:
// the client could not connect ("Cannot connect to the Docker daemon"),
// the daemon's socket refused, reset or does not exist (a network error, not
// a file of this host: a missing busybox is ENOENT too), or the daemon said
// it is unavailable. An EOF alone says nothing about the daemon: reading any
// file or stream can end early.
func daemonDown(err error) bool {
	if client.IsErrConnectionFailed(err) || cerrdefs.IsUnavailable(err) {
		return true
	}
	var ne *net.OpError
	if errors.As(err, &ne) &&
		(errors.Is(ne, syscall.ECONNREFUSED) || errors.Is(ne, syscall.ENOENT) || errors.Is(ne, syscall.ECONNRESET)) {
		return true
	}
	// The client's own words (its exec attach says them in lower case),
	// for an error whose chain was flattened on the way.
	return strings.Contains(strings.ToLower(err.Error()), "cannot connect to the docker daemon")
}

// ClassOf returns the class of err, or "" when it has none. An error that
// wraps another of a different class has its own, outer class, the one its
// text starts with and the audit records: a ResourceLimitExceeded whose
// sandbox died of it (its SandboxGone in the chain, where errors.Is finds
// it too) is ResourceLimitExceeded.
func ClassOf(err error) model.ErrorClass {
	var me *model.Error
	if errors.As(err, &me) && me.Class != "" {
		return me.Class
	}
	for _, c := range model.ErrorClasses {
		if errors.Is(err, c) {
			return c
		}
	}
	return ""
}

// LimitOf returns the limit a ResourceLimitExceeded names (memory, pids,
// disk, cpu, or output: the fixed cap of 64 MiB per stream on what one
// command may print).
func LimitOf(err error) (string, bool) {
	for e := err; e != nil; {
		var me *model.Error
		if !errors.As(e, &me) {
			return "", false
		}
		if me.Class == model.ErrResourceLimitExceeded && me.Limit != "" {
			return me.Limit, true
		}
		e = me.Err
	}
	return "", false
}

// OrphanedError is returned by Close when the sandbox could not be confirmed
// killed within the teardown grace; its Warning names the sandbox and its
// labels (see `sandboxio reap`).
type OrphanedError = backends.OrphanedError

// classify gives an error the helper returns its final form: classed errors
// stay as they are, anything else becomes a *BackendError; every secret
// value in its text is redacted.
func classify(err error, backend, op string, secrets Secrets) error {
	if err == nil {
		return nil
	}
	var oe *backends.OrphanedError
	// The caller's own cancellation is neither a class nor a backend
	// failure: it stays what it is, for errors.Is(err, context.Canceled).
	cancelled := errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
	if ClassOf(err) == "" && !errors.As(err, &oe) && !cancelled {
		var be *BackendError
		if !errors.As(err, &be) {
			err = &BackendError{Backend: backend, Op: op, Err: err}
		}
	}
	return redactError(err, secrets)
}

// redactError returns err unchanged when its text holds no secret value, and
// otherwise an error with the same class and text, redacted. The original
// chain is dropped in that case (anything reachable through Unwrap could
// print the value); a sanitized *Error stays reachable for errors.As.
func redactError(err error, secrets Secrets) error {
	if err == nil || !secrets.Contains(err.Error()) {
		return err
	}
	r := &redactedError{text: secrets.RedactString(err.Error()), backend: errors.Is(err, ErrBackend)}
	var me *model.Error
	if errors.As(err, &me) {
		r.inner = &model.Error{Class: me.Class, Rule: me.Rule, Attribute: me.Attribute, Limit: me.Limit,
			Message: secrets.RedactString(me.Message), Fix: secrets.RedactString(me.Fix)}
	}
	return r
}

type redactedError struct {
	text    string
	inner   *model.Error
	backend bool
}

func (e *redactedError) Error() string { return e.text }

func (e *redactedError) Is(target error) bool {
	return e.backend && target == ErrBackend
}

func (e *redactedError) Unwrap() error {
	if e.inner == nil {
		return nil
	}
	return e.inner
}
