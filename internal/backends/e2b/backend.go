package e2b

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/vendorapi"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Labels the backend adds to a sandbox's E2B metadata.
const (
	// labelCreate is a nonce per create: after a create whose outcome is
	// unknown (a 5xx, a dropped connection), the sandbox is looked up by it
	// before the create is tried again, so a retry never makes two.
	labelCreate  = model.ReservedLabelPrefix + "create_id"
	labelExpires = model.ReservedLabelPrefix + "expires"
)

// The environment variables the backend reads. The key is a credential;
// the URLs and domain are not.
const (
	EnvAPIKey     = "E2B_API_KEY"
	EnvAPIURL     = "E2B_API_URL"
	EnvSandboxURL = "E2B_SANDBOX_URL"
	EnvDomain     = "E2B_DOMAIN"
)

// supportedDomains are E2B's own domains, whose sandboxes are reached at
// sandbox.DOMAIN with the sandbox named in headers (as the SDK does).
var supportedDomains = map[string]bool{"e2b.app": true, "e2b.dev": true, "e2b.pro": true, "e2b-staging.dev": true}

type backend struct {
	api        *client
	sandboxURL string // E2B_SANDBOX_URL, or "" to derive it per sandbox
	domain     string
	http       *http.Client
	createTry  int
	// createBackoff is the first wait before a create is looked up and retried.
	createBackoff time.Duration
}

// New opens the E2B backend on a DSN's target: the API base URL comes from
// E2B_API_URL, else https://api.DOMAIN with the DSN's domain option, else
// E2B_DOMAIN, else e2b.app; the key from E2B_API_KEY. No call is made.
func New(dsn backends.DSN) (backends.Backend, error) {
	key := os.Getenv(EnvAPIKey)
	if key == "" {
		return nil, &model.Error{Class: model.ErrConfiguration, Attribute: "backend", Err: backends.ErrNoCredentials,
			Message: "no E2B API key: " + EnvAPIKey + " is not set", Fix: "export " + EnvAPIKey + " with a key of your E2B team (never put it in the DSN)"}
	}
	domain := dsn.Options["domain"]
	if domain == "" {
		domain = os.Getenv(EnvDomain)
	}
	if domain == "" {
		domain = "e2b.app"
	}
	raw := strings.TrimRight(os.Getenv(EnvAPIURL), "/")
	if raw == "" {
		raw = "https://api." + domain
	}
	base, err := url.Parse(raw)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" || base.User != nil {
		return nil, &model.Error{Class: model.ErrConfiguration, Attribute: "backend",
			Message: fmt.Sprintf("%s (or the domain) does not give an http(s) URL with a host and no user info", EnvAPIURL), Fix: "set " + EnvAPIURL + " to the API's base URL, e.g. https://api.e2b.app"}
	}
	timeout := 60 * time.Second
	if s, err := strconv.Atoi(dsn.Options["request_timeout"]); err == nil && s > 0 {
		timeout = time.Duration(s) * time.Second
	}
	// No client-wide timeout: a command's stream lasts as long as the
	// command; every call is bounded by its context instead.
	hc := &http.Client{Transport: http.DefaultTransport}
	return &backend{
		api:        newClient(base, key, timeout),
		sandboxURL: strings.TrimRight(os.Getenv(EnvSandboxURL), "/"),
		domain:     domain, http: hc, createTry: 3, createBackoff: 200 * time.Millisecond,
	}, nil
}

func (b *backend) Name() string { return Name }

func (b *backend) Capabilities(string) (backends.Capabilities, bool) { return backends.Lookup(Name) }

func (b *backend) Close() error { return nil }

