package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
	"github.com/sandboxio/terraform-provider-sandboxio/sandbox"
	"github.com/sandboxio/terraform-provider-sandboxio/sandbox/docker"
)

// Exit codes of the run-time commands (run, run-code, reap), beside the
// sandboxed command's own exit code, which run and run-code pass through.
// One per error class, so that a script can tell a refusal from a timeout
// from a cap.
const (
	exitConfiguration = 64  // ConfigurationError: refused before provisioning
	exitCapability    = 65  // CapabilityNotSupported: the backend cannot enforce the spec
	exitCreateTimeout = 66  // CreateTimeout
	exitExecTimeout   = 67  // ExecutionTimeout
	exitLimit         = 68  // ResourceLimitExceeded
	exitGone          = 69  // SandboxGone
	exitBackend       = 70  // the backend failed or cannot be reached
	exitBlocked       = 71  // ExecutionBlocked: the pre-execution hook blocked the command
	exitApproval      = 72  // ApprovalRequired: the hook requires approval, not given with --approve
	exitInterrupted   = 130 // SIGINT or SIGTERM; the sandbox was removed
)

// runExitCodesHelp ends the help of run and run-code (and, in part, reap).
const runExitCodesHelp = `Exit codes:
  0-255  the sandboxed command's own exit code, passed through
  2      usage or input error: bad flags or arguments, unreadable spec or code file
  64-70  refused or failed, one code per error class, nothing left provisioned:
         64 ConfigurationError, 65 CapabilityNotSupported, 66 CreateTimeout,
         67 ExecutionTimeout, 68 ResourceLimitExceeded, 69 SandboxGone, 70 backend or other
  71-72  the hook: 71 ExecutionBlocked (` + rules.ExecDownloadPipe + `, ` + rules.ExecRemoveRoot + `, ` + rules.ExecInstallDenied + `), 72 ApprovalRequired
  130    interrupted (SIGINT, SIGTERM); the sandbox was removed
Its own failures print "sandboxio COMMAND: <ErrorClass>: ..." on stderr.`

// exitFor maps an error of the run-time helper to its exit code.
func exitFor(err error) int {
	switch sandbox.ClassOf(err) {
	case model.ErrConfiguration:
		return exitConfiguration
	case model.ErrCapabilityNotSupported:
		return exitCapability
	case model.ErrCreateTimeout:
		return exitCreateTimeout
	case model.ErrExecutionTimeout:
		return exitExecTimeout
	case model.ErrResourceLimitExceeded:
		return exitLimit
	case model.ErrSandboxGone:
		return exitGone
	case model.ErrExecutionBlocked:
		return exitBlocked
	case model.ErrApprovalRequired:
		return exitApproval
	}
	return exitBackend
}

// classLine is how a failure reads on stderr: the class first.
func classLine(err error) string {
	switch {
	case sandbox.ClassOf(err) != "":
		return err.Error() // *model.Error starts with its class
	case errors.Is(err, sandbox.ErrBackend):
		return "BackendError: " + err.Error()
	}
	return "Error: " + err.Error()
}

// kvFlag is a repeatable KEY=VALUE flag.
type kvFlag map[string]string

func (k *kvFlag) String() string {
	parts := make([]string, 0, len(*k))
	for key, v := range *k {
		parts = append(parts, key+"="+v)
	}
	return strings.Join(parts, ",")
}

func (k *kvFlag) Type() string { return "KEY=VALUE" }

func (k *kvFlag) Set(v string) error {
	key, val, ok := strings.Cut(v, "=")
	if !ok || key == "" {
		return fmt.Errorf("%q is not KEY=VALUE", v)
	}
	if *k == nil {
		*k = kvFlag{}
	}
	(*k)[key] = val
	return nil
}

// runFlags are the flags run and run-code share.
type runFlags struct {
	spec, specSHA   string
	tenant, session string
	timeout         time.Duration
	audit           string
	policies        stringsFlag
	waivers         string
	labels, env     kvFlag
	workdir         string
	approve         stringsFlag
	// approver, when set, decides require_approval instead of --approve
	// alone (sandboxio mcp's, which can also ask the MCP client's user).
	approver    sandbox.Approver
	quiet       bool
	busybox     string
	commandName string
	// usesStdin is set by the command when its own input (the command's
	// stdin, the code) reads standard input, which --spec - then cannot.
	usesStdin bool
	// handoff is what scrubSecrets took over: the secret values and, for
	// --spec -, the spec already read.
	handoff *handoff
	// keepsPool is set by a command that serves for a while (mcp): a
	// template spec that declares warm_pool gets its pool, drained when
	// the command ends.
	keepsPool bool
}

// poolDrainBound bounds the drain of a command's warm pool: creates in
// flight land and are removed within it.
const poolDrainBound = time.Minute

// maxSpecBytes bounds the spec read from standard input.
const maxSpecBytes = 4 << 20

