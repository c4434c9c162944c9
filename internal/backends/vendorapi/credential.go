// Package vendorapi is the HTTP client the cloud backends use for their
// vendors' REST APIs. It injects the credential into one header and never
// prints it (Credential formats as [REDACTED]; error text is scrubbed of it),
// maps non-2xx statuses to typed errors, and retries idempotent requests with
// backoff honouring Retry-After within the caller's context; a create is never
// retried here. See docs/design/cloud-backends.md.
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
