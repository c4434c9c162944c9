package vercel

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/vendorapi"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// The environment variables the backend reads. The tokens are credentials;
// the team and project IDs and the API URL are not.
const (
	EnvOIDCToken = "VERCEL_OIDC_TOKEN"
	EnvToken     = "VERCEL_TOKEN"
	EnvTeamID    = "VERCEL_TEAM_ID"
	EnvProjectID = "VERCEL_PROJECT_ID"
	// EnvAPIURL points the adapter at another API root (the local
	// conformance server); the SDK's is DefaultAPIURL.
	EnvAPIURL     = "SANDBOXIO_VERCEL_API_URL"
	DefaultAPIURL = "https://vercel.com/api"
)

// What Vercel takes, as the capability data says it (caps.memory_per_vcpu_mb,
// caps.max_vcpus, max_lifetime_seconds); the policy refuses anything else
// at plan, and the adapter refuses it again before any call (Backstop).
const (
	memoryPerVCPU = 2048
	maxVCPUs      = 8
	maxTags       = 5
	// namePrefix starts the name of every sandbox the adapter creates: the
	// rest is a nonce, so that a create whose outcome is unknown can be
	// looked up by name (and Vercel refuses a second sandbox of that name).
	namePrefix = "sandboxio-"
)

type backend struct {
	api           *vendorapi.Client
	stream        *http.Client // commands: no client-wide timeout
	base          *url.URL
	team, project string
	maxLifetime   time.Duration
	createTry     int
}

// New opens the Vercel backend on the DSN's team and project. The token is
// VERCEL_OIDC_TOKEN (whose claims must name the same team and project) or
// else VERCEL_TOKEN (with VERCEL_TEAM_ID and VERCEL_PROJECT_ID, when set,
// naming them too). No call is made.
func New(dsn backends.DSN) (backends.Backend, error) {
	cfgErr := func(msg, fix string) error {
		return &model.Error{Class: model.ErrConfiguration, Attribute: "backend", Message: msg, Fix: fix}
	}
	tok, env := os.Getenv(EnvOIDCToken), EnvOIDCToken
	if tok == "" {
		tok, env = os.Getenv(EnvToken), EnvToken
	}
	if tok == "" {
		return nil, &model.Error{Class: model.ErrConfiguration, Attribute: "backend", Err: backends.ErrNoCredentials,
			Message: "no Vercel credentials: neither " + EnvOIDCToken + " nor " + EnvToken + " is set",
			Fix:     "export " + EnvOIDCToken + " (vercel env pull) or " + EnvToken + " with access to the team (never put it in the DSN)"}
	}
	// The team and project: the DSN's; for a sweep of every backend (no
	// DSN target), the OIDC token's claims or VERCEL_TEAM_ID and
	// VERCEL_PROJECT_ID.
	team, project := dsn.Team, dsn.Project
	if env == EnvOIDCToken {
		ct, cp, ok := oidcClaims(tok)
		if !ok || team != "" && ct != team || project != "" && cp != "" && cp != project {
			return nil, cfgErr(EnvOIDCToken+" is not an OIDC token of the DSN's team and project",
				"pull a token for this project (vercel env pull), or fix the DSN's TEAM/PROJECT")
		}
		team, project = cmp.Or(team, ct), cmp.Or(project, cp)
	} else {
		for _, c := range [][2]string{{EnvTeamID, team}, {EnvProjectID, project}} {
			if v := os.Getenv(c[0]); v != "" && c[1] != "" && v != c[1] {
				return nil, cfgErr(fmt.Sprintf("%s is %q but the DSN names %q", c[0], v, c[1]), "unset "+c[0]+" or make the DSN name the same team and project")
			}
		}
		team, project = cmp.Or(team, os.Getenv(EnvTeamID)), cmp.Or(project, os.Getenv(EnvProjectID))
	}
	if team == "" || project == "" {
		return nil, cfgErr("no Vercel team or project: the DSN names none, and neither do the token nor "+EnvTeamID+"/"+EnvProjectID,
			"use vercel://TEAM/PROJECT, or set "+EnvTeamID+" and "+EnvProjectID)
	}
	raw := strings.TrimRight(os.Getenv(EnvAPIURL), "/")
	if raw == "" {
		raw = DefaultAPIURL
	}
	base, err := url.Parse(raw)
	if err != nil || base.Scheme != "https" && base.Scheme != "http" || base.Host == "" {
		return nil, cfgErr(EnvAPIURL+" is not an http(s) URL", "unset it to use "+DefaultAPIURL)
	}
	life := 18000 * time.Second
	if c, ok := backends.Lookup(Name); ok && c.MaxLifetimeSeconds > 0 {
		life = time.Duration(c.MaxLifetimeSeconds) * time.Second
	}
	return &backend{
		api: &vendorapi.Client{BaseURL: base, Vendor: "Vercel", AuthHeader: "Authorization", AuthPrefix: "Bearer ",
			Credential: vendorapi.NewCredential(tok), CredentialEnv: env, UserAgent: "sandboxio",
			HTTP: &http.Client{Timeout: 60 * time.Second}},
		stream: &http.Client{}, base: base, team: team, project: project, maxLifetime: life, createTry: 3,
	}, nil
}