func (f *runFlags) declare(fs *pflag.FlagSet) {
	fs.StringVar(&f.spec, "spec", "", "the spec `FILE` (a tenant sandbox's or a template's spec); - reads standard input")
	fs.StringVar(&f.specSHA, "spec-sha256", "", "the spec's expected sha256 (`HEX`, its spec_sha256); an edited spec is refused")
	fs.StringVar(&f.tenant, "tenant", "", "the tenant `ID` the sandbox is for (required)")
	fs.StringVar(&f.session, "session", "", "the session `ID` (required): one sandbox per tenant and session")
	fs.Var(durationFlag{&f.timeout}, "timeout", "bound of the create and of the command, e.g. 30s; 0 inherits timeout_seconds")
	fs.StringVar(&f.audit, "audit", "", "append one JSON audit record per event to `FILE` (- for standard output)")
	fs.Var(&f.policies, "policy", "a team policy `DIR`ectory or .rego file, as in policy_paths; repeatable")
	fs.StringVar(&f.waivers, "waivers", "", "waiver `FILE` for soft-mandatory team rules, as in policy_waivers")
	fs.Var(&f.labels, "label", "extra label `KEY=VALUE` when --spec is a template spec; repeatable")
	fs.Var(&f.env, "env", "environment variable `NAME=VALUE` of the command (no secret's name); repeatable")
	fs.Var(&f.approve, "approve", "approve the calls the hook's `RULE` ("+rules.ExecBanditHigh+", "+rules.ExecShellCheck+") requires approval for; repeatable")
	fs.StringVar(&f.workdir, "workdir", "", "working `DIR`ectory of the command inside the sandbox")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress lines on standard error")
	fs.StringVar(&f.busybox, "busybox", "", "static busybox `PATH` to build "+docker.LocalImage+" from (default /bin/busybox)")
	fs.VisitAll(func(fl *pflag.Flag) { _ = fs.SetAnnotation(fl.Name, sharedFlag, []string{"run"}) })
}

// durationFlag is --timeout: a duration with its unit. A bare number gets a
// hint instead of the flag package's "parse error".
type durationFlag struct{ d *time.Duration }

func (f durationFlag) String() string {
	if f.d == nil {
		return "0s"
	}
	return f.d.String()
}

func (f durationFlag) Type() string { return "duration" }

func (f durationFlag) Set(v string) error {
	d, err := time.ParseDuration(v)
	if err == nil {
		*f.d = d
		return nil
	}
	if _, nerr := strconv.ParseFloat(v, 64); nerr == nil {
		return fmt.Errorf("a duration needs a unit: write e.g. %ss (units ms, s, m, h)", v)
	}
	return errors.New("not a duration: write a number with a unit, e.g. 30s, 2m or 1m30s")
}

// session is everything a run-time command opens a sandbox with.
type session struct {
	client *sandbox.Client
	req    sandbox.Request
	spec   model.Spec
	close  func()
}

