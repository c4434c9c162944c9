package vendorapi

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
	"strconv"
	"strings"
	"time"
)

// Defaults of a Client.
const (
	DefaultMaxBody  = 16 << 20 // bytes of a response body
	maxErrorBody    = 64 << 10
	DefaultAttempts = 4
	DefaultBackoff  = 250 * time.Millisecond
	DefaultMaxWait  = 10 * time.Second
)

// Client calls one vendor's REST API.
type Client struct {
	// BaseURL is the API's root, e.g. https://api.e2b.app.
	BaseURL *url.URL
	// HTTP is the transport; nil means a client with a 60 s timeout.
	HTTP *http.Client
	// Vendor names the vendor in messages ("E2B").
	Vendor string
	// AuthHeader carries Credential, after AuthPrefix ("Bearer ").
	AuthHeader, AuthPrefix string
	Credential             Credential
	// CredentialEnv names the variable the key comes from, for fixes.
	CredentialEnv string
	UserAgent     string
	// MaxBody bounds a response body; 0 means DefaultMaxBody.
	MaxBody int64
	// Attempts bounds the requests of one idempotent call; 0 means
	// DefaultAttempts. Backoff is the first wait (doubled each retry, with
	// jitter), MaxWait the longest; 0 means the defaults.
	Attempts         int
	Backoff, MaxWait time.Duration

	// now and sleep are replaced by tests.
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error
}

// Request is one call.
type Request struct {
	Op     string // what is attempted, for messages ("create sandbox")
	Method string
	Path   string // joined to BaseURL's path
	Query  url.Values
	Header http.Header // extra headers (never printed)
	// JSON is marshalled as the body; Body, with ContentType, is sent as is.
	JSON        any
	Body        []byte
	ContentType string
	// Idempotent allows retries of a method that is not idempotent by
	// definition (a POST the vendor documents as safe to repeat).
	Idempotent bool
	// Sandbox says the path names one sandbox: 404 means SandboxGone.
	Sandbox bool
}

// Response is a 2xx answer.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

func (c *Client) vendor() string {
	if c.Vendor == "" {
		return "the vendor"
	}
	return c.Vendor
}

func (c *Client) idempotent(r Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete, http.MethodOptions:
		return true
	}
	return r.Idempotent
}

// Do sends the request, retrying an idempotent one, and decodes a 2xx JSON
// body into out when out is not nil.
func (c *Client) Do(ctx context.Context, r Request, out any) (*Response, error) {
	body, ctype := r.Body, r.ContentType
	if r.JSON != nil {
		b, err := json.Marshal(r.JSON)
		if err != nil {
			return nil, fmt.Errorf("%s %s: encode the request: %w", c.vendor(), r.Op, err)
		}
		body, ctype = b, "application/json"
	}
	attempts := 1
	if c.idempotent(r) {
		attempts = c.Attempts
		if attempts <= 0 {
			attempts = DefaultAttempts
		}
	}
	var last error
	for i := range attempts {
		resp, retryAfter, err := c.once(ctx, r, body, ctype, i+1)
		if err == nil {
			if out != nil && len(resp.Body) > 0 {
				if err := json.Unmarshal(resp.Body, out); err != nil {
					return resp, fmt.Errorf("%s %s: the answer is not the JSON expected: %s", c.vendor(), r.Op, c.scrub(err.Error()))
				}
			}
			return resp, nil
		}
		last = err
		if !retryable(err) || i == attempts-1 || ctx.Err() != nil {
			break
		}
		wait := max(c.backoff(i), retryAfter)
		if dl, ok := ctx.Deadline(); ok && c.clock().Add(wait).After(dl) {
			break // the wait would outlive the caller
		}
		if err := c.pause(ctx, wait); err != nil {
			break
		}
	}
	var se *StatusError
	if errors.As(last, &se) {
		return nil, c.typed(se, r.Sandbox)
	}
	return nil, last
}

// Transient reports whether err is a 429/5xx answer or a request that got
// no answer: what a retry may cure. An adapter that may not retry a call
// blindly (a create) uses it to decide when to look before it retries.
func Transient(err error) bool { return retryable(err) }

// retryable: a 429/5xx answer or a transport failure, not the caller's
// cancellation.
func retryable(err error) bool {
	var se *StatusError
	if errors.As(err, &se) {
		return Retryable(se.Status)
	}
	var te *transportError
	return errors.As(err, &te)
}

// transportError is a request that got no answer; its text has the method
// and path, never the URL's host credentials or a header.
type transportError struct {
	vendor, op, method, path string
	err                      error
}

func (e *transportError) Error() string {
	return fmt.Sprintf("%s %s: %s %s: no answer: %v", e.vendor, e.op, e.method, e.path, e.err)
}
func (e *transportError) Unwrap() error { return e.err }