// plan is a create request checked without any call.
type plan struct {
	spec                  model.Spec
	call, life, createFor time.Duration
	body                  newSandbox
	secrets               map[string]string
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// validate refuses, before any call, what E2B cannot enforce: the policy
// should have refused it already (Backstop).
func validate(req backends.CreateRequest) (plan, error) {
	s := req.Spec
	p := plan{spec: s}
	if s.Image == "" {
		return p, &model.Error{Class: model.ErrConfiguration, Attribute: "image",
			Message: "no E2B template: image is empty", Fix: "set image to the E2B template ID or alias"}
	}
	if s.Volume != nil {
		// E2B mounts a volume by name with no per-tenant scope.
		return p, backends.Backstop(Name, rules.VolUnscoped, "volume", "a volume, which every tenant's sandboxes would share")
	}
	if err := backends.NoBroker(Name, s); err != nil {
		return p, err
	}
	if s.Resources != model.DefaultCaps() {
		return p, backends.Backstop(Name, rules.ResTemplateCap, "resources",
			fmt.Sprintf("caps %+v; template %q fixes cpu, memory and disk", s.Resources, s.Image))
	}
	var err error
	if p.call, p.life, err = model.Durations(s.TimeoutSeconds, s.LifetimeSeconds); err != nil {
		return p, backends.BackstopOf(Name, err)
	}
	p.createFor = model.EffectiveTimeout(req.Timeout, p.call)
	n := s.Network.Normalized()
	body := newSandbox{TemplateID: s.Image, Timeout: int64(p.life / time.Second), EnvVars: maps.Clone(s.Env)}
	switch n.Egress {
	case model.EgressDeny:
		if len(n.Allow) == 0 {
			f := false
			body.AllowInternetAccess = &f
			break
		}
		for _, a := range n.Allow {
			if !allowEntry(a) {
				return p, backends.Backstop(Name, rules.NetAllowList, "network.allow", fmt.Sprintf("allow entry %q is not a CIDR block, an IP address or a domain name", a))
			}
		}
		body.Network = &networkConfig{DenyOut: []string{"0.0.0.0/0"}, AllowOut: append([]string(nil), n.Allow...)}
	case model.EgressAllow:
		if len(n.Allow) > 0 {
			return p, backends.Backstop(Name, rules.NetEgressMode, "network.allow", "an allow list under open egress")
		}
	default:
		return p, backends.Backstop(Name, rules.NetLearn, "network.egress", "egress mode "+n.Egress)
	}
	// Only the named secrets reach the sandbox, and each must have a value;
	// the error names the secret, never a value.
	p.secrets = make(map[string]string, len(s.SecretNames))
	for _, name := range s.SecretNames {
		v, ok := req.Secrets[name]
		if !ok {
			return p, &model.Error{Class: model.ErrConfiguration, Rule: rules.SecretValues, Attribute: "secret_names",
				Message: fmt.Sprintf("no value was supplied for secret %q", name),
				Fix:     "pass the secret's value at run time (from the environment of the caller)"}
		}
		if !envName.MatchString(name) {
			return p, &model.Error{Class: model.ErrConfiguration, Attribute: "secret_names", Message: fmt.Sprintf("%q is not an environment variable name E2B accepts", name), Fix: "use letters, digits and underscores"}
		}
		p.secrets[name] = v
	}
	for k := range s.Env {
		if !envName.MatchString(k) {
			return p, &model.Error{Class: model.ErrConfiguration, Attribute: "env", Message: fmt.Sprintf("%q is not an environment variable name E2B accepts", k), Fix: "use letters, digits and underscores"}
		}
	}
	p.body = body
	return p, nil
}

var domainRe = regexp.MustCompile(`^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,62}$`)

// allowEntry: what E2B's allowOut takes: a CIDR block, an IP address or a
// domain name (with one leading "*." wildcard label).
func allowEntry(s string) bool {
	if _, err := netip.ParsePrefix(s); err == nil {
		return true
	}
	if _, err := netip.ParseAddr(s); err == nil {
		return true
	}
	return len(s) <= 253 && domainRe.MatchString(s)
}

func nonce() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Create opens a sandbox from the spec's template.
func (b *backend) Create(ctx context.Context, req backends.CreateRequest) (backends.Sandbox, error) {
	p, err := validate(req)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	expires := start.Add(p.life)
	labels := maps.Clone(p.spec.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[model.LabelManaged] = "true"
	labels[labelCreate] = nonce()
	labels[labelExpires] = expires.UTC().Format(time.RFC3339)
	p.body.Metadata = labels
	cctx, cancel := context.WithTimeout(ctx, p.createFor)
	defer cancel()
	resp, err := b.create(cctx, p, labels[labelCreate])
	if err != nil {
		if cctx.Err() != nil && ctx.Err() == nil {
			b.cleanupByNonce(ctx, labels[labelCreate])
			return nil, &model.Error{Class: model.ErrCreateTimeout, Err: err,
				Message: fmt.Sprintf("the E2B sandbox was not ready within %s", p.createFor), Fix: "check E2B's status, or raise timeout_seconds"}
		}
		if ctx.Err() != nil {
			b.cleanupByNonce(ctx, labels[labelCreate])
		}
		return nil, err
	}
	return b.newSandbox(p, resp, labels, start, expires, req.OnWarning), nil
}

// create posts the sandbox. A failure whose outcome is unknown (429, 5xx,
// no answer) is retried only after a lookup by the create's nonce found no
// sandbox, or removed the one it found; a refusal (4xx) is never retried.
func (b *backend) create(ctx context.Context, p plan, nonce string) (*sandboxResp, error) {
	var last error
	for attempt := 0; attempt < b.createTry; attempt++ {
		if attempt > 0 {
			wait := b.createBackoff << (attempt - 1)
			if ra, ok := vendorapi.RetryAfter(last); ok {
				wait = max(wait, ra)
			}
			if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
				return nil, b.createError(last, p)
			}
			select {
			case <-ctx.Done():
				return nil, b.createError(last, p)
			case <-time.After(wait):
			}
			// Before trying again: did the failed attempt create one?
			found, err := b.api.list(ctx, map[string]string{labelCreate: nonce})
			if err != nil {
				return nil, fmt.Errorf("e2b create: the outcome of a failed create is unknown and the lookup by label failed, so it is not retried: %w (create: %w)", err, last)
			}
			for _, f := range found {
				if err := b.api.kill(ctx, f.SandboxID); err != nil {
					return nil, fmt.Errorf("e2b create: removing the sandbox a failed create made: %w", err)
				}
			}
		}
		resp, err := b.api.create(ctx, p.body)
		if err == nil {
			return resp, nil
		}
		last = err
		if !vendorapi.Transient(err) || ctx.Err() != nil {
			return nil, b.createError(err, p)
		}
	}
	return nil, b.createError(last, p)
}

// createError names the template when E2B has none by that name; every
// other status is typed by vendorapi already.
func (b *backend) createError(err error, p plan) error {
	if vendorapi.StatusOf(err) == http.StatusNotFound {
		return &model.Error{Class: model.ErrConfiguration, Attribute: "image", Err: err,
			Message: fmt.Sprintf("E2B has no template %q for this API key's team", p.spec.Image), Fix: "set image to an E2B template ID or alias your team can use (e2b template list)"}
	}
	return err
}

// cleanupByNonce removes, in the background and within the teardown
// grace, a sandbox that an abandoned create may still have made.
func (b *backend) cleanupByNonce(ctx context.Context, nonce string) {
	go func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), model.TeardownGrace)
		defer cancel()
		if found, err := b.api.list(cctx, map[string]string{labelCreate: nonce}); err == nil {
			for _, f := range found {
				_ = b.api.kill(cctx, f.SandboxID)
			}
		}
	}()
}