// prepare reads the spec and the secrets, and builds the client. A non-zero
// code means the command is over.
func (f *runFlags) prepare(ctx context.Context, e *env) (*session, int) {
	name := "sandboxio " + f.commandName
	usage := func(format string, a ...any) (*session, int) {
		fmt.Fprintf(e.stderr, name+": "+format+"\n", a...)
		return nil, exitUsage
	}
	switch {
	case f.spec == "":
		return usage("--spec is required (the spec file, or - for standard input)")
	case f.tenant == "" || f.session == "":
		return usage("--tenant and --session are required: a sandbox belongs to one tenant and session")
	case f.timeout < 0:
		return usage("--timeout must be positive (0 inherits the spec's timeout_seconds)")
	case f.spec == "-" && f.usesStdin:
		return usage("--spec - and the command's input cannot both read standard input")
	}
	var data []byte
	var err error
	switch {
	case f.spec == "-" && f.handoff != nil:
		data = f.handoff.Spec
	case f.spec == "-":
		data, err = io.ReadAll(io.LimitReader(e.stdin, maxSpecBytes))
	default:
		data, err = os.ReadFile(f.spec)
	}
	if err != nil {
		return usage("read spec: %v; pass the spec file Terraform rendered (terraform output -raw tenant_spec > spec.json), or - to read it from standard input", err)
	}
	fail := func(err error) (*session, int) {
		fmt.Fprintf(e.stderr, "%s: %s\n", name, classLine(err))
		return nil, exitFor(err)
	}
	spec, err := model.ParseSpec(data)
	if err != nil {
		return fail(err)
	}
	if f.specSHA == "" {
		// Optional, so that a spec can be tried by hand; said every time,
		// so that a script that forgot it does not pass silently.
		fmt.Fprintf(e.stderr, "%s: warning: the spec was not verified against the plan's spec_sha256; pass --spec-sha256 \"$(terraform output -raw tenant_spec_sha256)\" to refuse a spec edited since Terraform rendered it\n", name)
	}
	secrets, err := sandbox.SecretsForSpec(spec, f.lookupSecret)
	if f.handoff != nil {
		clear(f.handoff.Secrets)
	}
	if err != nil {
		return fail(err)
	}
	// Out of this process's environment (scrubSecrets already re-executed
	// the CLI without them, where it could): no child process (the reaper
	// watcher, say) inherits a value.
	for _, n := range spec.ValueNames() {
		_ = os.Unsetenv(n)
	}

	s := &session{spec: spec}
	auditOut, closeAudit, err := openAudit(f.audit, e.stdout)
	if err != nil {
		return usage("audit: %v; --audit takes a file to append to, in an existing directory, or - for standard output", err)
	}
	s.close = closeAudit
	progress := func(msg string) { fmt.Fprintf(e.stderr, "sandboxio: %s\n", msg) }
	if f.quiet {
		progress = nil
	}
	var pools []sandbox.PoolConfig
	if f.keepsPool && spec.WarmPool != nil && spec.TenantID == "" && len(f.labels) == 0 {
		// The pool keeps sandboxes of the template spec; the session's
		// sandbox is claimed from it when one is ready (see PoolConfig).
		pools = []sandbox.PoolConfig{{Spec: data, SpecSHA256: f.specSHA}}
	}
	client, err := sandbox.New(ctx, sandbox.Config{
		Pools:       pools,
		PolicyPaths: f.policies,
		WaiversFile: f.waivers,
		Audit:       sandbox.NewAuditLog(auditOut, nil),
		OnWarning:   func(w model.Warning) { fmt.Fprintf(e.stderr, "%s: warning: %s\n", name, w) },
		Progress:    progress,
		// The local demo image is built on first use, after every check;
		// any other image must already be on the daemon.
		PrepareLocalImage: true,
		Busybox:           f.busybox,
		// --approve RULE approves exactly the named rules; without it every
		// require_approval decision is refused (exit 72).
		Approver: f.approverOr(sandbox.ApproveRules(f.approve...)),
	})
	if err != nil {
		s.close()
		return fail(err)
	}
	s.client = client
	if len(pools) > 0 {
		s.close = func() {
			// Every warm sandbox is removed before the command exits,
			// also after SIGTERM (ctx is cancelled by then).
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), poolDrainBound)
			defer cancel()
			if err := client.Close(dctx); err != nil {
				fmt.Fprintf(e.stderr, "%s: warning: the warm pool was not fully drained: %s\n", name, classLine(err))
			} else {
				fmt.Fprintf(e.stderr, "%s: the warm pool was drained\n", name)
			}
			closeAudit()
		}
	}
	s.req = sandbox.Request{Spec: data, SpecSHA256: f.specSHA, TenantID: f.tenant, SessionID: f.session,
		ExtraLabels: f.labels, Secrets: secrets, Timeout: f.timeout, Env: f.env}

	return s, 0
}

// runIn opens the sandbox, runs body in it and closes it on every path. body
// returns the command's result; what of its output was not streamed already
// is printed (redacted) and its exit code returned.
func (f *runFlags) runIn(ctx context.Context, e *env, body func(context.Context, *sandbox.Sandbox) (sandbox.Result, error)) int {
	s, code := f.prepare(ctx, e)
	if s == nil {
		return code
	}
	defer s.close()
	name := "sandboxio " + f.commandName
	var res sandbox.Result
	var bodyErr error
	ran := false
	err := s.client.With(ctx, s.req, func(ctx context.Context, sb *sandbox.Sandbox) error {
		r, err := body(ctx, sb)
		if err != nil {
			bodyErr = err
			return err
		}
		res, ran = r, true
		return nil
	})
	if ran {
		_, _ = e.stdout.Write(res.Stdout)
		_, _ = e.stderr.Write(res.Stderr)
	}
	if ctx.Err() != nil {
		fmt.Fprintf(e.stderr, "%s: interrupted; the sandbox was removed\n", name)
		return exitInterrupted
	}
	if bodyErr != nil {
		// The command's failure decides; a close that could not be
		// confirmed has already warned on stderr and in the audit log.
		err = bodyErr
	}
	var oe *sandbox.OrphanedError
	if err != nil && bodyErr == nil && errors.As(err, &oe) {
		// The command ran; the orphan warning is already on stderr and in
		// the audit log, and the lifetime and `sandboxio reap` remove it.
		return res.ExitCode
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "%s: %s\n", name, classLine(err))
		return exitFor(err)
	}
	return res.ExitCode
}

// runOptions streams the command's output to this process's stdout and
// stderr as it comes, redacted.
func (f *runFlags) runOptions(e *env, stdin []byte) sandbox.RunOptions {
	// --env is in the request, refused at open when it names a secret.
	return sandbox.RunOptions{Timeout: f.timeout, Workdir: f.workdir, Stdin: stdin, Stdout: e.stdout, Stderr: e.stderr}
}

// approverOr is the command's own approver, or def.
func (f *runFlags) approverOr(def sandbox.Approver) sandbox.Approver {
	if f.approver != nil {
		return f.approver
	}
	return def
}
