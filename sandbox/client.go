package sandbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/verdict"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Config configures a Client.
type Config struct {
	// PolicyPaths are the team's own policy directories (or .rego files),
	// evaluated beside the embedded bundle, as in the provider's
	// policy_paths and `sandboxio policy check --policy`.
	PolicyPaths []string
	// WaiversFile is a waiver file for soft-mandatory team rules, as in the
	// provider's policy_waivers.
	WaiversFile string
	// Audit receives one record per event; nil writes none.
	Audit *AuditLog
	// OnWarning receives the warnings of the policy decision and of the
	// sandboxes: UnverifiedIsolationWarning, OpenEgressWarning,
	// OrphanedSandboxWarning (with the sandbox id and labels). Nil drops
	// them; an orphaned sandbox is still reported by Close's error and the
	// audit record.
	OnWarning func(model.Warning)
	// Progress receives one line before a sandbox is started (and one
	// while an image is built), for a terminal. Nil prints nothing.
	Progress func(string)
	// PrepareLocalImage builds sandbox/docker's LocalImage on the Docker
	// daemon when a spec names it and it is missing (from Busybox, default
	// /bin/busybox): after the policy checks and the live checks that do not need the image (the
	// runtime registered, which confirms the tier), then the live checks
	// that do (the image, the disk-cap probe) and the isolation check run
	// again before the sandbox is created. Any other image must already be
	// on the daemon.
	PrepareLocalImage bool
	Busybox           string
	// Approver decides the calls that the pre-execution hook says require
	// approval. Nil refuses every such call with ApprovalRequired.
	Approver Approver
	// Analysers bounds and locates the static analysers of the
	// pre-execution hook (bandit, shellcheck); the zero value finds them on
	// PATH with the default time bound.
	Analysers AnalyserConfig
	// Pools keeps warm sandboxes ready for the templates listed, like a
	// connection pool: see PoolConfig. An Open of a listed template spec
	// claims one when one is ready, and opens cold otherwise.
	Pools []PoolConfig
}

// Request is what one Open provisions from.
type Request struct {
	// Spec is the JSON of a per-tenant spec (data.sandboxio_tenant_sandbox
	// spec) or of a template spec (sandboxio_template spec), unchanged.
	Spec []byte
	// SpecSHA256 is the expected sha256 of the spec (its spec_sha256
	// attribute), hex. When set, a spec whose canonical form does not hash
	// to it is refused: it was edited after Terraform rendered it.
	SpecSHA256 string
	// TenantID and SessionID say whom the sandbox is for. A per-tenant spec
	// must have been rendered for exactly these; a template spec is rendered
	// for them here (as the data source would), with ExtraLabels.
	TenantID, SessionID string
	ExtraLabels         map[string]string
	// Secrets holds a value for every name in the spec's secret_names, and
	// no other.
	Secrets Secrets
	// Timeout bounds the whole open (checks against the live backend and
	// create). 0 inherits the spec's timeout_seconds; never unbounded. A
	// timeout above timeout_seconds, which bounds every call, is refused
	// (SBX-RUN-003).
	Timeout time.Duration
	// Env adds environment variables to every command run in the sandbox
	// (after the spec's env; RunOptions.Env adds more per call). A name in
	// the spec's secret_names is refused here, before anything is
	// provisioned (SBX-SEC-003): secrets come only from Secrets.
	Env map[string]string
}

// Client opens sandboxes. It holds one sandbox per tenant and session at a
// time and never hands a sandbox to another tenant: Get looks a sandbox up by
// both ids, and a second Open for a pair that has one open (or opening) is
// refused (ConfigurationError, SBX-RUN-005). The rule holds across clients,
// processes and hosts too, where the backend can enforce it: on Docker the
// container's name is derived from the tenant and session, so the daemon
// itself refuses a second one, and Open returns the same refusal naming the
// sandbox that holds the pair (see the docker package's ScopeEnv). It is safe
// for concurrent use.
type Client struct {
	eng     *policy.Engine
	waivers *verdict.Waivers
	cfg     Config
	// backendFor returns the backend of a DSN's target; tests replace it.
	backendFor func(dsn backends.DSN) (backends.Backend, error)

	// noHook skips the pre-execution hook: only the benchmarks' baseline
	// sets it, to measure what the hook adds to a call.
	noHook bool

	// pools are the warm pools, by the digest of their template spec.
	pools map[string]*pool

	mu      sync.Mutex
	open    map[key]*Sandbox
	opening map[key]bool
	closed  bool
}

