package modal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	modalsdk "github.com/modal-labs/libmodal/modal-go"
	pb "github.com/modal-labs/libmodal/modal-go/proto/modal_proto"
	"google.golang.org/grpc"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Credentials and the endpoint come from the environment only.
const (
	envTokenID     = "MODAL_TOKEN_ID"
	envTokenSecret = "MODAL_TOKEN_SECRET"
)

// Labels sandboxio adds as Modal tags besides the tenant's, so that reap
// can tell when a sandbox's lifetime has ended.
const tagExpires = model.ReservedLabelPrefix + "expires"

// backend provisions sandboxes in one Modal app (the DSN's target), in the
// environment the DSN names (else the profile's).
type backend struct {
	app, environment string

	mu     sync.Mutex
	client *modalsdk.Client
	appRef *modalsdk.App
	made   string // the fingerprint of the client's credentials and endpoint
}

// config is the credential and endpoint; String never shows the secret.
type config struct{ tokenID, tokenSecret string }

func (c config) String() string {
	return "modal credentials (from " + envTokenID + ", " + envTokenSecret + ")"
}

// GoString keeps %#v from printing the secret too.
func (c config) GoString() string { return c.String() }

// open makes no call. Without an app (a sweep of every backend by
// `sandboxio reap`) the backend lists and reaps across the environment's
// apps and creates nothing. With no token in the environment at all it
// says so (backends.ErrNoCredentials), and a sweep passes over it.
func open(dsn backends.DSN) (backends.Backend, error) {
	if os.Getenv(envTokenID) == "" && os.Getenv(envTokenSecret) == "" {
		_, err := credentials()
		return nil, err
	}
	return &backend{app: dsn.App, environment: dsn.Options["environment"]}, nil
}

var errNoApp = &model.Error{Class: model.ErrConfiguration, Attribute: "backend", Message: "the Modal DSN names no app", Fix: "write modal://APP"}

func credentials() (config, error) {
	c := config{tokenID: os.Getenv(envTokenID), tokenSecret: os.Getenv(envTokenSecret)}
	if c.tokenID == "" || c.tokenSecret == "" {
		return c, &model.Error{Class: model.ErrConfiguration, Attribute: "backend", Err: backends.ErrNoCredentials,
			Message: "no Modal credentials: " + envTokenID + " and " + envTokenSecret + " must both be set",
			Fix:     "export " + envTokenID + " and " + envTokenSecret + " (a least-privilege, short-lived token of the workspace); MODAL_SERVER_URL selects another endpoint"}
	}
	return c, nil
}

// fingerprint identifies the credentials and endpoint a client was made
// with, without holding the secret.
func (c config) fingerprint() string {
	sum := sha256.Sum256([]byte(c.tokenID + "\x00" + c.tokenSecret + "\x00" + os.Getenv("MODAL_SERVER_URL")))
	return hex.EncodeToString(sum[:])
}

func (b *backend) Name() string { return Name }

func (b *backend) Capabilities(runtime string) (backends.Capabilities, bool) {
	return backends.Lookup(Name)
}

// connect returns the SDK client, made on first use: making it fetches an
// auth token, a network call that Open must not make. A client is made
// again when the credentials or the endpoint in the environment changed. The
// app is nil on a backend opened without one (a sweep).
func (b *backend) connect(ctx context.Context) (*modalsdk.Client, *modalsdk.App, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	cfg, err := credentials()
	if err != nil {
		return nil, nil, err
	}
	if b.client != nil && b.made != cfg.fingerprint() {
		b.client.Close()
		b.client, b.appRef = nil, nil
	}
	if b.client == nil {
		c, err := modalsdk.NewClientWithOptions(&modalsdk.ClientParams{TokenID: cfg.tokenID, TokenSecret: cfg.tokenSecret,
			Environment: b.environment, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			GRPCUnaryInterceptors: []grpc.UnaryClientInterceptor{createInterceptor, rateLimitInterceptor}})
		if err != nil {
			return nil, nil, classify("connect", err)
		}
		b.client, b.made = c, cfg.fingerprint()
	}
	if b.appRef == nil && b.app != "" {
		app, err := b.client.Apps.FromName(ctx, b.app, nil)
		if err != nil {
			return nil, nil, classify("app "+b.app, err)
		}
		b.appRef = app
	}
	return b.client, b.appRef, nil
}

func (b *backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.client != nil {
		b.client.Close()
		b.client = nil
	}
	return nil
}

// plan is a create request checked without any call.
type plan struct {
	spec          model.Spec
	createTimeout time.Duration
	callTimeout   time.Duration
	lifetime      time.Duration
	network       *pb.NetworkAccess
	labels        map[string]string
	name          string
	region        string
	secrets       map[string]string
	onWarning     func(model.Warning)
	// volume is the tenant's own volume: its Modal name and mount path.
	volume *model.Volume
}

