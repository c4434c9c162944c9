package model

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// Kinds of allow-list entry.
const (
	AllowCIDR   = "cidr"
	AllowIP     = "ip"
	AllowDomain = "domain"
)

// EgressEntry is one parsed allow-list entry. A CIDR or IP entry has a
// Prefix (an IP is its /32 or /128) and, if it names one, a Port; a domain
// entry has a Name in lowercase A-labels, "*.example.com" for any name
// strictly below example.com.
type EgressEntry struct {
	Kind   string
	Prefix netip.Prefix
	Port   uint16
	Name   string
}

// ParseEgressEntry parses an allow-list entry the way the plan does
// (policies/network.rego): a CIDR block or IP address, optionally with one
// port (198.18.1.0/24:443, 198.18.1.5:443, [2001:db8::/64]:443), or a domain
// name with an optional leading "*." label. Internationalised names are
// normalised to A-labels (bücher.example → xn--bcher-kva.example). Anything
// else is an error: the caller treats it as an entry it cannot enforce.
func ParseEgressEntry(s string) (EgressEntry, error) {
	if s == "" || len(s) > 300 {
		return EgressEntry{}, errors.New("empty or longer than 300 bytes")
	}
	host, port, err := splitPort(s)
	if err != nil {
		return EgressEntry{}, err
	}
	if strings.Contains(host, "/") {
		p, err := netip.ParsePrefix(host)
		if err != nil || p.Addr().Zone() != "" {
			return EgressEntry{}, errors.New("not a CIDR block")
		}
		if p != p.Masked() {
			return EgressEntry{}, errors.New("the block's host bits are not zero")
		}
		return EgressEntry{Kind: AllowCIDR, Prefix: unmapPrefix(p), Port: port}, nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return EgressEntry{}, errors.New("an address with a zone")
		}
		a = a.Unmap()
		return EgressEntry{Kind: AllowIP, Prefix: netip.PrefixFrom(a, a.BitLen()), Port: port}, nil
	}
	if port != 0 {
		return EgressEntry{}, errors.New("a domain entry names no port: names are reached on 443 (TLS) and 80 (HTTP)")
	}
	name, err := normaliseName(host)
	if err != nil {
		return EgressEntry{}, err
	}
	return EgressEntry{Kind: AllowDomain, Name: name}, nil
}

// splitPort takes the port off "HOST:PORT" and "[V6]:PORT"; an IPv6 entry
// without brackets has no port.
func splitPort(s string) (string, uint16, error) {
	if rest, ok := strings.CutPrefix(s, "["); ok {
		host, p, ok := strings.Cut(rest, "]:")
		if !ok || !strings.Contains(host, ":") {
			return "", 0, errors.New("a bracketed entry is [IPv6]:PORT or [IPv6/LEN]:PORT")
		}
		port, err := parsePort(p)
		return host, port, err
	}
	if strings.Count(s, ":") != 1 {
		return s, 0, nil
	}
	host, p, _ := strings.Cut(s, ":")
	port, err := parsePort(p)
	return host, port, err
}

func parsePort(p string) (uint16, error) {
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil || n == 0 || p[0] == '0' {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", p)
	}
	return uint16(n), nil
}

func unmapPrefix(p netip.Prefix) netip.Prefix {
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p
}

// nameLookup is IDNA's lookup profile: UTS #46 mapping (case folded) and
// the hyphen and bidi rules, as a browser applies to a typed host.
var nameLookup = idna.New(idna.MapForLookup(), idna.BidiRule(), idna.StrictDomainName(true), idna.Transitional(false))

// asciiName is the policy's domain pattern, applied after normalisation.
var asciiName = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]([a-z0-9-]{0,61}[a-z0-9])?$`)

// typedName is the policy's pattern for a name as typed, Unicode labels
// included (lib.domain_pattern without the wildcard), so that the gateway
// never takes a name the plan refuses.
var typedName = regexp.MustCompile(`^([\p{L}\p{N}]([\p{L}\p{M}\p{N}-]{0,61}[\p{L}\p{M}\p{N}])?\.)+\p{L}([\p{L}\p{M}\p{N}-]{0,61}[\p{L}\p{M}\p{N}])?$`)

func normaliseName(s string) (string, error) {
	wild := ""
	if rest, ok := strings.CutPrefix(s, "*."); ok {
		wild, s = "*.", rest
	}
	// An ASCII name is only lowercased, as the plan reads it: IDNA would
	// refuse labels the plan takes (ab--c.example).
	a := strings.ToLower(s)
	if !isASCII(s) {
		if len(s) > 253 || !typedName.MatchString(s) {
			return "", errors.New("not a domain name of two labels or more")
		}
		var err error
		if a, err = nameLookup.ToASCII(s); err != nil {
			return "", fmt.Errorf("not a domain name (%w)", err)
		}
	}
	if len(a) > 253 || !asciiName.MatchString(a) {
		return "", errors.New("not a domain name of two labels or more")
	}
	return wild + a, nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
