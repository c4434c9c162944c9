package egressreport

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// What the sandbox tried is not all a place an allow list should open: a
// cloud's metadata service hands out the instance's credentials, and
// loopback, private ranges, the Docker bridge and this host's own networks
// reach the host and its neighbours, not the Internet. Such an entry is
// held back from the paste-ready lists and named with its category; one
// that cannot be classified is held back too (fail closed). Only an
// address outside every special-purpose range, and a name under a public
// top-level domain that is none of the names below, is listed.

// Category names why an entry is held back.
type Category string

const (
	CatMetadata     Category = "cloud metadata endpoint"
	CatLoopback     Category = "loopback"
	CatHostNetwork  Category = "a network of this host"
	CatDockerBridge Category = "the Docker bridge"
	CatLinkLocal    Category = "link-local (where cloud metadata services answer)"
	CatPrivate      Category = "private network"
	CatShared       Category = "shared address space (carrier-grade NAT, RFC 6598)"
	CatThisNetwork  Category = "unspecified or \"this network\" address"
	CatSpecial      Category = "special-purpose address, not on the Internet"
	CatMulticast    Category = "multicast or broadcast"
	CatTransition   Category = "IPv6 transition address embedding an IPv4 address"
	CatReverseDNS   Category = "reverse-DNS name"
	CatInternalName Category = "name for a private or local network"
	CatNoPublicTLD  Category = "not under a public top-level domain"
	CatSentToHeld   Category = "name sent to an address held back"
	CatUnclassified Category = "unclassified"
)

// HostNet is a network this host is on: an interface's address and prefix.
type HostNet struct {
	Interface string
	Prefix    netip.Prefix
}

// LocalNetworks lists the networks of this host's interfaces: the Docker
// bridges (docker0, br-*) among them, whatever address pool the daemon
// uses.
func LocalNetworks() ([]HostNet, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	var out []HostNet
	for _, ifc := range ifs {
		addrs, err := ifc.Addrs()
		if err != nil {
			return nil, fmt.Errorf("addresses of %s: %w", ifc.Name, err)
		}
		for _, a := range addrs {
			n, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(n.IP)
			ones, _ := n.Mask.Size()
			if !ok {
				continue
			}
			out = append(out, HostNet{Interface: ifc.Name, Prefix: netip.PrefixFrom(ip.Unmap(), ones).Masked()})
		}
	}
	return out, nil
}

type special struct {
	prefix netip.Prefix
	cat    Category
	why    string
}

func mustPrefixes(cat Category, why string, ps ...string) []special {
	out := make([]special, len(ps))
	for i, p := range ps {
		out[i] = special{netip.MustParsePrefix(p), cat, why}
	}
	return out
}

// metadataAddrs are the metadata services clouds answer on inside their
// instances.
var metadataAddrs = concat(
	mustPrefixes(CatMetadata, "AWS, Google Cloud, Azure, Oracle, DigitalOcean, OpenStack", "169.254.169.254/32"),
	mustPrefixes(CatMetadata, "AWS ECS task metadata and credentials", "169.254.170.2/32"),
	mustPrefixes(CatMetadata, "Amazon EKS Pod Identity", "169.254.170.23/32", "fd00:ec2::23/128"),
	mustPrefixes(CatMetadata, "AWS over IPv6", "fd00:ec2::254/128"),
	mustPrefixes(CatMetadata, "Alibaba Cloud", "100.100.100.200/32"),
	mustPrefixes(CatMetadata, "Tencent Cloud", "169.254.0.23/32"),
)

