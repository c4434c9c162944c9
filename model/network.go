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

// Kinds of blocked egress attempt.
const (
	EgressKindDNS  = "dns"  // a DNS query (UDP port 53); Name is the name asked for
	EgressKindTCP  = "tcp"  // a TCP connection attempt (a SYN)
	EgressKindUDP  = "udp"  // a UDP datagram other than a DNS query
	EgressKindICMP = "icmp" // an ICMP or ICMPv6 echo request (ping)
	EgressKindIP   = "ip"   // a packet of another IP protocol; Protocol names it
	// A name on a TCP attempt already counted: the TLS server name or the
	// HTTP Host its client sent first (where the observer reads it: HTTP and
	// HTTPS ports). Name, Address and Port say which; these entries are not
	// counted again in blocked_egress.
	EgressKindTLS  = "tls"
	EgressKindHTTP = "http"
)

// BlockedDestination is one distinct destination a sandbox tried to reach
// and was refused, with the number of attempts. A DNS query is identified by
// its name alone (whichever resolver or record type was asked); every other
// kind by address, and port or protocol. Name is what untrusted code sent:
// bytes outside letters, digits, '-', '_' and '.' are escaped as \DDD.
type BlockedDestination struct {
	Kind     string `json:"kind"`
	Name     string `json:"name,omitempty"`
	Address  string `json:"address,omitempty"`
	Port     int    `json:"port,omitempty"`
	Protocol int    `json:"protocol,omitempty"`
	Count    int64  `json:"count"`
}
