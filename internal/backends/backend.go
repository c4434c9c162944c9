// Package backends holds the Backend interface that every sandbox provider
// implements, the backend DSN parser and the capability descriptors.
package backends

import (
	"context"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// CreateRequest is everything a backend needs to provision one sandbox. The
// spec has already passed the policy bundle; a backend still refuses what it
// cannot enforce on the live system (a runtime the daemon lacks, say) with a
// ConfigurationError or CapabilityNotSupported before creating anything.
type CreateRequest struct {
	Spec    model.Spec
	Secrets map[string]string // values for Spec.SecretNames; never logged
	Timeout time.Duration     // bounds create; 0 means Spec.TimeoutSeconds
}

// RunOptions bound one command.
type RunOptions struct {
	Timeout time.Duration // 0 inherits the sandbox's timeout; never unbounded
	Stdin   []byte
	Env     map[string]string
	Workdir string
}

// Result is the outcome of a command that ran to completion. A command that
// timed out or hit a cap returns an error instead, never a partial Result.
type Result struct {
	ExitCode int
	Stdout   []byte
	Stderr   []byte
	Duration time.Duration
}

// Info describes a sandbox as the backend sees it.
type Info struct {
	ID              string
	Backend         string
	Tier            model.Tier
	Labels          map[string]string
	Created         time.Time
	Expires         time.Time
	DiskCapStrategy string // how the disk cap is enforced on this backend/daemon
	BlockedEgress   *int64 // nil where the backend does not report it
	Running         bool
}

// Sandbox is one provisioned sandbox.
type Sandbox interface {
	ID() string
	Info() Info
	Run(ctx context.Context, cmd []string, opts RunOptions) (Result, error)
	RunCode(ctx context.Context, lang string, code string, opts RunOptions) (Result, error)
	Upload(ctx context.Context, path string, content []byte, mode int64) error
	// Kill ends the sandbox; it is idempotent.
	Kill(ctx context.Context) error
}

// Backend provisions sandboxes.
type Backend interface {
	Name() string
	// Capabilities is the descriptor for the given Docker runtime (or "").
	Capabilities(runtime string) (Capabilities, bool)
	Create(ctx context.Context, req CreateRequest) (Sandbox, error)
	// List returns the sandboxes carrying every one of the given labels.
	List(ctx context.Context, labels map[string]string) ([]Info, error)
	Close() error
}