// List returns the running sandboxes carrying every one of the labels.
func (b *backend) List(ctx context.Context, labels map[string]string) ([]backends.Info, error) {
	items, err := b.api.list(ctx, labels)
	if err != nil {
		return nil, err
	}
	out := make([]backends.Info, 0, len(items))
	for _, it := range items {
		out = append(out, infoOf(it))
	}
	return out, nil
}

func infoOf(it listedSandbox) backends.Info {
	return backends.Info{ID: it.SandboxID, Backend: Name, Tier: model.TierMicroVM, Labels: it.Metadata,
		Created: it.StartedAt, Expires: it.EndAt, Running: it.State == "running",
		DiskCapStrategy: fmt.Sprintf("fixed by the E2B template %q", it.TemplateID),
		PidsCapStrategy: fmt.Sprintf("fixed by the E2B template %q", it.TemplateID)}
}

// Reap kills sandboxio's E2B sandboxes whose lifetime (the expires label)
// has passed. E2B itself ends a sandbox at its timeout; this catches one
// whose timeout was raised past the lifetime the spec gave it.
func (b *backend) Reap(ctx context.Context, opts backends.ReapOptions) ([]backends.Reaped, error) {
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	labels := maps.Clone(opts.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[model.LabelManaged] = "true"
	items, err := b.api.list(ctx, labels)
	if err != nil {
		return nil, err
	}
	var out []backends.Reaped
	var first error
	for _, it := range items {
		t, err := time.Parse(time.RFC3339, it.Metadata[labelExpires])
		if err != nil || !now.After(t) {
			continue
		}
		if !opts.DryRun {
			if err := b.api.kill(ctx, it.SandboxID); err != nil {
				first = cmpOr(first, err)
				continue
			}
		}
		out = append(out, backends.Reaped{Info: infoOf(it), Reason: "expired"})
	}
	return out, first
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
