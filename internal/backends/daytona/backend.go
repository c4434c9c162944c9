package daytona

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
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

// The environment variables the backend reads; only the key is a secret.
const (
	EnvAPIKey = "DAYTONA_API_KEY"
	EnvAPIURL = "DAYTONA_API_URL"
)

// DefaultAPIURL is Daytona's cloud API.
const DefaultAPIURL = "https://app.daytona.io/api"

// labelCreate is a nonce per create: after a create whose outcome is unknown
// (a 5xx, a dropped connection) the sandbox is looked up by it, so a retry
// never makes two.
const labelCreate = model.ReservedLabelPrefix + "create_id"

// labelExpires is when the sandbox's lifetime ends (RFC 3339): Daytona's own
// limit is an idle one, so `sandboxio reap` deletes a sandbox past it.
const labelExpires = model.ReservedLabelPrefix + "expires"

type backend struct {
	api    *vendorapi.Client
	target string
}

// New opens the Daytona backend: the API from the DSN's api_url option,
// else DAYTONA_API_URL, else Daytona's cloud; the key from DAYTONA_API_KEY;
// the region from the DSN's target option. No call is made.
func New(dsn backends.DSN) (backends.Backend, error) {
	key := os.Getenv(EnvAPIKey)
	if key == "" {
		return nil, &model.Error{Class: model.ErrConfiguration, Attribute: "backend", Err: backends.ErrNoCredentials,
			Message: "no Daytona API key: " + EnvAPIKey + " is not set", Fix: "export " + EnvAPIKey + " with a key of your Daytona organization (never put it in the DSN)"}
	}
	base := dsn.Options["api_url"]
	if base == "" {
		base = os.Getenv(EnvAPIURL)
	}
	if base == "" {
		base = DefaultAPIURL
	}
	u, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, &model.Error{Class: model.ErrConfiguration, Attribute: "backend",
			Message: "the Daytona API URL is not an http(s) URL", Fix: "set " + EnvAPIURL + " (or the DSN's api_url) to the API's base URL, such as " + DefaultAPIURL}
	}
	return &backend{api: newClient(u, vendorapi.NewCredential(key)), target: dsn.Options["target"]}, nil
}

func newClient(u *url.URL, cred vendorapi.Credential) *vendorapi.Client {
	// No client-wide timeout: a command lasts as long as it runs; every
	// call is bounded by its context.
	return &vendorapi.Client{BaseURL: u, HTTP: &http.Client{Transport: http.DefaultTransport}, Vendor: "Daytona",
		AuthHeader: "Authorization", AuthPrefix: "Bearer ", Credential: cred, CredentialEnv: EnvAPIKey, UserAgent: "sandboxio"}
}

func (b *backend) Name() string { return Name }

func (b *backend) Capabilities(string) (backends.Capabilities, bool) { return backends.Lookup(Name) }

func (b *backend) Close() error { return nil }

// sandboxDTO is the part of the Sandbox schema the adapter reads.
type sandboxDTO struct {
	ID              string            `json:"id"`
	State           string            `json:"state"`
	Labels          map[string]string `json:"labels"`
	ToolboxProxyURL string            `json:"toolboxProxyUrl"`
	CreatedAt       time.Time         `json:"createdAt"`
	ErrorReason     string            `json:"errorReason"`
}

// createBody is the CreateSandbox request the adapter sends. The image
// goes as a declarative build (buildInfo "FROM <image>", as the SDK sends
// create({image})): Daytona refuses cpu, memory and disk with a snapshot,
// whose sandboxes it sizes itself (v0.190.0 sandbox.controller.ts).
type createBody struct {
	BuildInfo          buildInfo         `json:"buildInfo"`
	Env                map[string]string `json:"env"`
	Labels             map[string]string `json:"labels"`
	NetworkBlockAll    bool              `json:"networkBlockAll"`
	Target             string            `json:"target,omitempty"`
	CPU                int64             `json:"cpu"`
	Memory             int64             `json:"memory"`
	Disk               int64             `json:"disk"`
	AutoStopInterval   int64             `json:"autoStopInterval"`
	AutoDeleteInterval int64             `json:"autoDeleteInterval"`
}

type buildInfo struct {
	DockerfileContent string `json:"dockerfileContent"`
}

