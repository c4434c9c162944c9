package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Info describes an open sandbox.
type Info struct {
	ID         string
	Backend    string
	Tier       model.Tier
	TenantID   string
	SessionID  string
	Template   string
	SpecSHA256 string // of the per-tenant spec it was provisioned from
	// Labels are the sandbox's labels on the backend, the reserved
	// sandboxio.tenant_id and sandboxio.session_id included.
	Labels          map[string]string
	Network         model.NetworkPolicy
	Caps            model.Caps
	DiskCapStrategy string
	PidsCapStrategy string
	CallTimeout     time.Duration
	Lifetime        time.Duration
	Created         time.Time
	Expires         time.Time
	BlockedEgress   *int64 // nil where the backend does not report it; as of the call to Info
	// BlockedEgressDestinations are the first distinct destinations of the
	// blocked attempts, with counts.
	BlockedEgressDestinations []model.BlockedDestination
	// AllowedEgress counts what an egress gateway let out (nil without
	// one), with the first distinct destinations.
	AllowedEgress             *int64
	AllowedEgressDestinations []model.BlockedDestination
}

// RunOptions bound and shape one command.
type RunOptions struct {
	// Timeout bounds the call; 0 inherits the sandbox's (timeout_seconds),
	// never "no limit". A timeout above timeout_seconds is refused
	// (SBX-RUN-003): the template's timeout bounds every call.
	Timeout time.Duration
	Stdin   []byte
	// Env adds environment variables for this call, over Request.Env.
	// Names in the spec's secret_names are refused here (SBX-SEC-003):
	// secrets come only from Request.Secrets.
	Env     map[string]string
	Workdir string
	// Stdout and Stderr, when set, receive the stream as it arrives, redacted,
	// from one goroutine at a time until the call returns, and Result holds
	// none of it; nil buffers it into Result. A timeout or cap leaves what
	// was printed until then written; the error follows.
	// A write's tail that could begin a secret value is held back until the
	// next write, so a value split across two is caught. Redaction matches
	// exact bytes (docs/design/sandbox-runtime.md says what it cannot catch).
	Stdout, Stderr io.Writer
	// OnWarning, when set, receives the warnings of this call, redacted,
	// before the command runs: the pre-execution hook's advisory findings
	// (ExecutionAdvisoryWarning), so that a caller serving several calls
	// can hand each its own. Config.OnWarning receives them as well.
	OnWarning func(model.Warning)
}

// Result is a command that ran to completion. A command that timed out or
// hit a cap returns an error instead, never partial output (a streamed
// stream, RunOptions.Stdout or Stderr, has been written already). Every
// secret value in Stdout and Stderr is replaced with [REDACTED]: the sandbox
// uses its secrets, it does not hand them back.
type Result struct {
	ExitCode int
	Stdout   []byte
	Stderr   []byte
	Duration time.Duration
}

// Sandbox is one open sandbox, bound to one tenant and session. Its methods
// are safe for concurrent use.
type Sandbox struct {
	c       *Client
	b       backends.Sandbox
	key     key
	secrets Secrets
	env     map[string]string // Request.Env, for every call
	plan    plan
	info    Info

	// source says how it was opened (SourcePool or SourceCold), and
	// claimMS how long the claim of a warm sandbox took, for the audit.
	source  string
	claimMS *float64

	closeOnce sync.Once
	closeErr  error
	orphaned  sync.Once
	// boundID is the backend's id once bound: read by onBrokered, which
	// runs on the broker's goroutines.
	boundID atomic.Pointer[string]
}

// String names the sandbox, its backend, tenant and session; never a secret.
func (s *Sandbox) String() string {
	return fmt.Sprintf("sandbox %s (%s, tenant %s, session %s)", shortID(s.info.ID), s.info.Backend, s.info.TenantID, s.info.SessionID)
}

// GoString is what %#v prints: the same as String.
func (s *Sandbox) GoString() string { return s.String() }

// ID returns the backend's id of the sandbox.
func (s *Sandbox) ID() string { return s.info.ID }

// Info describes the sandbox.
func (s *Sandbox) Info() Info {
	in := s.info
	in.Labels = maps.Clone(in.Labels)
	e := s.egressNow()
	in.BlockedEgress, in.BlockedEgressDestinations = e.BlockedEgress, e.BlockedEgressDestinations
	in.AllowedEgress, in.AllowedEgressDestinations = e.AllowedEgress, e.AllowedEgressDestinations
	return in
}

