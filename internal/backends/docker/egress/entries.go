package egress

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"time"
)

// entriesBudget bounds the names' resolution at apply; a name not judged
// in it is still refused at run time if it reaches nothing allowed.
const entriesBudget = 10 * time.Second

// Unreachable is an allow-list entry the gateway on this host would never
// forward to, and why.
type Unreachable struct{ Entry, Why string }

// CheckEntries lists the allow-list entries that the gateway on this host
// would never forward to: a block wholly inside the host's own addresses,
// its bridges, the daemon's networks (cfg.Never) or the fixed never ranges;
// and a name (not a wildcard) that resolves, through cfg.Resolver, only to
// addresses the gateway never dials. A name that does not resolve now is
// not judged: the gateway refuses it at run time (SBX-EGW-003).
func CheckEntries(ctx context.Context, cfg GatewayConfig) []Unreachable {
	p := newPolicy(cfg)
	var out []Unreachable
	for _, b := range p.rules.Blocks {
		if in, ok := p.insideNever(b.Prefix); ok {
			where := "it lies inside " + in.String()
			if in.IsSingleIP() {
				where = "it is " + in.Addr().String()
			}
			out = append(out, Unreachable{blockEntry(b), where + ", which no sandbox reaches (the host's addresses, its bridges, the daemon's networks, loopback, link-local and metadata ranges)"})
		}
	}
	if !cfg.Resolver.IsValid() {
		return out
	}
	dial := cfg.Dialer
	if dial == nil {
		d := &net.Dialer{Timeout: resolveTimeout}
		dial = d.DialContext
	}
	res := resolver{server: cfg.Resolver, dial: dial}
	ctx, cancel := context.WithTimeout(ctx, entriesBudget)
	defer cancel()
	for _, n := range p.rules.Names {
		if strings.HasPrefix(n, "*.") || ctx.Err() != nil {
			continue
		}
		addrs, err := res.lookup(ctx, n)
		if err != nil || len(addrs) == 0 {
			continue
		}
		usable := false
		var shown []string
		for _, a := range addrs {
			if p.usable(a, 443) || p.usable(a, 80) {
				usable = true
				break
			}
			shown = append(shown, a.String())
		}
		if !usable {
			out = append(out, Unreachable{n, "it resolves only to " + strings.Join(shown, ", ") + ", which the gateway never dials (the host's addresses, its bridges, the daemon's networks, loopback, link-local and metadata ranges, and private addresses no block lists)"})
		}
	}
	return out
}

// insideNever returns the never-reachable prefix that holds all of pf.
func (p *policy) insideNever(pf netip.Prefix) (netip.Prefix, bool) {
	for _, set := range [][]netip.Prefix{fixedNever, p.never, p.host()} {
		for _, n := range set {
			if within(pf, n) {
				return n, true
			}
		}
	}
	return netip.Prefix{}, false
}

func blockEntry(b Block) string {
	if b.Entry != "" {
		return b.Entry
	}
	return b.Prefix.String()
}