// imageRef is what the adapter puts after FROM: an image reference in one
// token, so no image can add a line to the Dockerfile Daytona builds.
var imageRef = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,254}$`)

// gib is a cap in MB as Daytona's whole GB (GiB), rounded up: the policy
// (SBX-RES-008) lets only whole GiB and the default memory through.
func gib(mb int64) int64 { return max((mb+1023)/1024, 1) }

// body maps a spec to a create: labels as labels, deny as networkBlockAll
// (open egress, warned at plan, as networkBlockAll false),
// the lifetime as the idle auto-stop (whole minutes, rounded up) with
// deletion on stop.
func (b *backend) body(s model.Spec, secrets map[string]string, nonce string) (createBody, error) {
	// Defence in depth: the policy refuses these (an allow list, an egress
	// mode other than deny or open, caps finer than a core or a GiB);
	// finding one here is a gap.
	switch {
	case len(s.Network.Allow) > 0:
		return createBody{}, backends.Backstop(Name, rules.NetAllowList, "network.allow", fmt.Sprintf("%d allow-list entries", len(s.Network.Allow)))
	case s.Network.Egress != model.EgressDeny && s.Network.Egress != model.EgressAllow:
		return createBody{}, backends.Backstop(Name, rules.NetEgressMode, "network.egress", "egress "+s.Network.Egress)
	}
	if c := s.Resources; c.CPU != float64(int64(c.CPU)) || (c.MemoryMB%1024 != 0 && c.MemoryMB != model.DefaultCaps().MemoryMB) || c.DiskMB%1024 != 0 {
		return createBody{}, backends.Backstop(Name, rules.ResUnit, "resources",
			fmt.Sprintf("cpu %g, memory_mb %d, disk_mb %d", c.CPU, c.MemoryMB, c.DiskMB))
	}
	if !imageRef.MatchString(s.Image) {
		return createBody{}, &model.Error{Class: model.ErrConfiguration, Attribute: "image",
			Message: fmt.Sprintf("%q is not an image reference Daytona can build from", s.Image),
			Fix:     "set image to an OCI image reference such as python:3.12-slim or registry.example.com/team/app@sha256:..."}
	}
	labels := maps.Clone(s.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[labelCreate] = nonce
	env := maps.Clone(s.Env)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, secrets) // Daytona has no secret store
	return createBody{BuildInfo: buildInfo{DockerfileContent: "FROM " + s.Image + "\n"}, Env: env, Labels: labels, NetworkBlockAll: s.Network.Egress == model.EgressDeny, Target: b.target,
		CPU: max(int64(s.Resources.CPU), 1), Memory: gib(s.Resources.MemoryMB), Disk: gib(s.Resources.DiskMB),
		AutoStopInterval: max((s.LifetimeSeconds+59)/60, 1), AutoDeleteInterval: 0}, nil
}

func nonce() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Create opens a sandbox: one POST /sandbox, never repeated blindly; after
// an answer that leaves the outcome unknown the sandbox is looked up by its
// create nonce.
func (b *backend) Create(ctx context.Context, req backends.CreateRequest) (backends.Sandbox, error) {
	s := req.Spec
	if err := backends.NoBroker(Name, s); err != nil {
		return nil, err
	}
	call, life, err := model.Durations(s.TimeoutSeconds, s.LifetimeSeconds)
	if err != nil {
		return nil, backends.BackstopOf(Name, err)
	}
	if err := s.Resources.CheckBounds(backends.CapBounds()); err != nil {
		return nil, backends.BackstopOf(Name, err)
	}
	secrets := make(map[string]string, len(s.SecretNames))
	for _, name := range s.SecretNames {
		v, ok := req.Secrets[name]
		if !ok {
			return nil, &model.Error{Class: model.ErrConfiguration, Rule: rules.SecretValues, Attribute: "secret_names",
				Message: fmt.Sprintf("no value was supplied for secret %q", name),
				Fix:     "pass the secret's value at run time (from the environment of the caller)"}
		}
		secrets[name] = v
	}
	id := nonce()
	body, err := b.body(s, secrets, id)
	if err != nil {
		return nil, err
	}
	body.Labels[model.LabelManaged] = "true" // what reap sweeps
	body.Labels[labelExpires] = time.Now().Add(life).UTC().Format(time.RFC3339)
	cctx, cancel := context.WithTimeout(ctx, model.EffectiveTimeout(req.Timeout, call))
	defer cancel()
	var dto sandboxDTO
	_, err = b.api.Do(cctx, vendorapi.Request{Op: "create sandbox", Method: http.MethodPost, Path: "/sandbox", JSON: body}, &dto)
	if err != nil {
		found, ok := b.recover(cctx, id, err)
		if !ok {
			return nil, createErr(cctx, err)
		}
		dto = found
	}
	sb := newSandbox(b, dto, s, life, req.OnWarning, req.Secrets)
	if err := sb.waitStarted(cctx, dto); err != nil {
		_ = sb.Close(context.WithoutCancel(ctx))
		return nil, createErr(cctx, err)
	}
	return sb, nil
}

// recover looks a create of unknown outcome up by its nonce.
func (b *backend) recover(ctx context.Context, id string, err error) (sandboxDTO, bool) {
	var se *vendorapi.StatusError
	if errors.As(err, &se) && se.Status < 500 {
		return sandboxDTO{}, false // refused: nothing was created
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	found, lerr := b.list(lctx, map[string]string{labelCreate: id})
	if lerr != nil || len(found) != 1 {
		return sandboxDTO{}, false
	}
	return found[0], true
}

func createErr(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded) {
		return &model.Error{Class: model.ErrCreateTimeout, Message: "Daytona did not start the sandbox in time", Fix: "retry, or raise the create timeout", Err: err}
	}
	return fmt.Errorf("sandbox create: %w", err)
}

func (b *backend) list(ctx context.Context, labels map[string]string) ([]sandboxDTO, error) {
	q := url.Values{}
	if len(labels) > 0 {
		l, _ := json.Marshal(labels)
		q.Set("labels", string(l))
	}
	var out []sandboxDTO
	for range 100 {
		var page struct {
			Items      []sandboxDTO `json:"items"`
			NextCursor *string      `json:"nextCursor"`
		}
		if _, err := b.api.Do(ctx, vendorapi.Request{Op: "list sandboxes", Method: http.MethodGet, Path: "/sandbox", Query: q}, &page); err != nil {
			return nil, fmt.Errorf("sandbox list: %w", err)
		}
		out = append(out, page.Items...)
		if page.NextCursor == nil || *page.NextCursor == "" {
			return out, nil
		}
		q.Set("cursor", *page.NextCursor)
	}
	return out, nil
}

// List returns the sandboxes carrying every one of the labels.
func (b *backend) List(ctx context.Context, labels map[string]string) ([]backends.Info, error) {
	found, err := b.list(ctx, labels)
	if err != nil {
		return nil, err
	}
	infos := make([]backends.Info, 0, len(found))
	for _, d := range found {
		infos = append(infos, infoOf(d))
	}
	return infos, nil
}

func infoOf(d sandboxDTO) backends.Info {
	exp, _ := time.Parse(time.RFC3339, d.Labels[labelExpires])
	return backends.Info{ID: d.ID, Backend: Name, Tier: model.TierUnknown, Labels: d.Labels, Created: d.CreatedAt, Expires: exp,
		Running: d.State == "started" || d.State == "starting" || d.State == "creating" || d.State == "pending_build"}
}

// Reap deletes sandboxio's Daytona sandboxes whose lifetime (the expires
// label) has passed: the ones Daytona's idle limit kept because they were
// busy, and whose caller is gone.
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
	found, err := b.list(ctx, labels)
	if err != nil {
		return nil, err
	}
	var out []backends.Reaped
	var first error
	for _, d := range found {
		info := infoOf(d)
		if info.Expires.IsZero() || !now.After(info.Expires) {
			continue
		}
		if !opts.DryRun {
			_, err := b.api.Do(ctx, vendorapi.Request{Op: "delete sandbox", Method: http.MethodDelete, Path: "/sandbox/" + url.PathEscape(d.ID), Sandbox: true}, nil)
			var me *model.Error
			if err != nil && (!errors.As(err, &me) || me.Class != model.ErrSandboxGone) {
				first = cmp.Or(first, fmt.Errorf("sandbox reap: %w", err))
				continue
			}
		}
		out = append(out, backends.Reaped{Info: info, Reason: "expired"})
	}
	return out, first
}
