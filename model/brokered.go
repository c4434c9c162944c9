package model

import (
	"slices"
	"sort"
)

// DefaultBrokeredFormat is a brokered secret's format when none is given:
// the header carries the value alone.
const DefaultBrokeredFormat = "%s"

// BrokeredSecret says where a credential may be sent without the sandbox
// ever holding it: the egress gateway writes the value, read from the
// environment at open, into Header (as Format with its one %s replaced) of
// requests to Hosts, and nowhere else. The sandbox sees a placeholder. Only
// the destination is described here; a value never is.
type BrokeredSecret struct {
	Hosts  []string `json:"hosts"`
	Header string   `json:"header"`
	Format string   `json:"format"`
}

// NormalizeBrokered returns the canonical form of a template's brokered
// secrets: nil when there are none (so that a spec without any keeps its
// digest), each entry's hosts sorted without repeats and never nil, and an
// empty format replaced by DefaultBrokeredFormat. The input is not changed.
func NormalizeBrokered(m map[string]BrokeredSecret) map[string]BrokeredSecret {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]BrokeredSecret, len(m))
	for name, b := range m {
		hosts := append([]string{}, b.Hosts...)
		sort.Strings(hosts)
		b.Hosts = slices.Compact(hosts)
		if b.Format == "" {
			b.Format = DefaultBrokeredFormat
		}
		out[name] = b
	}
	return out
}

// BrokeredNames lists the names of the brokered secrets, sorted.
func (s Spec) BrokeredNames() []string {
	names := make([]string, 0, len(s.BrokeredSecrets))
	for n := range s.BrokeredSecrets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ValueNames lists every name whose value is read at open, sorted: the
// secret_names, which reach the sandbox, and the brokered secrets, which
// reach only a broker.
func (s Spec) ValueNames() []string {
	names := append(slices.Clone(s.SecretNames), s.BrokeredNames()...)
	sort.Strings(names)
	return slices.Compact(names)
}

// BrokeredRequest is one request a broker wrote a secret into, or refused,
// for the audit record: the secret's name (empty when none was written), the
// host, the method and the status the sandbox got. Never a value.
type BrokeredRequest struct {
	Secret string `json:"secret,omitempty"`
	Host   string `json:"host"`
	Method string `json:"method"`
	Status int    `json:"status"`
}