func newPlan(req backends.CreateRequest) (plan, error) {
	s := req.Spec
	p := plan{spec: s, onWarning: req.OnWarning, secrets: map[string]string{}}
	dsn, err := backends.ParseDSN(s.Backend)
	if err != nil {
		return p, err
	}
	if dsn.Scheme != Name {
		return p, &model.Error{Class: model.ErrConfiguration, Attribute: "backend", Message: "the spec is not for the Modal backend", Fix: "open it with its own backend"}
	}
	p.region = dsn.Options["region"]
	if err := backends.NoBroker(Name, s); err != nil {
		return p, err
	}
	if err := s.Resources.CheckBounds(model.CapBounds()); err != nil {
		return p, backends.BackstopOf(Name, err)
	}
	if p.callTimeout, p.lifetime, err = model.Durations(s.TimeoutSeconds, s.LifetimeSeconds); err != nil {
		return p, backends.BackstopOf(Name, err)
	}
	caps, _ := backends.Lookup(Name)
	if caps.MaxLifetimeSeconds > 0 && s.LifetimeSeconds > caps.MaxLifetimeSeconds {
		return p, backends.Backstop(Name, rules.TmoAboveMax, "lifetime_seconds", fmt.Sprintf("lifetime %d s, Modal's maximum is %d s", s.LifetimeSeconds, caps.MaxLifetimeSeconds))
	}
	def := model.DefaultCaps()
	if s.Resources.DiskMB != def.DiskMB || s.Resources.Pids != def.Pids {
		return p, backends.Backstop(Name, rules.ResNotSettable, "resources", "disk_mb or pids other than the default")
	}
	if p.network, err = networkAccess(s.Network); err != nil {
		return p, err
	}
	p.createTimeout = req.Timeout
	if p.createTimeout <= 0 {
		p.createTimeout = p.callTimeout
	}
	for _, n := range s.SecretNames {
		v, ok := req.Secrets[n]
		if !ok {
			return p, &model.Error{Class: model.ErrConfiguration, Rule: rules.SecretValues, Attribute: "secret_names",
				Message: fmt.Sprintf("no value was supplied for secret %q", n), Fix: "pass the secret's value at run time (from the environment of the caller)"}
		}
		p.secrets[n] = v
	}
	if p.volume, err = tenantVolume(s); err != nil {
		return p, err
	}
	p.labels = map[string]string{model.LabelManaged: "true"}
	if s.TenantID != "" {
		p.labels[model.LabelTenantID] = s.TenantID
		// The name makes the tenant's session one sandbox in the app:
		// Modal refuses a second running sandbox of the same name.
		sum := sha256.Sum256([]byte(s.TenantID + "\x00" + s.SessionID))
		p.name = "sbx-" + hex.EncodeToString(sum[:16])
	}
	if s.SessionID != "" {
		p.labels[model.LabelSessionID] = s.SessionID
	}
	if s.Name != "" {
		p.labels[model.LabelTemplate] = s.Name
	}
	for k, v := range s.Labels {
		// A per-tenant spec carries the reserved labels it was rendered
		// with; they must be the ones set here.
		if strings.HasPrefix(k, model.ReservedLabelPrefix) {
			if own, ok := p.labels[k]; !ok || own != v || k == model.LabelManaged {
				return p, backends.Backstop(Name, rules.LblReserved, "labels", fmt.Sprintf("label %q", k))
			}
		}
		p.labels[k] = v
	}
	return p, nil
}

// tenantVolume names the tenant's own volume: the template's volume name
// and a digest of the tenant id, so that each tenant mounts a volume of its
// own and no tenant id can name another's. Modal mounts whole volumes (its
// mount has no sub-path), so scoping is by volume.
func tenantVolume(s model.Spec) (*model.Volume, error) {
	if s.Volume == nil {
		return nil, nil
	}
	if s.TenantID == "" {
		return nil, &model.Error{Class: model.ErrConfiguration, Attribute: "volume",
			Message: "the template names a volume, and a volume is mounted per tenant: this sandbox is opened for no tenant",
			Fix:     "open it for a tenant (data.sandboxio_tenant_sandbox, or sandboxio run with a tenant and session)"}
	}
	return &model.Volume{Name: TenantVolumeName(s.Volume.Name, s.TenantID), MountPath: s.Volume.MountPath}, nil
}

// TenantVolumeName is the Modal Volume a tenant's sandboxes mount for the
// template volume name: name-<96 bits of sha256 of the tenant id>.
func TenantVolumeName(name, tenantID string) string {
	sum := sha256.Sum256([]byte("sandboxio-volume\x00" + tenantID))
	return name + "-" + hex.EncodeToString(sum[:12])
}