type key struct{ tenant, session string }

// New returns a client. The policy bundle (embedded plus PolicyPaths) is
// compiled once per process and shared.
func New(ctx context.Context, cfg Config) (*Client, error) {
	eng, err := policy.Load(ctx, cfg.PolicyPaths)
	if err != nil {
		return nil, err
	}
	c := &Client{eng: eng, cfg: cfg, backendFor: sharedBackend, open: map[key]*Sandbox{}, opening: map[key]bool{}}
	if cfg.WaiversFile != "" {
		w, err := verdict.LoadWaivers(cfg.WaiversFile)
		if err != nil {
			return nil, err
		}
		c.waivers = w
	}
	if err := c.startPools(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// Backends lists the DSN schemes this build can provision on: the
// registered backends with a factory.
func Backends() []string { return backends.Provisionable() }

// factory returns the registered factory of a scheme, or nil.
func factory(scheme string) func(backends.DSN) (backends.Backend, error) {
	if r, ok := backends.Registered(scheme); ok {
		return r.Open
	}
	return nil
}

var sharedBackends struct {
	mu sync.Mutex
	m  map[string]backends.Backend
}

// sharedBackend returns the process-wide backend of a DSN's target: one
// Docker client (and one reaper watcher) per process, whatever the number
// of clients; one per Modal app or Vercel project.
func sharedBackend(dsn backends.DSN) (backends.Backend, error) {
	target := dsn.Target()
	k := target.String()
	sharedBackends.mu.Lock()
	defer sharedBackends.mu.Unlock()
	if b, ok := sharedBackends.m[k]; ok {
		return b, nil
	}
	f := factory(dsn.Scheme)
	if f == nil {
		return nil, notInBuild(dsn.Scheme)
	}
	b, err := f(target)
	if err != nil {
		return nil, err
	}
	if sharedBackends.m == nil {
		sharedBackends.m = map[string]backends.Backend{}
	}
	sharedBackends.m[k] = b
	return b, nil
}

// notInBuild refuses a backend the policy accepts but this build cannot
// provision on. It is CapabilityNotSupported: the spec is valid, this
// helper lacks the capability.
func notInBuild(scheme string) error {
	return &model.Error{Class: model.ErrCapabilityNotSupported, Attribute: "backend",
		Message: fmt.Sprintf("backend %s is not available in this build of the run-time helper (it provisions on %s)", scheme, strings.Join(Backends(), ", ")),
		Fix:     "render the template for a backend this build provisions on (docker://), or use a build that includes " + scheme}
}

// plan is a request that passed every check that needs no backend.
type plan struct {
	spec          model.Spec
	digest        string
	scheme        string
	dsn           backends.DSN
	createTimeout time.Duration
	callTimeout   time.Duration
	lifetime      time.Duration
	warnings      []model.Warning
	// templateDigest is the digest of the template spec the request gave
	// (rendered here for its tenant, with no extra labels): the key of a
	// warm pool. "" for a spec rendered for a tenant already.
	templateDigest string
}

var hexDigest = regexp.MustCompile(`^[0-9a-f]{64}$`)

// specError is a refusal of the spec's integrity or tenancy binding.
func specError(rule, attr, msg, fix string) *model.Error {
	return &model.Error{Class: model.ErrConfiguration, Rule: rule, Attribute: attr, Message: msg, Fix: fix}
}

// prepare runs every check that needs no backend, in order: the spec parses,
// hashes to the expected digest, is bound to the request's tenant and
// session, names exactly the secrets given, and passes the policy bundle.
func (c *Client) prepare(ctx context.Context, req Request) (plan, error) {
	var p plan
	if req.Timeout < 0 {
		return p, &model.Error{Class: model.ErrConfiguration, Attribute: "timeout",
			Message: "the open timeout is negative", Fix: "pass 0 to inherit the spec's timeout_seconds, or a positive duration"}
	}
	spec, err := model.ParseSpec(req.Spec)
	if err != nil {
		return p, err
	}
	// What is known of the spec goes into the audit record of a refusal.
	p.spec = spec
	if d, err := backends.ParseDSN(spec.Backend); err == nil {
		p.scheme = d.Scheme
	}
	if err := checkDigest(spec, req.SpecSHA256); err != nil {
		return p, err
	}
	spec, tenant, template, err := bindTenant(spec, req)
	if err != nil {
		return p, err
	}
	p.spec = spec
	if err := checkSecrets(spec, req); err != nil {
		return p, err
	}
	if p.warnings, err = c.decide(ctx, spec, tenant, template); err != nil {
		return p, err
	}
	if tenant != nil && len(req.ExtraLabels) == 0 {
		if _, p.templateDigest, err = template.Canonical(); err != nil {
			return p, err
		}
	}

	d, err := backends.ParseDSN(spec.Backend)
	if err != nil {
		return p, err
	}
	if factory(d.Scheme) == nil {
		return p, notInBuild(d.Scheme)
	}
	_, p.digest, err = spec.Canonical()
	if err != nil {
		return p, err
	}
	p.spec, p.scheme, p.dsn = spec, d.Scheme, d
	// The policy has refused these already; converting them refuses again
	// rather than overflow or fall back to a default, so what is enforced
	// (and audited) is what the spec declares.
	if p.callTimeout, p.lifetime, err = model.Durations(spec.TimeoutSeconds, spec.LifetimeSeconds); err != nil {
		return p, err
	}
	if err := checkCallTimeout(req.Timeout, p.callTimeout, "the timeout given to open (Request.Timeout, the CLI's --timeout)"); err != nil {
		return p, err
	}
	p.createTimeout = model.EffectiveTimeout(req.Timeout, p.callTimeout)
	return p, nil
}

// checkDigest refuses a spec that does not parse to canonical JSON, or
// does not hash to the expected digest (when one is given).
func checkDigest(spec model.Spec, specSHA256 string) error {
	_, given, err := spec.Canonical()
	if err != nil {
		return specError(rules.SpecInvalid, "spec", err.Error(), "pass the rendered spec unchanged")
	}
	if want := strings.ToLower(strings.TrimSpace(specSHA256)); want != "" {
		if !hexDigest.MatchString(want) {
			return specError(rules.SpecDigest, "spec_sha256", "the expected spec sha256 is not 64 hex digits",
				"pass the spec_sha256 attribute of the template or tenant sandbox")
		}
		if want != given {
			return specError(rules.SpecDigest, "spec_sha256",
				fmt.Sprintf("the spec does not match its sha256: it hashes to %s, not %s; it was edited after Terraform rendered it, or belongs to another sandbox", given[:12], want[:12]),
				"pass the spec and spec_sha256 of the same data.sandboxio_tenant_sandbox (or sandboxio_template) unchanged")
		}
	}
	return nil
}

// bindTenant binds the spec to the request's tenant and session. A spec
// already rendered for a tenant must be this request's, unedited; a template
// spec is rendered here, and returned with the tenant and the template so
// that the policy checks it as the data source does: its own labels and the
// extra labels as given, before the reserved ones are set.
func bindTenant(spec model.Spec, req Request) (model.Spec, *inputs.Tenant, model.Spec, error) {
	var template model.Spec
	if spec.TenantID != "" || spec.SessionID != "" {
		if len(req.ExtraLabels) > 0 {
			return spec, nil, template, specError(rules.ExtraLabels, "labels", "extra labels can only be added when rendering a template spec; this spec is already rendered for a tenant",
				"set extra_labels on data.sandboxio_tenant_sandbox, or pass the template spec (the CLI's --label works with a template spec only)")
		}
		if spec.TenantID != req.TenantID || spec.SessionID != req.SessionID {
			return spec, nil, template, specError(rules.SpecTenant, "tenant_id",
				fmt.Sprintf("the spec was rendered for tenant %q session %q, not tenant %q session %q", clip(spec.TenantID), clip(spec.SessionID), clip(req.TenantID), clip(req.SessionID)),
				"open each tenant's sandbox from the spec rendered for that tenant and session (data.sandboxio_tenant_sandbox), or from the template spec")
		}
		for k, want := range map[string]string{model.LabelTenantID: spec.TenantID, model.LabelSessionID: spec.SessionID, model.LabelTemplate: spec.Name} {
			if got, ok := spec.Labels[k]; !ok || got != want {
				return spec, nil, template, specError(rules.SpecTenant, "labels",
					fmt.Sprintf("the spec's label %s does not match its tenant, session and template; it was edited after it was rendered", k),
					"pass the spec rendered by data.sandboxio_tenant_sandbox unchanged")
			}
		}
		return spec, nil, template, nil
	}
	tenant := &inputs.Tenant{TenantID: req.TenantID, SessionID: req.SessionID, ExtraLabels: req.ExtraLabels}
	template = spec
	return spec.ForTenant(req.TenantID, req.SessionID, req.ExtraLabels), tenant, template, nil
}

// checkSecrets refuses a secret the spec names but the request does not
// give, one given but not named, one too short to redact, and an extra env
// variable that would set a secret. Brokered secrets are given the same way
// as secret_names; only the backend's broker gets their values.
func checkSecrets(spec model.Spec, req Request) error {
	declared := map[string]bool{}
	for _, n := range spec.ValueNames() {
		declared[n] = true
		if !req.Secrets.has(n) {
			return &model.Error{Class: model.ErrConfiguration, Rule: rules.SecretValues, Attribute: secretsAttribute(spec, n),
				Message: fmt.Sprintf("no value was given for secret %q, named in the spec's %s", n, secretsAttribute(spec, n)),
				Fix:     "pass its value in Request.Secrets (the CLI reads it from its own environment)"}
		}
	}
	for _, n := range req.Secrets.Names() {
		if !declared[n] {
			return &model.Error{Class: model.ErrConfiguration, Rule: rules.SecretValues, Attribute: "secret_names",
				Message: fmt.Sprintf("secret %q is named in neither the spec's secret_names nor its brokered_secrets, so it would not be used", n),
				Fix:     "add it to the template's secret_names (or brokered_secrets), or do not pass it"}
		}
	}
	if err := req.Secrets.checkLengths(); err != nil {
		return err
	}
	return checkEnv(spec, req.Env)
}

// secretsAttribute is the attribute that names a secret: brokered_secrets
// or secret_names.
func secretsAttribute(spec model.Spec, name string) string {
	if _, ok := spec.BrokeredSecrets[name]; ok {
		return "brokered_secrets"
	}
	return "secret_names"
}

// decide runs the policy bundle on the spec (on the template and tenant, for
// a spec rendered here) and returns its warnings, or its refusal.
func (c *Client) decide(ctx context.Context, spec model.Spec, tenant *inputs.Tenant, template model.Spec) ([]model.Warning, error) {
	var v verdict.Verdict
	var err error
	if tenant != nil {
		_, in, err := tenant.Sandbox(template)
		if err != nil {
			return nil, err
		}
		in.Kind = policy.KindSpec
		v, err = verdict.Check(ctx, c.eng, in, verdict.Options{Waivers: c.waivers})
		if err != nil {
			return nil, err
		}
	} else if v, err = verdict.CheckSpec(ctx, c.eng, spec, verdict.Options{Waivers: c.waivers}); err != nil {
		return nil, err
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	var warnings []model.Warning
	for _, r := range v.Results {
		w := r.Warning()
		if r.Note != "" {
			w.Message += " (" + r.Note + ")"
		}
		warnings = append(warnings, w)
	}
	return warnings, nil
}

// checkEnv refuses extra environment variables that would set a secret
// name: a secret's value comes only from Secrets.
func checkEnv(spec model.Spec, env map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if slices.Contains(spec.ValueNames(), k) {
			// Request.Env is not in the spec, so the policy never sees it:
			// the rule is applied here, in the catalogue's words.
			e := backends.RuleRefusal(rules.SecEnvAndSecret, "env",
				fmt.Sprintf("%q is a secret name in the spec's %s, given as an extra env variable", k, secretsAttribute(spec, k)))
			// How to pass a secret at run time, which the rule's fix (about
			// the template) does not say.
			e.Fix += " At run time, pass it as a secret (the CLI reads declared secrets from its environment; the Go API takes Request.Secrets), not as an env variable."
			return e
		}
	}
	return nil
}

// checkCallTimeout refuses a timeout passed at run time that is longer than
// the spec's timeout_seconds (bound), which bounds every call; 0 inherits it.
func checkCallTimeout(timeout, bound time.Duration, what string) error {
	if timeout <= bound {
		return nil
	}
	return &model.Error{Class: model.ErrConfiguration, Rule: rules.CallTimeout, Attribute: "timeout",
		Message: fmt.Sprintf("%s, %s, is longer than the spec's timeout_seconds (%s), which bounds every call", what, timeout, bound),
		Fix:     fmt.Sprintf("pass a timeout of at most %s (the CLI's --timeout, e.g. --timeout %s), or none to inherit it; or raise timeout_seconds in the template and apply", bound, bound)}
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// Open provisions a sandbox for the request's tenant and session. Every
// check runs before anything is provisioned, and a refusal provisions
// nothing: the spec parses and matches SpecSHA256; it was rendered for this
// tenant and session (or is a template spec, rendered here); the policy
// bundle accepts it (the same decision as terraform plan and `sandboxio
// policy check`); its backend is in this build; the live backend's tier
// satisfies require_isolation. The caller must Close the sandbox; With does
// it on every path.
func (c *Client) Open(ctx context.Context, req Request) (*Sandbox, error) {
	start := time.Now()
	p, err := c.prepare(ctx, req)
	if err != nil {
		return nil, c.refused(req, p, start, err)
	}
	k := key{p.spec.TenantID, p.spec.SessionID}
	if err := c.reserve(k); err != nil {
		c.audit(refusalRecord(req, p, start, err), req.Secrets)
		return nil, err
	}
	sb, err := c.provision(ctx, p, req, start)
	c.mu.Lock()
	delete(c.opening, k)
	closed := c.closed
	if err == nil && !closed {
		c.open[k] = sb
	}
	c.mu.Unlock()
	if err == nil && closed {
		// Client.Close ran while this sandbox was being provisioned: it
		// did not see it, so it is closed here rather than left running
		// until its lifetime ends.
		cerr := sb.closeWith(context.WithoutCancel(ctx), "client closed")
		return nil, &model.Error{Class: model.ErrConfiguration, Message: "the client is closed",
			Fix: "open sandboxes with a new client; the sandbox provisioned meanwhile was removed", Err: cerr}
	}
	return sb, err
}

// refused audits a request refused by prepare, and returns the refusal
// redacted.
func (c *Client) refused(req Request, p plan, start time.Time, err error) error {
	secrets := req.Secrets
	if me := (*model.Error)(nil); errors.As(err, &me) && me.Rule == rules.ShortSecret {
		secrets = secrets.redactable()
	}
	err = redactError(err, secrets)
	c.audit(refusalRecord(req, p, start, err), secrets)
	return err
}

// Decision is what the checks that need no backend decided for a request:
// what a sandbox opened for it will be, as far as that is known before any
// backend is asked. An Open of the request enforces every part of it.
type Decision struct {
	Backend             string // the DSN scheme
	TenantID, SessionID string
	Template            string
	// Tier is the isolation tier the spec states, which the open requires
	// the live backend to give (it is refused otherwise); "" when the spec
	// states none: the tier is then known only once the sandbox is open.
	Tier        model.Tier
	Network     model.NetworkPolicy
	CallTimeout time.Duration
	Lifetime    time.Duration
	// Pooled is set when a warm pool of the client keeps sandboxes of the
	// request's template: an Open claims one when one is ready.
	Pooled bool
}

// Decide runs every check of Open that needs no backend (the spec, its
// digest, the tenant binding, the secrets, the policy bundle) and returns
// the decision, or the refusal Open would give, audited as Open audits it.
// Nothing is provisioned and no backend is asked: an Open of the same
// request can still be refused by the live backend (require_isolation, a
// session held by another process) or fail to reach it.
func (c *Client) Decide(ctx context.Context, req Request) (Decision, error) {
	p, err := c.prepare(ctx, req)
	if err != nil {
		return Decision{}, c.refused(req, p, time.Now(), err)
	}
	d := Decision{Backend: p.scheme, TenantID: p.spec.TenantID, SessionID: p.spec.SessionID, Template: p.spec.Name,
		Tier: p.spec.IsolationTier, Network: p.spec.Network.Normalized(), CallTimeout: p.callTimeout, Lifetime: p.lifetime}
	if p.templateDigest != "" {
		d.Pooled = c.pools[p.templateDigest] != nil
	}
	return d, nil
}

func (c *Client) reserve(k key) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return &model.Error{Class: model.ErrConfiguration, Message: "the client is closed", Fix: "open sandboxes with a new client"}
	case c.open[k] != nil || c.opening[k]:
		return &model.Error{Class: model.ErrConfiguration, Rule: rules.OneSandbox, Attribute: "session_id",
			Message: fmt.Sprintf("a sandbox is already open for tenant %q session %q: one sandbox per tenant and session", clip(k.tenant), clip(k.session)),
			Fix:     "use the open sandbox (Client.Get), close it first, or open the new sandbox under a new session id"}
	}
	c.opening[k] = true
	return nil
}

// provision checks the spec against the live backend, then creates.
func (c *Client) provision(ctx context.Context, p plan, req Request, start time.Time) (*Sandbox, error) {
	rec := baseRecord(p)
	rec.Op = "open"
	fail := func(err error) (*Sandbox, error) {
		return nil, c.openFailed(rec, p, req.Secrets, start, err)
	}
	var warned []string
	warn := func(w model.Warning) {
		warned = append(warned, w.String())
		c.warn(w, req.Secrets)
	}
	for _, w := range p.warnings {
		warn(w)
	}
	b, err := c.backendFor(p.dsn)
	if err != nil {
		return fail(err)
	}
	octx, cancel := context.WithTimeout(ctx, p.createTimeout)
	defer cancel()
	tier, err := c.liveChecks(ctx, octx, b, p, &rec, warn)
	if err != nil {
		return fail(err)
	}
	remaining := p.createTimeout - time.Since(start)
	if remaining <= 0 {
		return fail(&model.Error{Class: model.ErrCreateTimeout,
			Message: fmt.Sprintf("the sandbox was not ready within %s: the checks against the live backend took all of it", p.createTimeout),
			Fix:     "check the backend's load, or raise timeout_seconds (or the open timeout)"})
	}

	if c.cfg.Progress != nil {
		c.cfg.Progress(fmt.Sprintf("starting %s sandbox (%s, image %s, runtime %s) for tenant %s session %s …",
			p.scheme, tier, p.spec.Image, orDefault(p.spec.Runtime, "default"), p.spec.TenantID, p.spec.SessionID))
	}
	s, err := c.claim(ctx, b, p, req, tier)
	if s == nil && err == nil {
		s, err = c.create(ctx, b, p, req, remaining)
	}
	if err != nil {
		return fail(err)
	}
	// Before the created record: a process killed once that is written
	// leaves its watcher the final record to write.
	c.trail(s)
	r := s.record(EventCreated, "open")
	r.DurationMS = ms(time.Since(start))
	r.Warnings = warned
	r.Source, r.ClaimMS = s.source, s.claimMS
	c.audit(r, req.Secrets)
	return s, nil
}

// openFailed audits an open that failed while provisioning (rec as far as
// it got), and returns the error classified as the caller gets it.
func (c *Client) openFailed(rec Record, p plan, secrets Secrets, start time.Time, err error) error {
	err = classify(err, p.scheme, "open", secrets)
	rec.DurationMS = ms(time.Since(start))
	setError(&rec, err)
	rec.Event = eventOf(err, time.Time{})
	if preProvision(err) {
		rec.Event = EventRefused
	}
	if rec.Event == EventKilled {
		rec.Reason = "cancelled" // cancelled mid-create; the backend removed what it had made
	}
	c.audit(rec, secrets)
	return err
}

// liveChecks checks the spec against the live backend within octx, the
// open's bound, and returns the tier the backend gives. What the preflight
// finds goes into rec, its warnings to warn.
//
// The local image is built only once the live checks that do not need it
// passed: Docker's preflight confirms the runtime (and so the tier) before it
// looks for the image, and a missing LocalImage is built and the preflight
// run again; the tier is then checked before create.
func (c *Client) liveChecks(ctx, octx context.Context, b backends.Backend, p plan, rec *Record, warn func(model.Warning)) (model.Tier, error) {
	timedOut := func(err error) error {
		if ctx.Err() == nil && errors.Is(octx.Err(), context.DeadlineExceeded) && !errors.Is(err, model.ErrCreateTimeout) {
			return &model.Error{Class: model.ErrCreateTimeout,
				Message: fmt.Sprintf("the sandbox was not ready within %s: the %s backend did not answer in time", p.createTimeout, p.scheme),
				Fix:     "check that the backend answers (for Docker: docker info), or raise timeout_seconds (or the open timeout)", Err: err}
		}
		return err
	}
	prepareImage := c.cfg.PrepareLocalImage && p.scheme == docker.Name && p.spec.Image == docker.LocalImage
	tier := p.spec.IsolationTier
	pf, hasPreflight := b.(backends.Preflighter)
	if hasPreflight {
		res, err := pf.Preflight(octx, p.spec)
		if err != nil && prepareImage && imageMissing(err) {
			if _, perr := prepareDockerImage(octx, p.spec.Image, c.cfg.Busybox, c.cfg.Progress); perr != nil {
				return tier, timedOut(perr)
			}
			res, err = pf.Preflight(octx, p.spec)
		}
		if err != nil {
			return tier, timedOut(err)
		}
		tier = res.Tier
		rec.Tier, rec.DiskCapStrategy, rec.PidsCapStrategy = res.Tier, res.DiskCapStrategy, res.PidsCapStrategy
		for _, w := range res.Warnings {
			warn(w)
		}
	}
	if err := checkTier(p.spec, tier); err != nil {
		return tier, err
	}
	if prepareImage && !hasPreflight {
		if _, err := prepareDockerImage(octx, p.spec.Image, c.cfg.Busybox, c.cfg.Progress); err != nil {
			return tier, timedOut(err)
		}
	}
	if tier == model.TierUnknown && p.spec.RequireIsolation == "" {
		warn(model.Warning{Class: model.UnverifiedIsolationWarning, Attribute: "require_isolation",
			Message: fmt.Sprintf("backend %s has an unverified isolation tier (UNKNOWN) and the template requires none", p.scheme),
			Fix:     "set require_isolation, or use a backend whose tier is known"})
	}
	return tier, nil
}

// create creates the sandbox on the backend, with what is left of the open's
// bound, and checks that the backend labelled it for this tenant and session.
func (c *Client) create(ctx context.Context, b backends.Backend, p plan, req Request, remaining time.Duration) (*Sandbox, error) {
	s := &Sandbox{c: c, key: key{p.spec.TenantID, p.spec.SessionID}, secrets: req.Secrets, env: maps.Clone(req.Env), plan: p, source: SourceCold}
	secrets, brokered := req.Secrets.split(p.spec)
	created, err := b.Create(ctx, backends.CreateRequest{
		Spec:       p.spec,
		Secrets:    secrets,
		Brokered:   brokered,
		Timeout:    remaining,
		OnWarning:  s.onBackendWarning,
		OnBrokered: s.onBrokered,
	})
	if err != nil {
		var me *model.Error
		if errors.As(err, &me) && me.Class == model.ErrCreateTimeout {
			// Said against the whole open's bound, not what was left of it.
			err = &model.Error{Class: model.ErrCreateTimeout,
				Message: fmt.Sprintf("the sandbox was not ready within %s; anything half-created is being removed", p.createTimeout),
				Fix:     "check that the backend answers (for Docker: docker info), or raise timeout_seconds (or the open timeout)", Err: me.Err}
		}
		return nil, err
	}
	if err := c.bind(ctx, s, created, p); err != nil {
		return nil, err
	}
	return s, nil
}

// bind makes the backend's sandbox s's, once the backend shows it bound to
// the plan's tenant and session.
func (c *Client) bind(ctx context.Context, s *Sandbox, created backends.Sandbox, p plan) error {
	s.b = created
	in := created.Info()
	// The backend's labels are what a later List or reap sees: they must
	// name this tenant and session, or the sandbox is not this request's.
	if in.Labels[model.LabelTenantID] != p.spec.TenantID || in.Labels[model.LabelSessionID] != p.spec.SessionID {
		_ = created.Close(context.WithoutCancel(ctx))
		return &model.Error{Class: model.ErrConfiguration, Attribute: "labels",
			Message: "the backend did not label the sandbox with its tenant and session; it was removed", Fix: "report this as a bug"}
	}
	s.boundID.Store(&in.ID)
	s.info = Info{
		ID: in.ID, Backend: in.Backend, Tier: in.Tier, TenantID: p.spec.TenantID, SessionID: p.spec.SessionID,
		Template: p.spec.Name, SpecSHA256: p.digest, Labels: in.Labels, Network: p.spec.Network.Normalized(),
		Caps: p.spec.Resources, DiskCapStrategy: in.DiskCapStrategy, PidsCapStrategy: in.PidsCapStrategy,
		CallTimeout: p.callTimeout, Lifetime: p.lifetime, Created: in.Created, Expires: in.Expires, BlockedEgress: in.BlockedEgress, AllowedEgress: in.AllowedEgress,
	}
	return nil
}

// checkTier evaluates require_isolation against the tier of the live
// backend, and the spec's own claim of its tier.
func checkTier(spec model.Spec, live model.Tier) error {
	if err := backends.CheckLiveTier(backendName(spec), spec.RequireIsolation, live, spec.Runtime); err != nil {
		return err
	}
	if spec.IsolationTier != "" && live != spec.IsolationTier {
		return &model.Error{Class: model.ErrConfiguration, Rule: rules.SpecTierLies, Attribute: "isolation_tier",
			Message: fmt.Sprintf("the spec says isolation_tier %s but the live %s backend gives %s; nothing was provisioned", spec.IsolationTier, backendName(spec), live),
			Fix:     "render the spec again (terraform apply) against this backend, and check the runtime registered on it"}
	}
	return nil
}

func backendName(spec model.Spec) string {
	if d, err := backends.ParseDSN(spec.Backend); err == nil {
		return d.Scheme
	}
	return "backend"
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// imageMissing reports whether a preflight failed because the image is not
// on the backend (the backend's ConfigurationError on the image attribute).
func imageMissing(err error) bool {
	var me *model.Error
	return errors.As(err, &me) && me.Class == model.ErrConfiguration && me.Attribute == "image"
}

// preProvision reports whether err refused the request before anything was
// created: a configuration or capability refusal. Timeouts and backend
// failures are not refusals.
func preProvision(err error) bool {
	return errors.Is(err, model.ErrConfiguration) || errors.Is(err, model.ErrCapabilityNotSupported)
}

// warn hands a warning to Config.OnWarning with every secret value of the
// request redacted from its text: a backend's message or a label may quote
// one, and the CLI prints warnings to stderr.
func (c *Client) warn(w model.Warning, secrets Secrets) {
	if c.cfg.OnWarning != nil {
		c.cfg.OnWarning(redactWarning(w, secrets))
	}
}

// redactWarning redacts every text field of a warning (its class is one of
// the fixed names, which callers dispatch on); the labels map is copied,
// never modified in place.
func redactWarning(w model.Warning, s Secrets) model.Warning {
	if s.Len() == 0 {
		return w
	}
	w.Rule = s.RedactString(w.Rule)
	w.Attribute = s.RedactString(w.Attribute)
	w.Message = s.RedactString(w.Message)
	w.Fix = s.RedactString(w.Fix)
	w.SandboxID = s.RedactString(w.SandboxID)
	if w.Labels != nil {
		labels := make(map[string]string, len(w.Labels))
		for k, v := range w.Labels {
			labels[s.RedactString(k)] = s.RedactString(v)
		}
		w.Labels = labels
	}
	return w
}

func (c *Client) audit(r Record, secrets Secrets) {
	c.cfg.Audit.emit(r, secrets)
}

// Get returns the sandbox open for exactly this tenant and session.
func (c *Client) Get(tenantID, sessionID string) (*Sandbox, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.open[key{tenantID, sessionID}]
	return s, ok
}

func (c *Client) forget(s *Sandbox) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open[s.key] == s {
		delete(c.open, s.key)
	}
}

// With opens a sandbox, runs fn with it and closes it on every path: fn
// returning, fn panicking (the panic continues after the close) and ctx being
// cancelled, which closes the sandbox at once, even while fn is still inside
// a call. The close is shielded from ctx and bounded by the teardown grace.
// A close error is joined to fn's.
func (c *Client) With(ctx context.Context, req Request, fn func(context.Context, *Sandbox) error) (err error) {
	sb, err := c.Open(ctx, req)
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { _ = sb.closeWith(context.WithoutCancel(ctx), "cancelled") })
	defer func() {
		stop()
		// A cancelled ctx closes as cancelled, also when fn returned before
		// the AfterFunc's close ran (it may start late on a busy host).
		reason := "closed"
		if ctx.Err() != nil {
			reason = "cancelled"
		}
		r := recover()
		if r != nil {
			reason = "panic"
		}
		cerr := sb.closeWith(context.WithoutCancel(ctx), reason)
		if r != nil {
			panic(r)
		}
		// The cancellation closes the sandbox at once, so a call fn makes
		// after that close (an Upload too) finds the sandbox gone: its
		// cause is the cancellation (see cancelledFirst).
		if err != nil {
			err = cancelledFirst(ctx, err)
		}
		if cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	return fn(ctx, sb)
}

// Close closes every sandbox the client has open, drains its warm pools
// (every warm sandbox is removed, and those being created are removed as
// they land) and refuses further opens.
func (c *Client) Close(ctx context.Context) error {
	c.mu.Lock()
	c.closed = true
	open := make([]*Sandbox, 0, len(c.open))
	for _, s := range c.open {
		open = append(open, s)
	}
	c.mu.Unlock()
	errs := []error{c.drainPools(ctx)}
	for _, s := range open {
		errs = append(errs, s.closeWith(ctx, "client closed"))
	}
	return errors.Join(errs...)
}

var defaultClient = sync.OnceValues(func() (*Client, error) { return New(context.Background(), Config{}) })

// Open opens a sandbox with a process-wide client: the embedded policy
// bundle only, no audit log. See Client.Open.
func Open(ctx context.Context, req Request) (*Sandbox, error) {
	c, err := defaultClient()
	if err != nil {
		return nil, err
	}
	return c.Open(ctx, req)
}

// With is Client.With on the process-wide client of Open.
func With(ctx context.Context, req Request, fn func(context.Context, *Sandbox) error) error {
	c, err := defaultClient()
	if err != nil {
		return err
	}
	return c.With(ctx, req, fn)
}
