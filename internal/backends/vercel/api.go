package vercel

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/vendorapi"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// The wire shapes are those of @vercel/sandbox 3.5.0's api-client
// (dist/api-client/api-client.js, validators.js); only the fields the
// adapter sends or reads are declared.

// createReq is the body of POST /v2/sandboxes.
type createReq struct {
	ProjectID     string            `json:"projectId"`
	Runtime       string            `json:"runtime"`
	Name          string            `json:"name"`
	Persistent    bool              `json:"persistent"`
	Timeout       int64             `json:"timeout"` // ms: the session ends then
	Resources     resources         `json:"resources"`
	NetworkPolicy any               `json:"networkPolicy"`
	Env           map[string]string `json:"env,omitempty"`
	Tags          map[string]string `json:"tags,omitempty"`
	Region        string            `json:"region,omitempty"`
}

type resources struct {
	VCPUs int `json:"vcpus"`
}

// modePolicy is networkPolicy {"mode": "deny-all"} or "allow-all".
type modePolicy struct {
	Mode string `json:"mode"`
}

// listPolicy is the allow-list form: domains in allow, addresses in
// subnets.allow; everything else is denied.
type listPolicy struct {
	Allow   []string `json:"allow,omitempty"`
	Subnets *subnets `json:"subnets,omitempty"`
}

type subnets struct {
	Allow []string `json:"allow,omitempty"`
}

type sandboxJSON struct {
	Name             string            `json:"name"`
	Status           string            `json:"status"`
	CurrentSessionID string            `json:"currentSessionId"`
	CreatedAt        int64             `json:"createdAt"`
	ExpiresAt        int64             `json:"expiresAt"`
	Timeout          int64             `json:"timeout"`
	VCPUs            int               `json:"vcpus"`
	Memory           int               `json:"memory"`
	Runtime          string            `json:"runtime"`
	Tags             map[string]string `json:"tags"`
}

type sessionJSON struct {
	ID        string `json:"id"`
	Status    string `json:"status"`
	Timeout   int64  `json:"timeout"`
	StartedAt int64  `json:"startedAt"`
	CreatedAt int64  `json:"createdAt"`
}

// withSession is SandboxAndSessionResponse (create, get).
type withSession struct {
	Sandbox sandboxJSON `json:"sandbox"`
	Session sessionJSON `json:"session"`
}

type listResp struct {
	Sandboxes  []sandboxJSON `json:"sandboxes"`
	Pagination struct {
		Next *string `json:"next"`
	} `json:"pagination"`
}

type commandJSON struct {
	ID       string `json:"id"`
	ExitCode *int   `json:"exitCode"`
}

// streamLine is one line of a command's NDJSON stream: the command (first
// and last), a log line, or an error.
type streamLine struct {
	Command *commandJSON    `json:"command"`
	Stream  string          `json:"stream"`
	Data    json.RawMessage `json:"data"`
}

// active says a sandbox's session runs (or is about to).
func active(status string) bool { return status == "running" || status == "pending" }

// query adds the team to a request's query, as the SDK does on every call.
func (b *backend) query(kv ...string) url.Values {
	q := url.Values{"teamId": {b.team}}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	return q
}

// list returns the project's sandboxio sandboxes carrying every label. The
// API filters by one tag only; the rest is filtered here.
func (b *backend) list(ctx context.Context, labels map[string]string) ([]sandboxJSON, error) {
	tagKey := filterTag(labels)
	var out []sandboxJSON
	cursor := ""
	for page := 0; page < 1000; page++ {
		q := b.query("project", b.project, "namePrefix", namePrefix, "limit", "100", "cursor", cursor)
		if tagKey != "" {
			q.Set("tags", tagKey+":"+labels[tagKey])
		}
		var resp listResp
		if _, err := b.api.Do(ctx, vendorapi.Request{Op: "list sandboxes", Method: http.MethodGet, Path: "/v2/sandboxes", Query: q}, &resp); err != nil {
			return nil, err
		}
		for _, s := range resp.Sandboxes {
			if hasAll(s.Tags, labels) && strings.HasPrefix(s.Name, namePrefix) {
				out = append(out, s)
			}
		}
		if resp.Pagination.Next == nil || *resp.Pagination.Next == "" {
			return out, nil
		}
		cursor = *resp.Pagination.Next
	}
	return out, nil
}

