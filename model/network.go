package model

// Egress modes of a network policy.
const (
	EgressDeny  = "deny"
	EgressAllow = "allow"
	EgressLearn = "learn"
)

// NetworkPolicy is a sandbox's egress policy. The zero value is not valid;
// Normalized turns it into the default, which denies all egress.
type NetworkPolicy struct {
	Egress string   `json:"egress"`
	Allow  []string `json:"allow"`
}

// Normalized fills the defaults: an empty egress means deny and a nil allow
// list becomes empty, so the canonical spec never holds null there.
func (n NetworkPolicy) Normalized() NetworkPolicy {
	if n.Egress == "" {
		n.Egress = EgressDeny
	}
	if n.Allow == nil {
		n.Allow = []string{}
	}
	return n
}
