// Package vendorapi is the HTTP client the cloud backends use for their
// vendors' REST APIs (E2B now; Vercel and Daytona later).
//
// It injects the credential into one request header and never prints it:
// Credential formats as [REDACTED] in every fmt verb, JSON, text and slog,
// and every error text is scrubbed of it. A non-2xx status becomes a typed
// error with a clear message and fix:
//
//   - 401, 403: model ConfigurationError on attribute "credentials", naming
//     the environment variable that holds the key;
//   - 404 on a request that names one sandbox (Request.Sandbox):
//     SandboxGone; any other 404, 400 and 422: ConfigurationError;
//   - 409: ConfigurationError (a conflict: the resource exists or is busy);
//   - 429 and 5xx: a *StatusError with no model class (a backend failure,
//     which the run-time helper reports as such), carrying Retry-After.
//
// Idempotent requests (GET, HEAD, PUT, DELETE, or Request.Idempotent) are
// retried on 429, 5xx and transport failures, with exponential backoff and
// jitter, waiting at least what Retry-After says (seconds or an HTTP date),
// and never past the caller's context: a wait that would end after its
// deadline is not started. A create (POST) is never retried here: the
// adapter looks for the sandbox by label first and decides.
//
// Response bodies are read up to Client.MaxBody (a larger one is an error),
// error bodies up to 64 KiB, and the vendor's message is clipped.
package vendorapi

import (
	"encoding/json"
	"fmt"
	"log/slog"
)

// Redacted is what a credential prints as.
const Redacted = "[REDACTED]"

// Credential is an API key or access token. Its value leaves only through
// Reveal; formatting, JSON, text and slog all give [REDACTED]. The value is
// held behind a pointer: fmt cannot call the methods of a value in an
// unexported field of a struct it prints, and shows a pointer there as an
// address, never what it points to.
type Credential struct{ p *string }

// NewCredential wraps a key (read from the environment by the caller).
func NewCredential(v string) Credential { return Credential{p: &v} }

// Reveal returns the value, for a request header or an SDK's option only.
func (c Credential) Reveal() string {
	if c.p == nil {
		return ""
	}
	return *c.p
}

// Empty reports whether no value is set.
func (c Credential) Empty() bool { return c.Reveal() == "" }

func (c Credential) String() string   { return Redacted }
func (c Credential) GoString() string { return Redacted }

// Format makes every verb (%v, %+v, %#v, %s, %q, %x, ...) print [REDACTED].
func (c Credential) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(Redacted)) }

// MarshalJSON and MarshalText give [REDACTED].
func (c Credential) MarshalJSON() ([]byte, error) { return json.Marshal(Redacted) }
func (c Credential) MarshalText() ([]byte, error) { return []byte(Redacted), nil }

// LogValue keeps the value out of slog records.
func (c Credential) LogValue() slog.Value { return slog.StringValue(Redacted) }
