// Package sandbox is sandboxio's run-time helper: it opens a sandbox for one
// tenant and session from the spec Terraform rendered, runs commands and
// code in it, uploads files, and closes it.
//
//	c, err := sandbox.New(ctx, sandbox.Config{Audit: sandbox.NewAuditLog(auditFile, nil)})
//	...
//	err = c.With(ctx, sandbox.Request{
//		Spec:       specJSON,   // data.sandboxio_tenant_sandbox.X.spec
//		SpecSHA256: specSHA256, // data.sandboxio_tenant_sandbox.X.spec_sha256
//		TenantID:   "acme",
//		SessionID:  "s-42",
//		Secrets:    sandbox.NewSecrets(map[string]string{"OPENAI_API_KEY": key}),
//	}, func(ctx context.Context, sb *sandbox.Sandbox) error {
//		res, err := sb.RunCode(ctx, "python", "print(1)", sandbox.RunOptions{})
//		...
//	})
//
// # Before anything is provisioned
//
// Open refuses, and provisions nothing, when any of these fails, in order:
// the spec parses (SBX-SPC-001/002); its canonical form hashes to
// Request.SpecSHA256 when that is set (SBX-SPC-003; when it is empty the
// spec is not verified); it was rendered for exactly the requested tenant
// and session, with matching reserved labels (SBX-SPC-004), or it is a
// template spec and is rendered here as the data source would (extra labels
// only then, SBX-RUN-004); a value is given for every secret name and no
// other (SBX-RUN-001), each of at least MinSecretLength characters
// (SBX-RUN-002); Request.Env names no secret (SBX-SEC-003); the policy
// bundle (embedded plus Config.PolicyPaths, with waivers) accepts it,
// through the same decision as terraform plan and `sandboxio policy check`;
// its backend is in this build; Request.Timeout is at most the spec's
// timeout_seconds, which bounds every call (SBX-RUN-003); and, against the
// live backend, the tier satisfies require_isolation (SBX-ISO-003) and
// matches the spec's isolation_tier (SBX-SPC-005), which the policy step
// has already compared with the tier the capability data gives the spec's
// backend, as data.sandboxio_tenant_sandbox does at plan. A backend the policy
// accepts but this build cannot provision on (see Backends: vercel, daytona)
// is refused with CapabilityNotSupported. Run and RunCode refuse, before the
// call, a RunOptions.Timeout above timeout_seconds and a RunOptions.Env
// naming a secret.
//
// # The pre-execution hook
//
// Run and RunCode are decided before anything executes by the policy
// package sandboxio.exec and the team's exec packages (Config.PolicyPaths),
// with the findings of bandit (Python) and shellcheck (shell), which read a
// copy of the code and never run it (Config.Analysers bounds them). A
// mandatory block returns ExecutionBlocked; a mandatory require_approval asks
// Config.Approver (ApproveRules approves named rules) and returns
// ApprovalRequired when there is none or it declines. Either way nothing
// ran. Built-in rules are advisory unless the team's exec_enforcement raises
// them: their findings reach Config.OnWarning as ExecutionAdvisoryWarning.
// Every decision is in the audit record (Record.Hook), never the code.
//
// # Errors
//
// Refusals and failures are *Error values with a class that errors.Is
// matches (ConfigurationError, CapabilityNotSupported, CreateTimeout,
// ExecutionTimeout, SandboxGone, ResourceLimitExceeded, and the
// pre-execution hook's ExecutionBlocked and ApprovalRequired); LimitOf gives
// the limit a ResourceLimitExceeded names. A backend failure outside the
// classes (the Docker daemon not answering) is a *BackendError matching
// ErrBackend. The caller's own cancellation is returned as is
// (errors.Is(err, context.Canceled)).
//
// # Secrets
//
// Secrets are a separate parameter from env and are never persisted. Their
// values reach the sandbox's commands only (on Docker, each exec's
// environment, never the container's configuration that `docker inspect`
// shows). They are redacted from every String, GoString and fmt verb, JSON
// and slog output of Secrets, from error text, from audit records and from
// the output of commands run through the helper, buffered or streamed
// (RunOptions.Stdout and Stderr; a value split across two writes of one
// stream is still caught).
//
// Redaction replaces the exact bytes of each value, nothing more. It cannot
// catch a value the command transforms before printing it: encoded (base64,
// hex, URL encoding), with its case changed, reversed, spaced out, or cut in
// pieces printed on different streams (part on stdout, part on stderr) or
// in different commands. Code in the sandbox that holds a secret can always
// hand it out in some form; redaction guards against accidental echoes, it
// is not a barrier against code that means to leak.
//
// # Tenancy
//
// A Client holds at most one sandbox per tenant and session: a second Open
// for a pair that is open or opening is refused (ConfigurationError,
// SBX-RUN-005), and Get looks a sandbox up by both ids, so a sandbox is never
// handed to another tenant. The rule holds across clients, processes and
// hosts as well: the Docker backend names the container after a hash of the
// tenant and session, so the daemon refuses a second one, and Open returns
// the same refusal naming the sandbox that holds the pair. A container that
// holds the name but is no sandbox any more (exited, past its lifetime, or
// left by a process that is verifiably dead: same boot and PID namespace as
// the one that looks; an owner that cannot be judged from here counts as
// alive) is removed first; a live one is
// removed by its owner's Close, its owner's watcher when the owner dies, or
// its lifetime. The scope of the rule is the daemon, narrowed by
// SANDBOXIO_DOCKER_SCOPE when set. The tenant and session become the
// backend's native labels (sandboxio.tenant_id,
// sandboxio.session_id), which is how `sandboxio reap` and an operator find
// a sandbox left behind.
//
// # Teardown
//
// With closes the sandbox on every exit path (return, panic, cancellation of
// ctx, which closes it at once). Close is idempotent, shielded from
// cancellation and bounded by model.TeardownGrace; past the grace it returns
// an *OrphanedError and emits OrphanedSandboxWarning with the sandbox id and
// labels. The lifetime (lifetime_seconds) is enforced by the backend and is
// the backstop for a teardown that fails; Reap removes what is left.
//
// # Audit
//
// An AuditLog writes one JSON object per line per event: created, exec,
// timeout, limit_exceeded, killed, expired, gone, orphaned, refused, failed.
// Each record carries the sandbox id, backend, tier, tenant, session, labels,
// the network policy in effect, caps with the disk-cap and pids-cap
// strategies, timeouts, blocked_egress (the sandbox's blocked egress
// attempts so far, with blocked_egress_destinations, the first distinct
// destinations and their counts; null where the backend does not report
// them: Docker reports them under runc), exit code and durations, and
// secret names but never values.
//
// A process that dies without closing its sandboxes (SIGKILL, a crash)
// writes no last record itself. When the AuditLog is a file, the Docker
// backend's watcher appends it: each sandbox's final record (orphaned, op
// watch; gone or expired when the sandbox had already ended) is rendered
// and redacted at create, handed to the watcher, and withdrawn by Close.
package sandbox
