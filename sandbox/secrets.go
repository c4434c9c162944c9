package sandbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Redacted replaces a secret value wherever the helper would otherwise show
// it: formatted output, JSON, logs, errors, audit records and the output of
// sandboxed commands.
const Redacted = "[REDACTED]"

// Secrets holds the values of the secrets a spec names in secret_names, apart
// from env: they reach the sandbox's commands only and are never persisted.
// Every way of printing one (String, GoString, fmt verbs, JSON, slog,
// reflection) shows names, not values: it holds only a handle into a
// process-local vault. The zero value holds no secrets.
type Secrets struct {
	h *secretHandle
}

type secretHandle struct{ id uint64 }

var (
	vault     sync.Map // handle id -> map[string]string
	vaultNext atomic.Uint64
)

// MinSecretLength is the fewest characters a secret value may have; Open
// refuses a shorter or empty one (SBX-RUN-002), naming the secret, never its
// value. Redaction replaces every occurrence of a value, so a short one would
// match ordinary output (and give itself away); 8 is the usual password floor.
const MinSecretLength = 8

// NewSecrets returns the secrets in m (copied), by name.
func NewSecrets(m map[string]string) Secrets {
	if len(m) == 0 {
		return Secrets{}
	}
	h := &secretHandle{id: vaultNext.Add(1)}
	vault.Store(h.id, maps.Clone(m))
	runtime.AddCleanup(h, func(id uint64) { vault.Delete(id) }, h.id)
	return Secrets{h: h}
}

// m returns the values; nil for none.
func (s Secrets) m() map[string]string {
	if s.h == nil {
		return nil
	}
	v, _ := vault.Load(s.h.id)
	runtime.KeepAlive(s.h)
	m, _ := v.(map[string]string)
	return m
}

// SecretsFromEnv reads each named secret through lookup (os.LookupEnv in the
// CLI). A name that is not set is a ConfigurationError naming it; the error
// never holds a value.
func SecretsFromEnv(names []string, lookup func(string) (string, bool)) (Secrets, error) {
	return secretsFrom(names, func(string) string { return "secret_names" }, lookup)
}

// SecretsForSpec reads, through lookup, every value the spec needs at open:
// those of its secret_names and of its brokered_secrets (model.Spec
// ValueNames). The error names the secret and the attribute that names it.
func SecretsForSpec(spec model.Spec, lookup func(string) (string, bool)) (Secrets, error) {
	return secretsFrom(spec.ValueNames(), func(n string) string { return secretsAttribute(spec, n) }, lookup)
}

func secretsFrom(names []string, attr func(string) string, lookup func(string) (string, bool)) (Secrets, error) {
	m := make(map[string]string, len(names))
	for _, n := range names {
		v, ok := lookup(n)
		if !ok {
			return Secrets{}, &model.Error{Class: model.ErrConfiguration, Rule: rules.SecretValues, Attribute: attr(n),
				Message: fmt.Sprintf("secret %q, named in the spec's %s, is not set in the environment", n, attr(n)),
				Fix:     fmt.Sprintf("export %s with the secret's value in the environment of the caller (never in the spec, a DSN or Terraform)", n)}
		}
		m[n] = v
	}
	return NewSecrets(m), nil
}

// checkLengths refuses the first secret (by name) whose value is shorter
// than MinSecretLength.
func (s Secrets) checkLengths() error {
	m := s.m()
	for _, n := range s.Names() {
		l := utf8.RuneCountInString(m[n])
		if l >= MinSecretLength {
			continue
		}
		msg := fmt.Sprintf("secret %q has a value of fewer than %d characters, too short to be redacted from output and errors without garbling them", n, MinSecretLength)
		if l == 0 {
			msg = fmt.Sprintf("secret %q has an empty value", n)
		}
		return &model.Error{Class: model.ErrConfiguration, Rule: rules.ShortSecret, Attribute: "secret_names", Message: msg,
			Fix: fmt.Sprintf("supply the real credential for %s (at least %d characters; the CLI reads it from its environment, the Go API from Request.Secrets), or remove %s from the template's secret_names", n, MinSecretLength, n)}
	}
	return nil
}