// egressNow is what the backend reports of the sandbox's blocked and
// allowed egress now (it counts as long as the sandbox runs).
func (s *Sandbox) egressNow() backends.Info {
	if s.b == nil {
		return backends.Info{BlockedEgress: s.info.BlockedEgress, AllowedEgress: s.info.AllowedEgress}
	}
	return s.b.Info()
}

// setEgress copies the egress counts of now into an audit record.
func (s *Sandbox) setEgress(r *Record) {
	e := s.egressNow()
	r.BlockedEgress, r.BlockedEgressDestinations = e.BlockedEgress, e.BlockedEgressDestinations
	r.AllowedEgress, r.AllowedEgressDestinations = e.AllowedEgress, e.AllowedEgressDestinations
}

// Run runs a command to completion within its timeout.
func (s *Sandbox) Run(ctx context.Context, cmd []string, opts RunOptions) (Result, error) {
	r := s.record(EventExec, "run")
	r.Command = auditCommand(cmd, s.secrets)
	return s.exec(ctx, r, opts, call{op: policy.OpRun, argv: cmd, stdin: opts.Stdin, env: s.envNames(opts.Env)}, func(o backends.RunOptions) (backends.Result, error) {
		return s.b.Run(ctx, cmd, o)
	})
}

// Languages lists the lang values RunCode accepts (the interpreter must
// also be in the image), sorted; a caller can refuse any other before it
// opens a sandbox, as the CLI's run-code does.
func Languages() []string { return docker.Languages() }

// RunCode runs a program in an interpreter of the image (python, sh, bash,
// node, ruby). The program travels on standard input, or as a file when
// opts.Stdin is set.
func (s *Sandbox) RunCode(ctx context.Context, lang, code string, opts RunOptions) (Result, error) {
	r := s.record(EventExec, "run_code")
	r.Lang = lang
	sum := sha256.Sum256([]byte(code))
	r.CodeSHA256 = hex.EncodeToString(sum[:])
	r.Bytes = ptr(len(code))
	return s.exec(ctx, r, opts, call{op: policy.OpRunCode, language: lang, code: code, stdin: opts.Stdin, env: s.envNames(opts.Env)}, func(o backends.RunOptions) (backends.Result, error) {
		return s.b.RunCode(ctx, lang, code, o)
	})
}

// The pre-execution hook decides the call (c) after those checks and before
// anything executes: a block, or a require_approval that is not approved,
// returns its typed error and runs nothing.
func (s *Sandbox) exec(ctx context.Context, r Record, opts RunOptions, c call, run func(backends.RunOptions) (backends.Result, error)) (Result, error) {
	c.onWarning = opts.OnWarning
	timeout := model.EffectiveTimeout(opts.Timeout, s.info.CallTimeout)
	r.Timeouts.CallSeconds = seconds(timeout)
	// Refused before the call, as Open refuses them before provisioning
	// (the CLI's --env and --timeout are refused there).
	err := checkEnv(s.plan.spec, opts.Env)
	if err == nil {
		err = checkCallTimeout(opts.Timeout, s.info.CallTimeout, "the call's timeout (RunOptions.Timeout)")
	}
	hookStart := time.Now()
	if err == nil && !s.c.noHook {
		err = s.preExec(ctx, &r, c)
	}
	if err != nil {
		r.Event, r.Timeouts.CallSeconds = EventRefused, seconds(s.info.CallTimeout)
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			// Cancelled before it ran: no policy refused it.
			r.Event, r.Reason = EventKilled, "cancelled"
		}
		setError(&r, err)
		r.DurationMS = 0
		if r.Hook != nil {
			r.DurationMS = ms(time.Since(hookStart))
		}
		s.c.audit(r, s.secrets)
		return Result{}, redactError(err, s.secrets)
	}
	env := opts.Env
	if len(s.env) > 0 {
		env = maps.Clone(s.env)
		maps.Copy(env, opts.Env)
	}
	start := time.Now()
	bopts := backends.RunOptions{Timeout: opts.Timeout, Stdin: opts.Stdin, Env: env, Workdir: opts.Workdir}
	var outW, errW *streamWriter
	if opts.Stdout != nil {
		outW = newStreamWriter(opts.Stdout, s.secrets)
		bopts.Stdout = outW
	}
	if opts.Stderr != nil {
		errW = newStreamWriter(opts.Stderr, s.secrets)
		bopts.Stderr = errW
	}
	res, err := run(bopts)
	// A streamed stream is complete: what the backend still returned of it
	// (the daemon's own words before the command started) goes the same way,
	// then what was held back for redaction.
	if outW != nil {
		if len(res.Stdout) > 0 {
			_, _ = outW.Write(res.Stdout)
		}
		res.Stdout = nil
		_ = outW.Close()
	}
	if errW != nil {
		if len(res.Stderr) > 0 {
			_, _ = errW.Write(res.Stderr)
		}
		res.Stderr = nil
		_ = errW.Close()
	}
	if err != nil {
		err = classify(err, s.info.Backend, r.Op, s.secrets)
		err = cancelledFirst(ctx, err)
		s.finish(r, start, err)
		return Result{}, err
	}
	r.ExitCode = ptr(res.ExitCode)
	s.finish(r, start, nil)
	return Result{ExitCode: res.ExitCode, Stdout: s.secrets.Redact(res.Stdout), Stderr: s.secrets.Redact(res.Stderr), Duration: res.Duration}, nil
}