// specialRanges follow the IANA special-purpose address registries, in the
// order they are tried (the first that holds an address names it), after
// the metadata addresses, loopback and this host's networks.
var specialRanges = concat(
	mustPrefixes(CatLinkLocal, "169.254.0.0/16, fe80::/10", "169.254.0.0/16", "fe80::/10"),
	mustPrefixes(CatPrivate, "RFC 1918", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"),
	mustPrefixes(CatPrivate, "IPv6 unique local, fc00::/7", "fc00::/7"),
	mustPrefixes(CatShared, "100.64.0.0/10", "100.64.0.0/10"),
	mustPrefixes(CatThisNetwork, "0.0.0.0/8, ::", "0.0.0.0/8", "::/128"),
	mustPrefixes(CatSpecial, "IETF protocol assignments", "192.0.0.0/24", "2001::/23"),
	mustPrefixes(CatSpecial, "documentation", "192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32", "3fff::/20"),
	mustPrefixes(CatSpecial, "benchmarking, 198.18.0.0/15: test networks", "198.18.0.0/15", "2001:2::/48"),
	mustPrefixes(CatSpecial, "deprecated 6to4 relay anycast", "192.88.99.0/24"),
	mustPrefixes(CatSpecial, "discard-only", "100::/64"),
	mustPrefixes(CatMulticast, "224.0.0.0/4, ff00::/8", "224.0.0.0/4", "ff00::/8"),
	mustPrefixes(CatSpecial, "reserved, 240.0.0.0/4 (and the broadcast address)", "240.0.0.0/4"),
	mustPrefixes(CatTransition, "NAT64, 6to4, IPv4-compatible", "64:ff9b::/96", "64:ff9b:1::/48", "2002::/16", "::/96"),
	mustPrefixes(CatSpecial, "IPv4-mapped (written as IPv6)", "::ffff:0:0/96"),
)

func concat(xs ...[]special) []special {
	var out []special
	for _, x := range xs {
		out = append(out, x...)
	}
	return out
}

// Verdict is why an entry is held back; the zero Verdict lists it.
type Verdict struct {
	Category Category
	Why      string // the range, service or rule, for the reader
}

// Held reports whether the entry is held back.
func (v Verdict) Held() bool { return v.Category != "" }

func (v Verdict) String() string {
	if v.Why == "" {
		return string(v.Category)
	}
	return string(v.Category) + " (" + v.Why + ")"
}

// ClassifyAddr says whether an address an allow list would open is held
// back, and why. host is this host's networks; hostErr, when they could
// not be read, holds back every address (a bridge outside the private
// ranges could not be told).
func ClassifyAddr(a netip.Addr, host []HostNet, hostErr error) Verdict {
	if !a.IsValid() {
		return Verdict{CatUnclassified, "not an IP address"}
	}
	a = a.Unmap().WithZone("")
	for _, s := range metadataAddrs {
		if s.prefix.Contains(a) {
			return Verdict{s.cat, s.why}
		}
	}
	if a.IsLoopback() {
		return Verdict{CatLoopback, "this host: 127.0.0.0/8, ::1"}
	}
	for _, h := range host {
		if h.Prefix.Contains(a) && !h.Prefix.Addr().IsLoopback() {
			if dockerBridge(h.Interface) {
				return Verdict{CatDockerBridge, fmt.Sprintf("%s, %s", h.Interface, h.Prefix)}
			}
			return Verdict{CatHostNetwork, fmt.Sprintf("%s, %s", h.Interface, h.Prefix)}
		}
	}
	if hostErr != nil {
		return Verdict{CatUnclassified, "this host's networks could not be read, so it is not known whether it is one of them: " + hostErr.Error()}
	}
	for _, s := range specialRanges {
		if s.prefix.Contains(a) {
			return Verdict{s.cat, s.why}
		}
	}
	if a.Is6() && !netip.MustParsePrefix("2000::/3").Contains(a) {
		return Verdict{CatSpecial, "IPv6 outside 2000::/3, the global unicast space"}
	}
	return Verdict{}
}

// dockerBridge reports whether an interface is one the Docker daemon made
// for a bridge network: docker0 (the default bridge) or br-<network id>.
func dockerBridge(name string) bool {
	return name == "docker0" || strings.HasPrefix(name, "br-")
}

// metadataNames are names the clouds' metadata services answer to.
var metadataNames = map[string]string{
	"metadata.google.internal":   "Google Cloud",
	"metadata.goog":              "Google Cloud",
	"metadata":                   "Google Cloud",
	"instance-data":              "AWS",
	"instance-data.ec2.internal": "AWS",
	"metadata.tencentyun.com":    "Tencent Cloud",
	"metadata.azure.internal":    "Azure",
}

// internalSuffixes are top-level domains for local and private networks
// (RFC 6761, 6762 appendix G, 7686, 9476, ICANN's .internal), some of which
// are in use on intranets while no public registry serves them.
var internalSuffixes = map[string]string{
	"internal":    "reserved for private networks",
	"local":       "multicast DNS, the local link",
	"localhost":   "this host",
	"localdomain": "this host's own domain",
	"lan":         "a home or office network",
	"home":        "a home network",
	"corp":        "a corporate network",
	"intranet":    "a corporate network",
	"private":     "a private network",
	"test":        "reserved for tests",
	"example":     "reserved for examples",
	"invalid":     "reserved, never resolves",
	"onion":       "Tor onion service",
	"alt":         "reserved for non-DNS name systems",
}

// ClassifyName says whether a domain name (one Domain accepts) is held
// back, and why.
func ClassifyName(name string) Verdict {
	name = strings.ToLower(name)
	if who, ok := metadataNames[name]; ok {
		return Verdict{CatMetadata, who}
	}
	labels := strings.Split(name, ".")
	tld := labels[len(labels)-1]
	if tld == "arpa" {
		switch {
		case strings.HasSuffix(name, ".in-addr.arpa") || strings.HasSuffix(name, ".ip6.arpa"):
			why := "a lookup of the name of an address"
			if a, ok := reverseAddr(name); ok {
				why = "the name of " + a.String()
			}
			return Verdict{CatReverseDNS, why}
		case name == "home.arpa" || strings.HasSuffix(name, ".home.arpa"):
			return Verdict{CatInternalName, "home.arpa, a home network (RFC 8375)"}
		}
		return Verdict{CatSpecial, ".arpa, the Internet's own infrastructure"}
	}
	if why, ok := internalSuffixes[tld]; ok {
		return Verdict{CatInternalName, "." + tld + ", " + why}
	}
	if _, icann := publicsuffix.PublicSuffix(tld); !icann {
		return Verdict{CatNoPublicTLD, "." + tld + " is not in the public suffix list sandboxio was built with"}
	}
	return Verdict{}
}

// reverseAddr reads the address a full in-addr.arpa or ip6.arpa name asks
// the name of.
func reverseAddr(name string) (netip.Addr, bool) {
	if rest, ok := strings.CutSuffix(name, ".in-addr.arpa"); ok {
		l := strings.Split(rest, ".")
		if len(l) != 4 {
			return netip.Addr{}, false
		}
		a, err := netip.ParseAddr(l[3] + "." + l[2] + "." + l[1] + "." + l[0])
		return a, err == nil
	}
	rest, _ := strings.CutSuffix(name, ".ip6.arpa")
	l := strings.Split(rest, ".")
	if len(l) != 32 {
		return netip.Addr{}, false
	}
	var b strings.Builder
	for i := 31; i >= 0; i-- {
		if len(l[i]) != 1 {
			return netip.Addr{}, false
		}
		b.WriteString(l[i])
		if i%4 == 0 && i > 0 {
			b.WriteByte(':')
		}
	}
	a, err := netip.ParseAddr(b.String())
	return a, err == nil
}