// networkAccess maps the egress policy to Modal's control: deny is an allow
// list with no entries, an allow list is its CIDR blocks (an address is a
// /32 or /128), open egress is OPEN. A domain entry cannot be enforced
// there; the policy refuses it, and so does this backstop.
func networkAccess(n model.NetworkPolicy) (*pb.NetworkAccess, error) {
	n = n.Normalized()
	switch n.Egress {
	case model.EgressAllow:
		if len(n.Allow) > 0 {
			return nil, backends.Backstop(Name, rules.NetAllowWithOpen, "network.allow", "an allow list with open egress")
		}
		return pb.NetworkAccess_builder{NetworkAccessType: pb.NetworkAccess_OPEN, AllowedCidrs: []string{}}.Build(), nil
	case model.EgressDeny:
	default:
		return nil, backends.Backstop(Name, rules.NetEgressMode, "network.egress", "egress mode "+n.Egress)
	}
	cidrs := []string{}
	for _, e := range n.Allow {
		if p, err := netip.ParsePrefix(e); err == nil && p.Masked() == p {
			cidrs = append(cidrs, p.String())
			continue
		}
		if a, err := netip.ParseAddr(e); err == nil && a.Zone() == "" {
			cidrs = append(cidrs, netip.PrefixFrom(a, a.BitLen()).String())
			continue
		}
		return nil, backends.Backstop(Name, rules.NetAllowKind, "network.allow", "an allow-list entry that is no CIDR block or IP address")
	}
	return pb.NetworkAccess_builder{NetworkAccessType: pb.NetworkAccess_ALLOWLIST, AllowedCidrs: cidrs}.Build(), nil
}

// Create opens one sandbox. A session already holding a sandbox in the app
// is refused after listing by its tags; a create whose answer was lost is
// found by its name, never made a second time.
func (b *backend) Create(ctx context.Context, req backends.CreateRequest) (backends.Sandbox, error) {
	p, err := newPlan(req)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, p.createTimeout)
	defer cancel()
	sb, err := b.create(cctx, p)
	if err != nil && ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
		return nil, &model.Error{Class: model.ErrCreateTimeout,
			Message: fmt.Sprintf("the Modal sandbox was not ready within %s", p.createTimeout),
			Fix:     "raise timeout_seconds (or the create timeout); anything created is ended by its lifetime", Err: err}
	}
	return sb, err
}

func (b *backend) create(ctx context.Context, p plan) (*sandbox, error) {
	if b.app == "" {
		return nil, errNoApp
	}
	c, app, err := b.connect(ctx)
	if err != nil {
		return nil, err
	}
	if p.spec.TenantID != "" {
		held, err := b.list(ctx, c, app, map[string]string{model.LabelTenantID: p.spec.TenantID, model.LabelSessionID: p.spec.SessionID})
		if err != nil {
			return nil, err
		}
		if len(held) > 0 {
			return nil, oneSandbox(held[0].ID)
		}
	}
	params := &modalsdk.SandboxCreateParams{
		CPU: p.spec.Resources.CPU, CPULimit: p.spec.Resources.CPU,
		MemoryMiB: int(p.spec.Resources.MemoryMB), MemoryLimitMiB: int(p.spec.Resources.MemoryMB),
		Timeout: time.Duration(math.Ceil(p.lifetime.Seconds())) * time.Second,
		Env:     p.spec.Env, Name: p.name,
	}
	if p.region != "" {
		params.Regions = []string{p.region}
	}
	if p.volume != nil {
		vol, err := c.Volumes.FromName(ctx, p.volume.Name, &modalsdk.VolumeFromNameParams{Environment: b.environment, CreateIfMissing: true})
		if err != nil {
			return nil, classify("volume", err)
		}
		params.Volumes = map[string]*modalsdk.Volume{p.volume.MountPath: vol}
	}
	if len(p.secrets) > 0 {
		sec, err := c.Secrets.FromMap(ctx, p.secrets, nil)
		if err != nil {
			return nil, classify("secrets", err)
		}
		params.Secrets = []*modalsdk.Secret{sec}
	}
	created := time.Now()
	cv := &createValue{network: p.network}
	if p.name != "" {
		cv.lookup = func(ctx context.Context) (string, error) {
			found, err := c.Sandboxes.FromName(ctx, b.app, p.name, nil)
			if err != nil {
				return "", err
			}
			return found.SandboxID, nil
		}
	}
	nctx := context.WithValue(ctx, createKey{}, cv)
	msb, err := c.Sandboxes.Create(nctx, app, c.Images.FromRegistry(p.spec.Image, nil), params)
	if err != nil {
		var exists modalsdk.AlreadyExistsError
		switch {
		case errors.As(err, &exists):
			return nil, oneSandbox("")
		case p.name != "" && retryable(err):
			// The answer was lost; the create may have happened. Find it by
			// its name rather than create again.
			if found, ferr := c.Sandboxes.FromName(ctx, b.app, p.name, nil); ferr == nil {
				msb, err = found, nil
			}
		}
		if err != nil {
			return nil, classify("sandbox create", err)
		}
	}
	expires := created.Add(p.lifetime)
	tags := map[string]string{tagExpires: expires.UTC().Format(time.RFC3339)}
	for k, v := range p.labels {
		tags[k] = v
	}
	if err := msb.SetTags(ctx, tags); err != nil {
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), model.TeardownGrace)
		defer cancel()
		_, _ = msb.Terminate(kctx, nil)
		return nil, classify("sandbox tags", err)
	}
	return &sandbox{b: b, sb: msb, id: msb.SandboxID, labels: p.labels, created: created, expires: expires,
		callTimeout: p.callTimeout, secrets: p.secrets, onWarning: p.onWarning}, nil
}