func (b *backend) Name() string { return Name }

func (b *backend) Capabilities(string) (backends.Capabilities, bool) { return backends.Lookup(Name) }

func (b *backend) Close() error { return nil }

// String never shows the token.
func (b *backend) String() string   { return fmt.Sprintf("vercel backend %s/%s", b.team, b.project) }
func (b *backend) GoString() string { return b.String() }

// plan is a create request checked without any call.
type plan struct {
	spec            model.Spec
	call, createFor time.Duration
	life            time.Duration
	body            createReq
	secrets         map[string]string
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// validate refuses, before any call, what Vercel cannot enforce exactly:
// the policy should have refused it already (Backstop).
func (b *backend) validate(req backends.CreateRequest) (plan, error) {
	s := req.Spec
	p := plan{spec: s, secrets: req.Secrets}
	if s.Image == "" {
		return p, &model.Error{Class: model.ErrConfiguration, Attribute: "image",
			Message: "no Vercel runtime: image is empty", Fix: "set image to a Vercel Sandbox runtime such as node24 or python3.13"}
	}
	// Vercel's networkPolicy can inject headers per domain, but this
	// adapter does not map brokered secrets onto it (yet).
	if err := backends.NoBroker(Name, s); err != nil {
		return p, err
	}
	vcpus, err := vcpusOf(s.Resources)
	if err != nil {
		return p, err
	}
	if p.call, p.life, err = model.Durations(s.TimeoutSeconds, s.LifetimeSeconds); err != nil {
		return p, backends.BackstopOf(Name, err)
	}
	if p.life > b.maxLifetime {
		return p, backends.Backstop(Name, rules.TmoAboveMax, "lifetime_seconds", fmt.Sprintf("lifetime %s, Vercel's maximum %s", p.life, b.maxLifetime))
	}
	p.createFor = model.EffectiveTimeout(req.Timeout, p.call)
	pol, err := networkPolicy(s.Network.Normalized())
	if err != nil {
		return p, err
	}
	if len(s.Labels) > maxTags {
		return p, backends.Backstop(Name, rules.LblTooMany, "labels", fmt.Sprintf("%d labels, at most %d tags", len(s.Labels), maxTags))
	}
	for k := range s.Env {
		if !envName.MatchString(k) {
			return p, &model.Error{Class: model.ErrConfiguration, Attribute: "env", Message: fmt.Sprintf("%q is not an environment variable name Vercel accepts", k), Fix: "use letters, digits and underscores"}
		}
	}
	for _, n := range s.SecretNames {
		if _, ok := req.Secrets[n]; !ok {
			return p, &model.Error{Class: model.ErrConfiguration, Attribute: "secret_names",
				Message: fmt.Sprintf("no value was given for the secret %s", n), Fix: "pass a value for every name in secret_names"}
		}
	}
	region := ""
	if d, err := backends.ParseDSN(s.Backend); err == nil {
		region = d.Options["region"]
	}
	p.body = createReq{ProjectID: b.project, Runtime: s.Image, Timeout: p.life.Milliseconds(), Resources: resources{VCPUs: vcpus},
		NetworkPolicy: pol, Env: maps.Clone(s.Env), Tags: maps.Clone(s.Labels), Region: region}
	return p, nil
}

// vcpusOf maps the caps to Vercel's one setting: whole vCPUs, 1 to 8, with
// 2048 MB of memory each. Disk and processes are not capped per sandbox.
func vcpusOf(c model.Caps) (int, error) {
	if c.CPU < 1 || c.CPU > maxVCPUs || c.CPU != math.Trunc(c.CPU) || c.MemoryMB != int64(c.CPU)*memoryPerVCPU {
		return 0, backends.Backstop(Name, rules.ResVCPUSteps, "resources",
			fmt.Sprintf("cpu %v with memory_mb %d; Vercel gives whole vCPUs from 1 to %d with %d MB each", c.CPU, c.MemoryMB, maxVCPUs, memoryPerVCPU))
	}
	d := model.DefaultCaps()
	if c.DiskMB != d.DiskMB || c.Pids != d.Pids {
		return 0, backends.Backstop(Name, rules.ResNotSettable, "resources", fmt.Sprintf("disk_mb %d and pids %d; Vercel sets only vCPUs and memory", c.DiskMB, c.Pids))
	}
	return int(c.CPU), nil
}

// networkPolicy maps egress: deny is {"mode": "deny-all"}; deny with an
// allow list is the list form (domains in allow, addresses and CIDR blocks
// in subnets.allow), under which everything else is denied; open egress is
// allow-all (which the policy warns about).
func networkPolicy(n model.NetworkPolicy) (any, error) {
	switch n.Egress {
	case model.EgressDeny:
		if len(n.Allow) == 0 {
			return modePolicy{Mode: "deny-all"}, nil
		}
		var lp listPolicy
		for _, a := range n.Allow {
			if p, err := netip.ParsePrefix(a); err == nil {
				addSubnet(&lp, p.Masked().String())
			} else if ip, err := netip.ParseAddr(a); err == nil {
				addSubnet(&lp, netip.PrefixFrom(ip, ip.BitLen()).String())
			} else if domainRe.MatchString(a) && len(a) <= 253 {
				lp.Allow = append(lp.Allow, a)
			} else {
				return nil, backends.Backstop(Name, rules.NetAllowList, "network.allow", fmt.Sprintf("allow entry %q is not a CIDR block, an IP address or a domain name", a))
			}
		}
		return lp, nil
	case model.EgressAllow:
		if len(n.Allow) > 0 {
			return nil, backends.Backstop(Name, rules.NetEgressMode, "network.allow", "an allow list under open egress")
		}
		return modePolicy{Mode: "allow-all"}, nil
	}
	return nil, backends.Backstop(Name, rules.NetLearn, "network.egress", "egress mode "+n.Egress)
}

func addSubnet(lp *listPolicy, cidr string) {
	if lp.Subnets == nil {
		lp.Subnets = &subnets{}
	}
	lp.Subnets.Allow = append(lp.Subnets.Allow, cidr)
}

var domainRe = regexp.MustCompile(`^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,62}$`)

func nonce() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Create opens a sandbox from the spec's runtime.
func (b *backend) Create(ctx context.Context, req backends.CreateRequest) (backends.Sandbox, error) {
	p, err := b.validate(req)
	if err != nil {
		return nil, err
	}
	p.body.Name = namePrefix + nonce()
	cctx, cancel := context.WithTimeout(ctx, p.createFor)
	defer cancel()
	resp, err := b.create(cctx, p)
	if err != nil {
		if ctx.Err() != nil || cctx.Err() != nil {
			b.cleanup(ctx, p.body.Name)
		}
		if cctx.Err() != nil && ctx.Err() == nil {
			return nil, &model.Error{Class: model.ErrCreateTimeout, Err: err,
				Message: fmt.Sprintf("the Vercel sandbox was not running within %s", p.createFor), Fix: "check Vercel's status, or raise timeout_seconds"}
		}
		return nil, err
	}
	return b.newSandbox(p, resp, req.OnWarning), nil
}

// create posts the sandbox. A failure whose outcome is unknown (429, 5xx,
// no answer) is retried only after a look by name: a sandbox found is the
// one the failed attempt made, and is taken; and a retry under the same
// name could not make a second one anyway (Vercel answers 409).
func (b *backend) create(ctx context.Context, p plan) (*withSession, error) {
	var last error
	for attempt := 0; attempt < b.createTry; attempt++ {
		if attempt > 0 {
			wait := time.Duration(250<<(attempt-1)) * time.Millisecond
			if ra, ok := vendorapi.RetryAfter(last); ok {
				wait = ra
			}
			if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
				return nil, b.createError(last, p)
			}
			select {
			case <-ctx.Done():
				return nil, b.createError(last, p)
			case <-time.After(wait):
			}
			found, ok, err := b.get(ctx, p.body.Name)
			if err != nil {
				return nil, fmt.Errorf("vercel create: the outcome of a failed create is unknown and the look by name failed, so it is not retried: %w (create: %w)", err, last)
			}
			if ok {
				return b.running(ctx, found)
			}
		}
		var resp withSession
		_, err := b.api.Do(ctx, vendorapi.Request{Op: "create sandbox", Method: http.MethodPost, Path: "/v2/sandboxes", Query: b.query(), JSON: p.body}, &resp)
		if err == nil {
			return b.running(ctx, &resp)
		}
		last = err
		status := vendorapi.StatusOf(err)
		var me *model.Error
		noAnswer := status == 0 && !errors.As(err, &me)
		if ctx.Err() != nil || !noAnswer && !vendorapi.Retryable(status) {
			return nil, b.createError(err, p)
		}
	}
	return nil, b.createError(last, p)
}