// filterTag picks the label the API filters by: the most selective one
// sandboxio sets (session, then tenant), else the first key.
func filterTag(labels map[string]string) string {
	for _, k := range []string{model.LabelSessionID, model.LabelTenantID} {
		if _, ok := labels[k]; ok {
			return k
		}
	}
	keys := slices.Sorted(maps.Keys(labels))
	if len(keys) == 0 {
		return ""
	}
	return keys[0]
}

func hasAll(tags, labels map[string]string) bool {
	for k, v := range labels {
		if got, ok := tags[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// get returns a sandbox by name; found is false on 404.
func (b *backend) get(ctx context.Context, name string) (*withSession, bool, error) {
	var resp withSession
	_, err := b.api.Do(ctx, vendorapi.Request{Op: "get sandbox", Method: http.MethodGet, Path: "/v2/sandboxes/" + url.PathEscape(name),
		Query: b.query("projectId", b.project)}, &resp)
	if vendorapi.StatusOf(err) == http.StatusNotFound {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return &resp, true, nil
}

// remove stops a sandbox's session and deletes the sandbox; either already
// done (404, 410) is success. The stop comes first so that no command of
// it keeps running whatever the delete does.
func (b *backend) remove(ctx context.Context, name, sessionID string) error {
	if sessionID != "" {
		_, err := b.api.Do(ctx, vendorapi.Request{Op: "stop sandbox", Method: http.MethodPost,
			Path: "/v2/sandboxes/sessions/" + url.PathEscape(sessionID) + "/stop", Query: b.query(), Idempotent: true}, nil)
		if err != nil && !goneStatus(err) {
			return err
		}
	}
	_, err := b.api.Do(ctx, vendorapi.Request{Op: "delete sandbox", Method: http.MethodDelete, Path: "/v2/sandboxes/" + url.PathEscape(name),
		Query: b.query("projectId", b.project)}, nil)
	if err != nil && !goneStatus(err) {
		return err
	}
	return nil
}

// goneStatus: the sandbox or session is already gone (404, 410). The
// client turns a 404 on a sandbox path into SandboxGone.
func goneStatus(err error) bool {
	s := vendorapi.StatusOf(err)
	return s == http.StatusNotFound || s == http.StatusGone || errors.Is(err, model.ErrSandboxGone)
}

// oidcClaims reads the team and project of a Vercel OIDC token (a JWT)
// without verifying it, as the SDK does, to check them against the DSN.
func oidcClaims(token string) (team, project string, ok bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", "", false
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return "", "", false
	}
	var c struct {
		OwnerID   string `json:"owner_id"`
		ProjectID string `json:"project_id"`
	}
	if json.Unmarshal(raw, &c) != nil || c.OwnerID == "" {
		return "", "", false
	}
	return c.OwnerID, c.ProjectID, true
}

// statusError is a non-2xx answer of the command stream (which the
// vendorapi client, reading whole bodies, does not serve).
func (b *backend) statusError(op string, resp *http.Response, body []byte) error {
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	msg := e.Error.Message
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	return &vendorapi.StatusError{Vendor: "Vercel", Op: op, Method: resp.Request.Method, Path: resp.Request.URL.Path,
		Status: resp.StatusCode, Message: strings.ReplaceAll(msg, b.api.Credential.Reveal(), vendorapi.Redacted)}
}

func typedStatus(err error) error {
	switch vendorapi.StatusOf(err) {
	case http.StatusUnauthorized, http.StatusForbidden:
		return &model.Error{Class: model.ErrConfiguration, Attribute: "credentials", Err: err,
			Message: "Vercel refused the token", Fix: "set " + EnvOIDCToken + " (or " + EnvToken + ") to a token of the DSN's team and project"}
	}
	return fmt.Errorf("vercel: %w", err)
}
