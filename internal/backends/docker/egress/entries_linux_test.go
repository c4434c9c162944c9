package egress

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/testing/netns"
)

// At apply, an entry the gateway would never forward to is found on the
// live host: blocks inside the host's addresses or the daemon's networks,
// and names whose resolution holds only such addresses.
func TestCheckEntriesFindsTheUnreachable(t *testing.T) {
	lab := netns.New(t, dnsHost)
	dns := lab.DNSServer(t, dnsHost)
	dns.Set("allowed.test", netns.Static(allowedHost))
	dns.Set("host.test", netns.Static(netns.Host4))
	dns.Set("loop.test", netns.Static(netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")))
	dns.Set("never.test", netns.Static(neverHost))
	dns.Set("priv.test", netns.Static(netip.MustParseAddr("10.1.2.3")))
	dns.Set("privlisted.test", netns.Static(netip.MustParseAddr("10.9.0.1")))
	dns.Set("mixed.test", netns.Static(neverHost, allowedHost))
	block := func(s string) Block {
		pf, err := netip.ParsePrefix(s)
		if err != nil {
			pf = netip.PrefixFrom(netip.MustParseAddr(s), 32)
		}
		return Block{Prefix: pf, Entry: s}
	}
	got := CheckEntries(t.Context(), GatewayConfig{
		Rules: Rules{
			Blocks: []Block{block(netns.Host4.String()), block("198.18.1.99"), block("198.18.1.20"), block("198.18.0.0/15"), block("10.9.0.0/16")},
			Names:  []string{"allowed.test", "host.test", "loop.test", "never.test", "priv.test", "privlisted.test", "mixed.test", "nx.test", "*.wild.test"},
		},
		Resolver: netip.AddrPortFrom(dnsHost, 53),
		Never:    []netip.Prefix{netip.PrefixFrom(neverHost, 32)},
	})
	var entries []string
	for _, u := range got {
		entries = append(entries, u.Entry)
		t.Logf("%s: %s", u.Entry, u.Why)
	}
	want := []string{netns.Host4.String(), "198.18.1.99", "host.test", "loop.test", "never.test", "priv.test"}
	if !slices.Equal(entries, want) {
		t.Fatalf("unreachable entries %q, want %q", entries, want)
	}
}
