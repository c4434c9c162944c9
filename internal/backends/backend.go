// Package backends holds the Backend interface that every sandbox provider
// implements, the backend DSN parser and the capability descriptors.
package backends

import (
	"context"
	"errors"
	"io"
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
	// Brokered holds the values for Spec.BrokeredSecrets: only a broker
	// gets them, never the sandbox. A backend without one refuses the spec.
	Brokered map[string]string
	Timeout  time.Duration // bounds create; 0 means Spec.TimeoutSeconds
	// OnWarning receives the warnings this sandbox raises after Create has
	// returned: OrphanedSandboxWarning when Close's grace expires, and
	// UnverifiedIsolationWarning at create. Nil drops them; Close still
	// returns an *OrphanedError.
	OnWarning func(model.Warning)
	// OnBrokered receives each request a broker handled, from the
	// broker's goroutines, for the audit record. Nil drops them.
	OnBrokered func(model.BrokeredRequest)
}

// RunOptions bound one command.
type RunOptions struct {
	Timeout time.Duration // 0 inherits the sandbox's timeout; never unbounded
	Stdin   []byte
	Env     map[string]string
	Workdir string
	// Stdout and Stderr, when set, receive the command's output on that
	// stream as it arrives, from one goroutine, instead of Result; no write
	// happens after the call returns. A command cut short has written what
	// it printed until then. The output cap applies either way.
	Stdout, Stderr io.Writer
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
	PidsCapStrategy string // how the process ceiling is enforced (runtimes differ)
	BlockedEgress   *int64 // nil where the backend does not report it
	// BlockedEgressDestinations are the first distinct destinations of
	// those attempts, with counts (nil where BlockedEgress is).
	BlockedEgressDestinations []model.BlockedDestination
	// AllowedEgress counts the connections and datagram flows an egress
	// gateway let out, with their first distinct destinations; nil where
	// no gateway forwards for the sandbox.
	AllowedEgress             *int64
	AllowedEgressDestinations []model.BlockedDestination
	Running                   bool
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
	// Close is the teardown a scoped helper runs on every exit path: it kills
	// the sandbox in a scope shielded from ctx's cancellation and bounded by
	// model.TeardownGrace. When the grace expires it emits an
	// OrphanedSandboxWarning through CreateRequest.OnWarning and returns an
	// *OrphanedError carrying the same warning. Idempotent.
	Close(ctx context.Context) error
}

// ErrNoCredentials is wrapped by the error of a backend's Open when the
// environment holds none of its credentials: a sweep of every backend
// (`sandboxio reap` without --backend) passes over such a backend, since
// this machine cannot have sandboxes there.
var ErrNoCredentials = errors.New("no credentials in the environment")

// OrphanedError is returned by Sandbox.Close when the sandbox could not be
// confirmed killed (no process of it running) within the teardown grace. The warning names the sandbox and
// its labels so that an operator (or a reaper) can find it.
type OrphanedError struct {
	Warning model.Warning
	Err     error
}

func (e *OrphanedError) Error() string {
	if e.Err == nil {
		return e.Warning.String()
	}
	return e.Warning.String() + ": " + e.Err.Error()
}

func (e *OrphanedError) Unwrap() error { return e.Err }

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

// Preflighter is implemented by backends that can check a spec against the
// live system without creating anything: the runtime is registered, the image
// is present, which disk-cap strategy applies. Template apply uses it; Create
// runs the same checks again.
type Preflighter interface {
	Preflight(ctx context.Context, spec model.Spec) (Preflight, error)
}

// Preflight is what a backend found for one spec on the live system.
type Preflight struct {
	Tier            model.Tier
	Image           string // the image as the spec names it
	ImageID         string // content-addressed ID of the image on the backend
	ImageDigests    []string
	DiskCapStrategy string
	PidsCapStrategy string
	Warnings        []model.Warning
}

// Reaper is implemented by backends that can find and remove sandboxes left
// behind by crashed owners or past their lifetime.
type Reaper interface {
	Reap(ctx context.Context, opts ReapOptions) ([]Reaped, error)
}

