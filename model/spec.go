package model

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
)

// SpecVersion is the version of the canonical spec format.
const SpecVersion = 1

// Spec is the effective, policy-checked description of a sandbox: what a
// template renders and what the run-time helper provisions from. Its JSON
// form is canonical (fixed field order, sorted map keys), so equal specs have
// equal sha256 digests.
type Spec struct {
	SpecVersion      int               `json:"spec_version"`
	Name             string            `json:"name"`
	Backend          string            `json:"backend"`
	Image            string            `json:"image"`
	Runtime          string            `json:"runtime,omitempty"`
	RequireIsolation Tier              `json:"require_isolation,omitempty"`
	IsolationTier    Tier              `json:"isolation_tier"`
	Network          NetworkPolicy     `json:"network"`
	Resources        Caps              `json:"resources"`
	TimeoutSeconds   int64             `json:"timeout_seconds"`
	LifetimeSeconds  int64             `json:"lifetime_seconds"`
	Env              map[string]string `json:"env"`
	SecretNames      []string          `json:"secret_names"`
	// BrokeredSecrets are the credentials the egress gateway writes into
	// requests to their hosts, keyed by variable name; nil when there are
	// none (and then absent from the JSON, so specs without any keep their
	// digests). The values are never part of a spec.
	BrokeredSecrets map[string]BrokeredSecret `json:"brokered_secrets,omitempty"`
	Labels          map[string]string         `json:"labels"`
	// Volume is the template's persistent storage, nil when it has none
	// (and then absent from the JSON, so specs without one keep their
	// digests). Each tenant gets its own volume of that name.
	Volume *Volume `json:"volume,omitempty"`
	// WarmPool is the template's warm pool, nil when it has none (and then
	// absent from the JSON, so specs without one keep their digests).
	WarmPool  *WarmPool `json:"warm_pool,omitempty"`
	TenantID  string    `json:"tenant_id,omitempty"`
	SessionID string    `json:"session_id,omitempty"`
}

// DefaultPoolIdleSeconds is a warm pool's max_idle_seconds when unset.
const DefaultPoolIdleSeconds = 600

// WarmPool asks for warm sandboxes of a template: Size kept ready, each
// waiting at most MaxIdleSeconds for a claim. A pooled sandbox is bound to
// one tenant and session when claimed and removed when closed, never reused.
type WarmPool struct {
	Size           int64 `json:"size"`
	MaxIdleSeconds int64 `json:"max_idle_seconds"`
}

// Volume is a named persistent volume mounted into every sandbox of a
// template. The backend scopes it per tenant: a tenant's sandboxes mount
// that tenant's own volume, never another's.
type Volume struct {
	Name      string `json:"name"`
	MountPath string `json:"mount_path"`
}

// Canonical returns the canonical JSON encoding of the spec and its sha256
// digest in hex.
func (s Spec) Canonical() ([]byte, string, error) {
	if s.Env == nil {
		s.Env = map[string]string{}
	}
	if s.SecretNames == nil {
		s.SecretNames = []string{}
	}
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	s.Network = s.Network.Normalized()
	s.BrokeredSecrets = NormalizeBrokered(s.BrokeredSecrets)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return nil, "", fmt.Errorf("spec encode: %w", err)
	}
	out := bytes.TrimRight(buf.Bytes(), "\n")
	return out, Digest(out), nil
}

// Digest is the hex sha256 of b.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// ParseSpec decodes a canonical spec. Unknown fields, trailing data and an
// unsupported spec_version are ConfigurationErrors.
func ParseSpec(data []byte) (Spec, error) {
	var s Spec
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Spec{}, &Error{Class: ErrConfiguration, Rule: rules.SpecInvalid, Attribute: "spec", Message: "spec is not a valid sandboxio spec: " + err.Error(),
			Fix: "pass the spec rendered by sandboxio_template or data.sandboxio_tenant_sandbox unchanged"}
	}
	if _, err := dec.Token(); err != io.EOF {
		return Spec{}, &Error{Class: ErrConfiguration, Rule: rules.SpecInvalid, Attribute: "spec", Message: "spec has trailing data after the JSON object",
			Fix: "pass the spec rendered by sandboxio_template or data.sandboxio_tenant_sandbox unchanged"}
	}
	if s.SpecVersion != SpecVersion {
		return Spec{}, &Error{Class: ErrConfiguration, Rule: rules.SpecVersion, Attribute: "spec_version",
			Message: fmt.Sprintf("spec_version %d is not supported (this build reads %d)", s.SpecVersion, SpecVersion),
			Fix:     "render the spec with a provider of the same version as this helper"}
	}
	return s, nil
}