// redactable returns the secrets whose values are long enough to redact.
// A refusal of a short value is redacted with these only: redacting the
// refusal's own text with the short value would garble it and give the
// value away.
func (s Secrets) redactable() Secrets {
	m := s.m()
	keep := make(map[string]string, len(m))
	for n, v := range m {
		if utf8.RuneCountInString(v) >= MinSecretLength {
			keep[n] = v
		}
	}
	if len(keep) == len(m) {
		return s
	}
	return NewSecrets(keep)
}

// Names returns the secret names, sorted.
func (s Secrets) Names() []string {
	m := s.m()
	if m == nil {
		return []string{}
	}
	return slices.Sorted(maps.Keys(m))
}

// Len returns the number of secrets.
func (s Secrets) Len() int {
	return len(s.m())
}

func (s Secrets) has(name string) bool {
	_, ok := s.m()[name]
	return ok
}

// values returns a copy of the map for the backend's CreateRequest.
func (s Secrets) values() map[string]string {
	return maps.Clone(s.m())
}

// split returns copies of the values for the backend's CreateRequest: those
// of the spec's secret_names, which reach the sandbox, and those of its
// brokered secrets, which only a broker may hold. A value named by neither
// is in neither (checkSecrets refused it already).
func (s Secrets) split(spec model.Spec) (secrets, brokered map[string]string) {
	m := s.m()
	for _, n := range spec.SecretNames {
		if v, ok := m[n]; ok {
			if secrets == nil {
				secrets = map[string]string{}
			}
			secrets[n] = v
		}
	}
	for n := range spec.BrokeredSecrets {
		if v, ok := m[n]; ok {
			if brokered == nil {
				brokered = map[string]string{}
			}
			brokered[n] = v
		}
	}
	return secrets, brokered
}

// String shows the names only: Secrets{OPENAI_API_KEY=[REDACTED]}.
func (s Secrets) String() string {
	var b strings.Builder
	b.WriteString("Secrets{")
	for i, n := range s.Names() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(n)
		b.WriteString("=" + Redacted)
	}
	b.WriteString("}")
	return b.String()
}

// GoString is what %#v prints: the names only.
func (s Secrets) GoString() string { return "sandbox." + s.String() }

// Format prints the redacted form for every verb, so that no verb (%x, %q,
// %+v ...) reaches the values.
func (s Secrets) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		_, _ = io.WriteString(f, s.GoString())
		return
	}
	_, _ = io.WriteString(f, s.String())
}

// MarshalJSON encodes the names with redacted values.
func (s Secrets) MarshalJSON() ([]byte, error) {
	m := make(map[string]string, s.Len())
	for _, n := range s.Names() {
		m[n] = Redacted
	}
	return json.Marshal(m)
}

// MarshalText is the redacted form, for encoders that use it (YAML, TOML).
func (s Secrets) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// LogValue keeps the values out of log/slog records.
func (s Secrets) LogValue() slog.Value { return slog.StringValue(s.String()) }

// RedactString replaces every secret value in text with [REDACTED].
func (s Secrets) RedactString(text string) string {
	if s.h == nil || text == "" {
		return text
	}
	for _, v := range s.sortedValues() {
		if strings.Contains(text, v) {
			text = strings.ReplaceAll(text, v, Redacted)
		}
	}
	return text
}

// Redact replaces every secret value in b with [REDACTED]. It returns b
// itself when no value occurs in it.
func (s Secrets) Redact(b []byte) []byte {
	if s.h == nil || len(b) == 0 {
		return b
	}
	for _, v := range s.sortedValues() {
		if bytes.Contains(b, []byte(v)) {
			b = bytes.ReplaceAll(b, []byte(v), []byte(Redacted))
		}
	}
	return b
}

// Contains reports whether text holds any secret value.
func (s Secrets) Contains(text string) bool {
	for _, v := range s.m() {
		if v != "" && strings.Contains(text, v) {
			return true
		}
	}
	return false
}

// sortedValues returns the non-empty values, longest first, so that a value
// that contains another is replaced whole.
func (s Secrets) sortedValues() []string {
	m := s.m()
	vs := make([]string, 0, len(m))
	for _, v := range m {
		if v != "" {
			vs = append(vs, v)
		}
	}
	slices.SortFunc(vs, func(a, b string) int { return len(b) - len(a) })
	return vs
}
