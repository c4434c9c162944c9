package backendtest

import (
	"context"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Harness plugs one backend into the suite (docs/design/conformance-suite.md).
type Harness struct {
	// Name is shown in skip reasons and failures ("docker/runc", "e2b-server").
	Name string
	// Backend is the backend under test. Required.
	Backend backends.Backend
	// Spec returns a spec Backend can open (image or template, caps, deny
	// network, timeouts). Required. Called once per sandbox.
	Spec func() model.Spec

	// Observe reports what the vendor side recorded for a sandbox. Optional.
	Observe func(ctx context.Context, sandboxID string) (Observed, error)
	// Faults injects vendor-side faults. Optional.
	Faults Faults
	// Credential is the canary API key the backend was opened with. Optional.
	Credential string

	// AllowList is an egress allow list this backend enforces; empty means
	// the backend refuses allow lists.
	AllowList []string
	// EgressTarget is host:port of a TCP listener a sandbox with open egress
	// reaches; used when a deny sandbox still shows a network interface.
	EgressTarget string
	// ObservesEgress says the backend reports blocked egress (Info's
	// BlockedEgress) and so accepts egress "learn"; otherwise learn must be
	// refused and BlockedEgress stay nil. It must match the backend's
	// capability data (blocked_egress_reporting).
	ObservesEgress bool
	// Caps are the caps the caps behaviour opens with; zero means
	// {CPU: 0.5, MemoryMB: 96, DiskMB: 64, Pids: 64}.
	Caps model.Caps
	// PidsCeiling, when set, says the backend sets no process cap per
	// sandbox: the ceiling is the host's (a Kubernetes node's
	// podPidsLimit), which the backend measures and reports for each
	// sandbox, and PidsCeiling returns it, in tasks. The caps behaviour then
	// starts processes inside the sandbox until a fork is refused and checks
	// that this happens at that ceiling, instead of comparing with pids.
	PidsCeiling func(sb backends.Sandbox) (int64, error)
	// Code is the RunCode program; zero means sh printing 42.
	Code Code
	// ExecTimeout and Lifetime are the short bounds of the timing
	// behaviours; zero means 2 s and 4 s.
	ExecTimeout, Lifetime time.Duration
	// SecretsInPlainEnv says the vendor stores secret values as plain env.
	SecretsInPlainEnv bool
	// GoneWithin is how long a killed, closed or expired sandbox may still
	// be listed; zero means 15 s.
	GoneWithin time.Duration
	// LifetimeEarly is how long before its lifetime (counted from the
	// start of the create call) the vendor may end a sandbox; zero means
	// 100 ms. A backend whose enforcer counts whole seconds from a start
	// time truncated to the second (a Kubernetes kubelet and
	// activeDeadlineSeconds) rounds toward ending early rather than late,
	// and declares up to 1 s here.
	LifetimeEarly time.Duration

	// Orphan opens a sandbox of spec in an owner process of its own (for
	// Docker: this test binary run again, with the watcher it starts), runs
	// script in it (SwitchOffScript, which returns at once), and then kills
	// outright (SIGKILL) that owner and every process of it that could end
	// the sandbox, returning once they are dead. lifetime-locked then wants
	// the sandbox gone within its lifetime plus LifetimeBound.
	Orphan func(ctx context.Context, spec model.Spec, script string) (Orphaned, error)
	// LifetimeKeeper, for a harness without Orphan, says where the lifetime
	// is kept instead, with no process of the client involved ("the
	// kubelet: activeDeadlineSeconds"); lifetime-locked then runs the
	// script from this process and leaves the sandbox alone until it ends.
	// A harness must set one of the two.
	LifetimeKeeper string
	// LifetimeBound is how long after its lifetime an abandoned sandbox may
	// still be listed; zero means GoneWithin.
	LifetimeBound time.Duration
	// Init, when set, is the name (/proc/1/comm) PID 1 of every sandbox
	// must have: the process that keeps the lifetime inside it.
	Init string

	// Skip maps a behaviour to the reason this harness cannot show it.
	Skip map[Behaviour]string
	// Only, when set, runs just these behaviours.
	Only []Behaviour
	// Serial runs the behaviours one at a time.
	Serial bool
}

// Code is a RunCode program and what it prints on stdout.
type Code struct {
	Lang, Program, Want string
}

// Observed is what the vendor side recorded for a sandbox. A nil field is
// not checked.
type Observed struct {
	// Labels are the labels as the vendor stores them (Docker labels, E2B
	// metadata, Modal tags).
	Labels map[string]string
	// PlainEnv is the environment the vendor shows to anyone who can inspect
	// the sandbox (Docker's container config, E2B's envVars).
	PlainEnv map[string]string
	// Network is the egress control the vendor applies.
	Network *ObservedNetwork
	// Caps are the caps the vendor enforces; a zero field was not reported.
	Caps *model.Caps
	// Lifetime is the lifetime the vendor enforces (E2B timeout, Modal
	// Timeout); zero was not reported.
	Lifetime time.Duration
}

// ObservedNetwork is a vendor's egress control.
type ObservedNetwork struct {
	// Denied: no egress at all (Docker network none, E2B
	// allow_internet_access=false or denyOut 0.0.0.0/0, Modal an empty CIDR
	// allow list).
	Denied bool
	// Allow is the allow list the vendor enforces.
	Allow []string
}

// Op names a vendor operation for fault injection.
type Op string

// The operations a harness maps to its vendor's calls.
const (
	OpCreate Op = "create"
	OpList   Op = "list"
	OpGet    Op = "get"
	OpKill   Op = "kill"
	OpRun    Op = "run"
	OpUpload Op = "upload"
)

// Fault is what the server answers instead of serving the next Times
// requests of Op.
type Fault struct {
	Op     Op
	Status int // HTTP status; a gRPC server sends the code of the same meaning
	// RetryAfter, when positive, is sent as Retry-After (whole seconds).
	RetryAfter time.Duration
	// Times is how many consecutive requests fail; 0 means 1.
	Times int
	// Applied (create only): the server creates the sandbox and then answers
	// with Status, so the caller cannot know the outcome.
	Applied bool
	// Delay holds the answer back this long (a stalled vendor).
	Delay time.Duration
}

// Faults is a conformance server's fault injection.
type Faults interface {
	// Inject arms f, replacing what was armed, and resets the counts.
	Inject(f Fault)
	// Requests counts the requests of op received since the last Inject.
	Requests(op Op) int
	// Clear disarms every fault.
	Clear()
}

// BinaryOutput, as a key of Harness.Skip, says the backend's command output
// is text only (Vercel's command stream carries it as JSON strings, so
// bytes that are not UTF-8 arrive as U+FFFD): run-streams and upload then
// check binary input and files by their MD5 digest instead of reading
// them back.
const BinaryOutput Behaviour = "binary-output"

// Behaviour names one behaviour of the suite (its subtest name).
type Behaviour string

// The behaviours.
const (
	OpenLabels      Behaviour = "open-labels"
	RunStreams      Behaviour = "run-streams"
	RunCodeB        Behaviour = "run-code"
	UploadB         Behaviour = "upload"
	ExecTimeoutB    Behaviour = "exec-timeout"
	LifetimeB       Behaviour = "lifetime"
	KillIdempotent  Behaviour = "kill-idempotent"
	CloseIdempotent Behaviour = "close-idempotent"
	Secrets         Behaviour = "secrets"
	NetworkDeny     Behaviour = "network-deny"
	NetworkAllow    Behaviour = "network-allow"
	CapsB           Behaviour = "caps"
	TypedErrors     Behaviour = "typed-errors"

	FaultAuth          Behaviour = "fault-auth"
	FaultNotFound      Behaviour = "fault-not-found"
	FaultConflict      Behaviour = "fault-conflict"
	FaultRetryAfter    Behaviour = "fault-retry-after"
	FaultRetry5xx      Behaviour = "fault-retry-5xx"
	FaultPersistent    Behaviour = "fault-persistent"
	FaultCreateRefused Behaviour = "fault-create-refused"
	FaultCreateUnknown Behaviour = "fault-create-ambiguous"
	FaultCreateStalled Behaviour = "fault-create-stalled"
)