// Upload writes a file into the sandbox (mode 0 means 0644), within the
// sandbox's timeout.
func (s *Sandbox) Upload(ctx context.Context, path string, content []byte, mode fs.FileMode) error {
	r := s.record(EventExec, "upload")
	r.Path = path
	r.Bytes = ptr(len(content))
	r.Timeouts.CallSeconds = seconds(s.info.CallTimeout)
	start := time.Now()
	err := s.b.Upload(ctx, path, content, int64(mode.Perm()))
	if err != nil {
		err = classify(err, s.info.Backend, "upload", s.secrets)
		err = cancelledFirst(ctx, err)
	} else {
		r.ExitCode = ptr(0)
	}
	s.finish(r, start, err)
	return err
}

// Close kills the sandbox, in a scope shielded from ctx's cancellation and
// bounded by the teardown grace (model.TeardownGrace): within the grace the
// backend confirms that no process of the sandbox runs any more; removing
// what is left of it (a stopped container) may finish after Close returns.
// When the kill cannot be confirmed within the grace it returns an
// *OrphanedError whose warning names the sandbox and its labels
// (also sent to Config.OnWarning and the audit log). Idempotent: later calls
// return the first call's result.
func (s *Sandbox) Close(ctx context.Context) error {
	return s.closeWith(ctx, "closed")
}

func (s *Sandbox) closeWith(ctx context.Context, reason string) error {
	s.closeOnce.Do(func() {
		start := time.Now()
		err := s.b.Close(context.WithoutCancel(ctx))
		s.c.forget(s)
		var oe *backends.OrphanedError
		if errors.As(err, &oe) {
			// The backend's warning hook already audited it.
			s.onBackendWarning(oe.Warning)
			s.closeErr = redactError(err, s.secrets)
			return
		}
		r := s.record(EventKilled, "close")
		r.Reason = reason
		if err != nil {
			err = classify(err, s.info.Backend, "close", s.secrets)
			s.finish(r, start, err)
			s.closeErr = err
			return
		}
		r.DurationMS = ms(time.Since(start))
		s.c.audit(r, s.secrets)
	})
	return s.closeErr
}

// onBackendWarning receives the backend's warnings for this sandbox. An
// orphan is audited once, however it is reported.
func (s *Sandbox) onBackendWarning(w model.Warning) {
	if w.Class == model.OrphanedSandboxWarning {
		first := false
		s.orphaned.Do(func() { first = true })
		if !first {
			return
		}
		r := s.record(EventOrphaned, "close")
		r.Reason = w.Message
		r.Warnings = []string{w.String()}
		s.c.audit(r, s.secrets)
	}
	s.c.warn(w, s.secrets)
}

// onBrokered audits one request the backend's broker handled. It runs on
// the broker's goroutines, after the open returned (the sandbox's code
// sends the requests).
func (s *Sandbox) onBrokered(b model.BrokeredRequest) {
	r := baseRecord(s.plan)
	r.Event, r.Op = EventBrokered, "broker"
	r.SandboxID = s.boundID.Load()
	r.Brokered = &b
	s.c.audit(r, s.secrets)
}