// running waits for a created session to run (Vercel may answer while it
// is pending).
func (b *backend) running(ctx context.Context, r *withSession) (*withSession, error) {
	for r.Session.Status == "pending" {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
		found, ok, err := b.get(ctx, r.Sandbox.Name)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, errors.New("vercel create: the sandbox disappeared while starting")
		}
		r = found
	}
	if r.Session.Status != "running" || r.Session.ID == "" {
		return nil, fmt.Errorf("vercel create: the sandbox's session is %q, not running", r.Session.Status)
	}
	return r, nil
}

func (b *backend) createError(err error, p plan) error {
	var me *model.Error
	if vendorapi.StatusOf(err) == http.StatusNotFound && errors.As(err, &me) {
		return &model.Error{Class: model.ErrConfiguration, Attribute: "backend", Err: err,
			Message: fmt.Sprintf("Vercel has no project %q in team %q for this token", b.project, b.team),
			Fix:     "fix the DSN's TEAM/PROJECT (vercel://TEAM_ID/PROJECT), or use a token of that team"}
	}
	if vendorapi.StatusOf(err) == http.StatusBadRequest && errors.As(err, &me) {
		return &model.Error{Class: model.ErrConfiguration, Attribute: "image", Err: err,
			Message: fmt.Sprintf("Vercel refused the sandbox (runtime %q, %d vCPUs, timeout %s) as invalid", p.spec.Image, p.body.Resources.VCPUs, p.life),
			Fix:     "set image to a Vercel Sandbox runtime (node22, node24, python3.13) and keep the caps and lifetime within your plan"}
	}
	return err
}