// ReapOptions select what Reap removes.
type ReapOptions struct {
	DryRun bool
	// Labels narrows the sweep to sandboxes carrying all of these labels.
	Labels map[string]string
	// Now is the clock used for lifetime expiry; zero means time.Now().
	Now time.Time
}

// Reaped is one sandbox that Reap removed (or would remove, on a dry run),
// or, with Left set, one it would have removed for Reason but left alone.
type Reaped struct {
	Info   Info
	Reason string // "expired" or "owner gone"
	// Left says why the sandbox was left: it is not verifiably one this
	// backend created (on Docker: no valid mark under this host's key).
	Left string
}

// TrailTime is the time of the records of a Trail: the process that writes
// one puts the time of the event in its place.
var TrailTime = time.Unix(0, 0).UTC()

// Trail is what a backend's out-of-process watcher appends to the caller's
// audit file when the caller dies without closing the sandbox (SIGKILL, a
// crash): its final record. The records are complete JSON lines, rendered
// and redacted by the caller (the watcher never sees a secret), whose time is
// TrailTime.
type Trail struct {
	Path string // the audit file, absolute
	// FileID is the identity of that file as the owner opened it
	// (safefile.ID): the watcher writes to Path only while it is that file.
	FileID string
	// Removed: the watcher removed the sandbox. Unremoved: it could not (the
	// lifetime or reap ends it). Gone and Expired: the sandbox was no longer
	// there when the watcher looked, before or after its lifetime ended.
	Removed, Unremoved, Gone, Expired []byte
	Expires                           time.Time
	// RedactTime: a secret value could occur in a timestamp; the watcher
	// writes [REDACTED] instead of the time.
	RedactTime bool
}

// Trailer is a sandbox whose backend runs such a watcher. SetTrail hands it
// the trail (and replaces an earlier one); Close withdraws it, the caller's
// own record then being the last.
type Trailer interface {
	SetTrail(Trail)
}

// Pooler is implemented by backends that can keep warm sandboxes for a
// pool: created from a template spec with no tenant, hardened and started
// like any sandbox, and bound to one tenant and session only when claimed.
// A warm sandbox is never handed to a second tenant: Claim consumes it, and
// a claimed sandbox is removed on Close like any other.
type Pooler interface {
	CreateWarm(ctx context.Context, req WarmRequest) (Warm, error)
}

// WarmRequest is one warm sandbox of a pool.
type WarmRequest struct {
	// Spec is a template spec: no tenant, no session, no secret values.
	Spec model.Spec
	// SpecSHA256 is the template spec's digest; the backend records it on
	// the sandbox and Claim refuses a sandbox that does not carry it.
	SpecSHA256 string
	// MaxIdle bounds how long the sandbox waits for a claim; the backend
	// enforces it on its side, like the lifetime.
	MaxIdle time.Duration
	Timeout time.Duration // bounds the create; 0 means Spec.TimeoutSeconds
}

// Warm is one unclaimed sandbox of a pool.
type Warm interface {
	ID() string
	// IdleUntil is when the backend removes it unless it is claimed.
	IdleUntil() time.Time
	// Claim checks that the sandbox is still what was created (running,
	// unchanged) and binds it to the tenant and session of req.Spec. The
	// lifetime counts from the claim. On any error the warm sandbox has
	// been discarded: a failed claim never leaves it to be claimed again.
	Claim(ctx context.Context, req ClaimRequest) (Sandbox, error)
	// Discard removes it; idempotent.
	Discard(ctx context.Context) error
}

// ClaimRequest binds a warm sandbox.
type ClaimRequest struct {
	// Spec is the per-tenant spec rendered from the warm sandbox's
	// template (tenant and session set), as Create would take it.
	Spec       model.Spec
	SpecSHA256 string            // of the template spec, as in WarmRequest
	Secrets    map[string]string // reach the sandbox only from the claim on
	OnWarning  func(model.Warning)
}