// finish audits a call that ended, successfully or not.
func (s *Sandbox) finish(r Record, start time.Time, err error) {
	r.DurationMS = ms(time.Since(start))
	s.setEgress(&r)
	if err != nil {
		r.Event = eventOf(err, s.info.Expires)
		setError(&r, err)
		if r.Event == EventKilled {
			r.Reason = "cancelled"
		}
	}
	s.c.audit(r, s.secrets)
}

// record is an audit record with the sandbox's identity and policy.
func (s *Sandbox) record(event, op string) Record {
	r := baseRecord(s.plan)
	r.Event, r.Op = event, op
	r.SandboxID = ptr(s.info.ID)
	r.Tier = s.info.Tier
	r.DiskCapStrategy, r.PidsCapStrategy = s.info.DiskCapStrategy, s.info.PidsCapStrategy
	s.setEgress(&r)
	if !s.info.Created.IsZero() {
		r.AgeMS = ptr(ms(time.Since(s.info.Created)))
	}
	return r
}

func baseRecord(p plan) Record {
	spec := p.spec
	net := spec.Network.Normalized()
	caps := spec.Resources
	return Record{
		Backend:     p.scheme,
		Tier:        spec.IsolationTier,
		TenantID:    spec.TenantID,
		SessionID:   spec.SessionID,
		Template:    spec.Name,
		SpecSHA256:  p.digest,
		Labels:      spec.Labels,
		Network:     &net,
		Caps:        &caps,
		SecretNames: spec.ValueNames(),
		Timeouts: Timeouts{CreateSeconds: seconds(p.createTimeout), CallSeconds: seconds(p.callTimeout),
			LifetimeSeconds: seconds(p.lifetime)},
	}
}

// refusalRecord audits a request refused before a backend was involved:
// the tenant and session that asked, and what is known of the spec (none of
// it when it did not parse).
func refusalRecord(req Request, p plan, start time.Time, err error) Record {
	r := Record{Event: EventRefused, Op: "open", TenantID: req.TenantID, SessionID: req.SessionID, SecretNames: req.Secrets.Names()}
	if p.spec.SpecVersion != 0 {
		r = baseRecord(p)
		// Who asked: a spec of another tenant names its own.
		r.Event, r.Op, r.TenantID, r.SessionID = EventRefused, "open", req.TenantID, req.SessionID
	}
	r.DurationMS = ms(time.Since(start))
	setError(&r, err)
	return r
}

func setError(r *Record, err error) {
	r.Error = err.Error()
	var me *model.Error
	if errors.As(err, &me) {
		r.ErrorClass, r.Rule, r.Attribute, r.Limit = string(me.Class), me.Rule, me.Attribute, me.Limit
	}
	if r.ErrorClass == "" {
		if c := ClassOf(err); c != "" {
			r.ErrorClass = string(c)
		} else if errors.Is(err, ErrBackend) {
			r.ErrorClass = "BackendError"
		}
	}
}

// cancelledFirst: a call whose ctx was cancelled while it ran may find its
// sandbox gone, when the cancellation also closed the sandbox (With does)
// and the close overtook the call. The cancellation is then its cause, and
// comes first: errors.Is(err, context.Canceled) holds, the audit records the
// call as killed (cancelled), and the SandboxGone stays in the chain.
func cancelledFirst(ctx context.Context, err error) error {
	if ctx.Err() == nil || errors.Is(err, ctx.Err()) || !errors.Is(err, model.ErrSandboxGone) {
		return err
	}
	return errors.Join(context.Cause(ctx), err)
}

// eventOf maps an error to its audit event.
func eventOf(err error, expires time.Time) string {
	switch {
	case errors.Is(err, model.ErrExecutionTimeout), errors.Is(err, model.ErrCreateTimeout):
		return EventTimeout
	case errors.Is(err, model.ErrResourceLimitExceeded):
		return EventLimitExceeded
	case errors.Is(err, context.Canceled):
		// The caller cancelled; the command was killed with its sandbox
		// (before SandboxGone: see cancelledFirst).
		return EventKilled
	case errors.Is(err, model.ErrSandboxGone):
		if !expires.IsZero() && !time.Now().Before(expires) || strings.Contains(err.Error(), "lifetime ended") {
			return EventExpired
		}
		return EventGone
	}
	return EventFailed
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