func oneSandbox(id string) error {
	holder := ""
	if id != "" {
		holder = " (" + id + ")"
	}
	return &model.Error{Class: model.ErrConfiguration, Rule: rules.OneSandbox, Attribute: "session_id",
		Message: fmt.Sprintf("a sandbox is already open for this tenant and session in the Modal app%s: one sandbox per tenant and session", holder),
		Fix:     "use the open sandbox, or close it first, or open the new sandbox under another session id; `sandboxio reap` ends it once its lifetime has passed"}
}

// List finds the app's running sandboxes carrying every label.
func (b *backend) List(ctx context.Context, labels map[string]string) ([]backends.Info, error) {
	c, app, err := b.connect(ctx)
	if err != nil {
		return nil, err
	}
	return b.list(ctx, c, app, labels)
}

// list lists the app's sandboxes, or the environment's without an app.
func (b *backend) list(ctx context.Context, c *modalsdk.Client, app *modalsdk.App, labels map[string]string) ([]backends.Info, error) {
	appID := ""
	if app != nil {
		appID = app.AppID
	}
	it, err := c.Sandboxes.List(ctx, &modalsdk.SandboxListParams{AppID: appID, Tags: labels, Environment: b.environment})
	if err != nil {
		return nil, classify("sandbox list", err)
	}
	var out []backends.Info
	for sb, err := range it {
		if err != nil {
			return nil, classify("sandbox list", err)
		}
		tags, err := sb.GetTags(ctx)
		if err != nil {
			continue // ended between the list and now
		}
		info := backends.Info{ID: sb.SandboxID, Backend: Name, Tier: model.TierGVisor, Labels: map[string]string{}, Running: true}
		for k, v := range tags {
			if k == tagExpires {
				info.Expires, _ = time.Parse(time.RFC3339, v)
				continue
			}
			info.Labels[k] = v
		}
		out = append(out, info)
	}
	return out, nil
}

// Reap ends sandboxio's sandboxes in the app whose lifetime has passed (Modal
// ends them itself; this catches what it has not yet).
func (b *backend) Reap(ctx context.Context, opts backends.ReapOptions) ([]backends.Reaped, error) {
	labels := map[string]string{model.LabelManaged: "true"}
	for k, v := range opts.Labels {
		labels[k] = v
	}
	c, app, err := b.connect(ctx)
	if err != nil {
		return nil, err
	}
	infos, err := b.list(ctx, c, app, labels)
	if err != nil {
		return nil, err
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	var out []backends.Reaped
	for _, info := range infos {
		if info.Expires.IsZero() || info.Expires.After(now) {
			continue
		}
		if !opts.DryRun {
			sb, err := c.Sandboxes.FromID(ctx, info.ID)
			if err == nil {
				_, err = sb.Terminate(ctx, nil)
			}
			if err != nil && !isNotFound(err) {
				return out, classify("reap "+info.ID, err)
			}
		}
		out = append(out, backends.Reaped{Info: info, Reason: "expired"})
	}
	return out, nil
}

// liveCheck looks the app up: nothing is created.
func liveCheck(ctx context.Context, spec model.Spec) (backends.Preflight, error) {
	dsn, err := backends.ParseDSN(spec.Backend)
	if err != nil {
		return backends.Preflight{}, err
	}
	if dsn.App == "" {
		return backends.Preflight{}, errNoApp
	}
	be, err := open(dsn)
	if err != nil {
		return backends.Preflight{}, err
	}
	defer be.Close()
	if _, _, err := be.(*backend).connect(ctx); err != nil {
		return backends.Preflight{}, err
	}
	return backends.Preflight{Tier: model.TierGVisor, Image: spec.Image, DiskCapStrategy: diskNote, PidsCapStrategy: pidsNote}, nil
}