// once sends one request.
func (c *Client) once(ctx context.Context, r Request, body []byte, ctype string, attempt int) (*Response, time.Duration, error) {
	u := c.url(r)
	req, err := http.NewRequestWithContext(ctx, r.Method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, 0, fmt.Errorf("%s %s: build the request for %s: %s", c.vendor(), r.Op, r.Path, c.scrub(err.Error()))
	}
	for k, vs := range r.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	req.Header.Set("Accept", "application/json")
	if c.UserAgent != "" {
		req.Header.Set("User-Agent", c.UserAgent)
	}
	if c.AuthHeader != "" && !c.Credential.Empty() {
		req.Header.Set(c.AuthHeader, c.AuthPrefix+c.Credential.Reveal())
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 60 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		// url.Error's text holds the whole URL; keep only its cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if ctx.Err() != nil {
			err = ctx.Err()
			return nil, 0, fmt.Errorf("%s %s: %s %s: %w", c.vendor(), r.Op, r.Method, r.Path, err)
		}
		return nil, 0, &transportError{c.vendor(), r.Op, r.Method, r.Path, errors.New(c.scrub(err.Error()))}
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		b, err := c.read(resp.Body, c.maxBody())
		if err != nil {
			return nil, 0, fmt.Errorf("%s %s: %s %s: %w", c.vendor(), r.Op, r.Method, r.Path, err)
		}
		return &Response{Status: resp.StatusCode, Header: resp.Header, Body: b}, 0, nil
	}
	b, _ := c.read(resp.Body, maxErrorBody) // a cut message still helps
	ra := parseRetryAfter(resp.Header.Get("Retry-After"), c.clock())
	return nil, ra, &StatusError{
		Vendor: c.vendor(), Op: r.Op, Method: r.Method, Path: r.Path, Status: resp.StatusCode,
		Message: vendorMessage(b, c.scrub), RequestID: c.scrub(requestID(resp.Header)), RetryAfter: ra, Attempts: attempt,
	}
}

func (c *Client) url(r Request) *url.URL {
	u := *c.BaseURL
	u.Path = strings.TrimSuffix(u.Path, "/") + "/" + strings.TrimPrefix(r.Path, "/")
	u.RawPath = ""
	if len(r.Query) > 0 {
		u.RawQuery = r.Query.Encode()
	}
	return &u
}

func (c *Client) maxBody() int64 {
	if c.MaxBody > 0 {
		return c.MaxBody
	}
	return DefaultMaxBody
}

// read reads at most limit bytes; a longer body is an error.
func (c *Client) read(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return b, fmt.Errorf("reading the answer: %s", c.scrub(err.Error()))
	}
	if int64(len(b)) > limit {
		return b[:limit], fmt.Errorf("the answer is larger than %d bytes", limit)
	}
	return b, nil
}

func requestID(h http.Header) string {
	for _, k := range []string{"X-Request-Id", "X-Amzn-Requestid", "Cf-Ray"} {
		if v := h.Get(k); v != "" {
			if len(v) > 128 {
				v = v[:128]
			}
			return v
		}
	}
	return ""
}

// scrub removes the credential from a text.
func (c *Client) scrub(s string) string {
	if v := c.Credential.Reveal(); len(v) >= 4 {
		s = strings.ReplaceAll(s, v, Redacted)
	}
	return s
}

// backoff is the wait before retry i+1: Backoff·2^i, at most MaxWait, with
// jitter over its upper half.
func (c *Client) backoff(i int) time.Duration {
	base, ceiling := c.Backoff, c.MaxWait
	if base <= 0 {
		base = DefaultBackoff
	}
	if ceiling <= 0 {
		ceiling = DefaultMaxWait
	}
	d := base
	for range i {
		if d >= ceiling/2 {
			d = ceiling
			break
		}
		d *= 2
	}
	d = min(d, ceiling)
	return d/2 + rand.N(d/2+1)
}

func (c *Client) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

func (c *Client) pause(ctx context.Context, d time.Duration) error {
	if c.sleep != nil {
		return c.sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// maxRetryAfter caps what a vendor may ask to wait; the caller's context
// bounds it further.
const maxRetryAfter = 10 * time.Minute

// ParseRetryAfter reads a Retry-After header's value (delay seconds or an
// HTTP date) as a wait from now, at most 10 minutes; 0 when absent or
// unreadable. Adapters whose client is not this package's use it.
func ParseRetryAfter(v string, now time.Time) time.Duration { return parseRetryAfter(v, now) }

// parseRetryAfter reads Retry-After: delay seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		if n > int64(maxRetryAfter/time.Second) {
			return maxRetryAfter
		}
		d = time.Duration(n) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), maxRetryAfter)
}
