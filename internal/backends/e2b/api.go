package e2b

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/vendorapi"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// The control-plane calls follow E2B's OpenAPI spec (see doc.go for the
// pinned version). Create goes to POST /v2/sandboxes, as the official SDK
// 2.51.0 sends it, so that the call is one the referee exercises. Transport,
// auth header, retries of idempotent calls (Retry-After honoured) and the
// typing of statuses are vendorapi's; the create's retry after a lookup is
// this package's (backend.create).

type newSandbox struct {
	TemplateID          string            `json:"templateID"`
	Timeout             int64             `json:"timeout"`
	AllowInternetAccess *bool             `json:"allow_internet_access,omitempty"`
	Network             *networkConfig    `json:"network,omitempty"`
	Metadata            map[string]string `json:"metadata,omitempty"`
	EnvVars             map[string]string `json:"envVars,omitempty"`
}

type networkConfig struct {
	AllowOut []string `json:"allowOut,omitempty"`
	DenyOut  []string `json:"denyOut,omitempty"`
}

type sandboxResp struct {
	TemplateID      string  `json:"templateID"`
	SandboxID       string  `json:"sandboxID"`
	EnvdVersion     string  `json:"envdVersion"`
	EnvdAccessToken string  `json:"envdAccessToken"`
	Domain          *string `json:"domain"`
}

type listedSandbox struct {
	TemplateID string            `json:"templateID"`
	SandboxID  string            `json:"sandboxID"`
	StartedAt  time.Time         `json:"startedAt"`
	EndAt      time.Time         `json:"endAt"`
	Metadata   map[string]string `json:"metadata"`
	State      string            `json:"state"`
}

// client calls the control plane.
type client struct {
	api *vendorapi.Client
}

func newClient(base *url.URL, key string, timeout time.Duration) *client {
	return &client{api: &vendorapi.Client{
		BaseURL: base, HTTP: &http.Client{Transport: http.DefaultTransport, Timeout: timeout},
		Vendor: "E2B", AuthHeader: "X-API-Key", Credential: vendorapi.NewCredential(key), CredentialEnv: EnvAPIKey,
		UserAgent: "sandboxio", Backoff: 200 * time.Millisecond,
	}}
}

// metadataQuery encodes a label filter as E2B documents it: a query string
// whose keys and values are each URL-encoded first (as the SDK sends it).
func metadataQuery(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	v := url.Values{}
	for _, k := range keys {
		v.Set(url.QueryEscape(k), url.QueryEscape(labels[k]))
	}
	return v.Encode()
}

// create posts one sandbox, never retried here (see backend.create).
func (c *client) create(ctx context.Context, body newSandbox) (*sandboxResp, error) {
	var resp sandboxResp
	if _, err := c.api.Do(ctx, vendorapi.Request{Op: "create sandbox", Method: http.MethodPost, Path: "/v2/sandboxes", JSON: body}, &resp); err != nil {
		return nil, err
	}
	if resp.SandboxID == "" || resp.EnvdAccessToken == "" {
		return nil, errors.New("e2b create: the answer has no sandbox ID or envd access token")
	}
	return &resp, nil
}

// list returns every running sandbox carrying all the labels, page by page.
func (c *client) list(ctx context.Context, labels map[string]string) ([]listedSandbox, error) {
	var out []listedSandbox
	token := ""
	for page := 0; page < 1000; page++ {
		q := url.Values{"metadata": {metadataQuery(labels)}, "state": {"running"}, "limit": {"100"}}
		if token != "" {
			q.Set("nextToken", token)
		}
		var items []listedSandbox
		resp, err := c.api.Do(ctx, vendorapi.Request{Op: "list sandboxes", Method: http.MethodGet, Path: "/v2/sandboxes", Query: q}, &items)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
		if token = resp.Header.Get("X-Next-Token"); token == "" {
			return out, nil
		}
	}
	return out, nil
}

// sandboxID is what an E2B sandbox ID may hold: it becomes a path segment.
var sandboxID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`)

// kill deletes a sandbox; one already gone (404) is success.
func (c *client) kill(ctx context.Context, id string) error {
	if !sandboxID.MatchString(id) {
		return fmt.Errorf("e2b kill: %q is not an E2B sandbox ID", id)
	}
	_, err := c.api.Do(ctx, vendorapi.Request{Op: "kill sandbox", Method: http.MethodDelete, Path: "/sandboxes/" + id, Sandbox: true}, nil)
	if errors.Is(err, model.ErrSandboxGone) {
		return nil
	}
	return err
}