// cleanup removes, in the background and within the teardown grace, a
// sandbox that an abandoned create may still have made.
func (b *backend) cleanup(ctx context.Context, name string) {
	go func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), model.TeardownGrace)
		defer cancel()
		if found, ok, err := b.get(cctx, name); err == nil && ok {
			_ = b.remove(cctx, name, found.Session.ID)
		}
	}()
}

// List returns the running sandboxes carrying every one of the labels.
func (b *backend) List(ctx context.Context, labels map[string]string) ([]backends.Info, error) {
	items, err := b.list(ctx, labels)
	if err != nil {
		return nil, err
	}
	out := make([]backends.Info, 0, len(items))
	for _, it := range items {
		if active(it.Status) {
			out = append(out, infoOf(it))
		}
	}
	return out, nil
}

func infoOf(it sandboxJSON) backends.Info {
	created := time.UnixMilli(it.CreatedAt)
	expires := time.UnixMilli(it.ExpiresAt)
	if it.ExpiresAt == 0 {
		expires = created.Add(time.Duration(it.Timeout) * time.Millisecond)
	}
	return backends.Info{ID: it.Name, Backend: Name, Tier: model.TierMicroVM, Labels: it.Tags, Created: created, Expires: expires,
		Running: active(it.Status), DiskCapStrategy: diskStrategy, PidsCapStrategy: pidsStrategy}
}

const (
	diskStrategy = "not capped per sandbox: Vercel gives each sandbox its own microVM disk"
	pidsStrategy = "no process ceiling per sandbox on Vercel"
)

// Reap removes sandboxio's Vercel sandboxes whose session has ended (the
// record Vercel keeps of a stopped sandbox) or whose lifetime has passed.
func (b *backend) Reap(ctx context.Context, opts backends.ReapOptions) ([]backends.Reaped, error) {
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	items, err := b.list(ctx, opts.Labels)
	if err != nil {
		return nil, err
	}
	var out []backends.Reaped
	var first error
	for _, it := range items {
		info := infoOf(it)
		if active(it.Status) && !now.After(info.Expires) {
			continue
		}
		if !opts.DryRun {
			if err := b.remove(ctx, it.Name, it.CurrentSessionID); err != nil {
				first = cmpOr(first, err)
				continue
			}
		}
		out = append(out, backends.Reaped{Info: info, Reason: "expired"})
	}
	return out, first
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
