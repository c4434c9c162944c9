package e2b

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// The control-plane calls follow E2B's OpenAPI spec (see doc.go for the
// pinned version). Create goes to POST /v2/sandboxes, as the official SDK
// 2.51.0 sends it, so that the call is one the referee exercises.

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

// APIError is a non-2xx answer of the E2B API. It never holds a credential.
type APIError struct {
	Op         string
	Status     int
	Message    string
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	return fmt.Sprintf("e2b %s: HTTP %d %s: %s", e.Op, e.Status, http.StatusText(e.Status), e.Message)
}

// retryable says whether a status may be retried (on an idempotent call).
func retryable(status int) bool {
	return status == http.StatusTooManyRequests || status >= 500
}

// client calls the control plane.
type client struct {
	base    string // API base URL, no trailing slash
	key     secret
	http    *http.Client
	backoff time.Duration // first retry delay
	tries   int
}

// secret is a credential: it prints as [REDACTED] in every format.
type secret string

func (secret) String() string   { return "[REDACTED]" }
func (secret) GoString() string { return "[REDACTED]" }

// do sends one request and decodes a 2xx JSON answer into out. Idempotent
// requests are retried on 429, 5xx and transport errors, with backoff, and
// honouring Retry-After within ctx.
func (c *client) do(ctx context.Context, op, method, path string, body, out any, idempotent bool) (http.Header, error) {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return nil, fmt.Errorf("e2b %s: %w", op, err)
		}
	}
	tries := 1
	if idempotent {
		tries = c.tries
	}
	var last error
	for attempt := 0; attempt < tries; attempt++ {
		if attempt > 0 {
			wait := c.backoff << (attempt - 1)
			wait += time.Duration(rand.Int64N(int64(wait)/2 + 1))
			var ae *APIError
			if errors.As(last, &ae) && ae.RetryAfter > 0 {
				wait = ae.RetryAfter
			}
			if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
				return nil, last // the wait would outlast the call's bound
			}
			select {
			case <-ctx.Done():
				return nil, last
			case <-time.After(wait):
			}
		}
		h, err := c.once(ctx, op, method, path, payload, out)
		if err == nil {
			return h, nil
		}
		last = err
		var ae *APIError
		if errors.As(err, &ae) && !retryable(ae.Status) || ctx.Err() != nil {
			return nil, err
		}
	}
	return nil, last
}

func (c *client) once(ctx context.Context, op, method, path string, payload []byte, out any) (http.Header, error) {
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("e2b %s: %w", op, err)
	}
	req.Header.Set("X-API-Key", string(c.key))
	req.Header.Set("User-Agent", "sandboxio")
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("e2b %s: %w", op, scrub(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, fmt.Errorf("e2b %s: reading the answer: %w", op, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, apiErr(op, resp, data)
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return nil, fmt.Errorf("e2b %s: the answer is not the API's JSON: %w", op, err)
		}
	}
	return resp.Header, nil
}

func apiErr(op string, resp *http.Response, data []byte) *APIError {
	var body struct {
		Message string `json:"message"`
	}
	_ = json.Unmarshal(data, &body)
	msg := body.Message
	if msg == "" {
		msg = strings.TrimSpace(string(data))
	}
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	e := &APIError{Op: op, Status: resp.StatusCode, Message: msg}
	if s, err := strconv.Atoi(strings.TrimSpace(resp.Header.Get("Retry-After"))); err == nil && s >= 0 {
		e.RetryAfter = min(time.Duration(s)*time.Second, 5*time.Minute)
	} else if t, err := http.ParseTime(resp.Header.Get("Retry-After")); err == nil {
		e.RetryAfter = min(max(time.Until(t), 0), 5*time.Minute)
	}
	return e
}

// scrub drops the URL from a transport error: it never holds the key, but
// keeping errors to the cause keeps them short.
func scrub(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
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
		h, err := c.do(ctx, "list", http.MethodGet, "/v2/sandboxes?"+q.Encode(), nil, &items, true)
		if err != nil {
			return nil, classify(err, "")
		}
		out = append(out, items...)
		if token = h.Get("X-Next-Token"); token == "" {
			return out, nil
		}
	}
	return out, nil
}

// kill deletes a sandbox; one already gone (404) is success.
func (c *client) kill(ctx context.Context, id string) error {
	_, err := c.do(ctx, "kill", http.MethodDelete, "/sandboxes/"+url.PathEscape(id), nil, nil, true)
	var ae *APIError
	if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
		return nil
	}
	if err != nil {
		return classify(err, id)
	}
	return nil
}

// classify turns an API error into the error classes callers match on.
// id names the sandbox concerned, "" for none.
func classify(err error, id string) error {
	var ae *APIError
	if !errors.As(err, &ae) {
		return err
	}
	switch ae.Status {
	case http.StatusUnauthorized:
		return &model.Error{Class: model.ConfigurationError, Attribute: "backend", Err: err,
			Message: "E2B refused the API key (401)", Fix: "set E2B_API_KEY to a valid key of your E2B team"}
	case http.StatusForbidden:
		return &model.Error{Class: model.ConfigurationError, Attribute: "backend", Err: err,
			Message: "E2B forbids this call to the API key's team (403)", Fix: "use a key of the team that owns the template and sandboxes"}
	case http.StatusNotFound:
		if id != "" {
			return &model.Error{Class: model.SandboxGone, Err: err,
				Message: fmt.Sprintf("E2B sandbox %s is gone (killed, or past its lifetime)", id), Fix: "open a new sandbox; raise lifetime_seconds if it expired while in use"}
		}
	case http.StatusConflict:
		return fmt.Errorf("the E2B sandbox is not in a state that allows this call (409, conflict): %w", err)
	case http.StatusTooManyRequests:
		return fmt.Errorf("E2B rate-limited the call and retries did not get through (429): %w", err)
	}
	if ae.Status >= 500 {
		return fmt.Errorf("E2B failed to serve the call (HTTP %d, retried where safe): %w", ae.Status, err)
	}
	return err
}
