package egressreport

import (
	"bytes"
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// hostNets is a host with the default Docker bridge, a user-defined bridge
// from a pool outside the private ranges, and a LAN.
var hostNets = []HostNet{
	{"lo", netip.MustParsePrefix("127.0.0.0/8")},
	{"eth0", netip.MustParsePrefix("203.0.113.0/24")},
	{"docker0", netip.MustParsePrefix("172.17.0.0/16")},
	{"br-0123456789ab", netip.MustParsePrefix("44.1.0.0/16")},
}

func TestClassifyAddr(t *testing.T) {
	for addr, want := range map[string]Category{
		"169.254.169.254":        CatMetadata,
		"169.254.170.2":          CatMetadata,
		"100.100.100.200":        CatMetadata,
		"fd00:ec2::254":          CatMetadata,
		"::ffff:169.254.169.254": CatMetadata,
		"169.254.0.23":           CatMetadata,
		"169.254.1.1":            CatLinkLocal,
		"fe80::1":                CatLinkLocal,
		"127.0.0.1":              CatLoopback,
		"127.1.2.3":              CatLoopback,
		"::1":                    CatLoopback,
		"172.17.0.1":             CatDockerBridge,
		"44.1.0.1":               CatDockerBridge, // a bridge pool outside the private ranges: only the host's interfaces tell
		"203.0.113.7":            CatHostNetwork,
		"10.1.2.3":               CatPrivate,
		"172.31.255.255":         CatPrivate,
		"192.168.1.1":            CatPrivate,
		"fd12:3456::1":           CatPrivate,
		"100.64.0.1":             CatShared,
		"100.127.255.255":        CatShared,
		"0.0.0.0":                CatThisNetwork,
		"0.1.2.3":                CatThisNetwork,
		"::":                     CatThisNetwork,
		"198.18.0.1":             CatSpecial,
		"198.19.255.255":         CatSpecial,
		"192.0.2.1":              CatSpecial,
		"2001:db8::1":            CatSpecial,
		"192.0.0.9":              CatSpecial,
		"2001::1":                CatSpecial,
		"224.0.0.251":            CatMulticast,
		"ff02::fb":               CatMulticast,
		"255.255.255.255":        CatSpecial,
		"64:ff9b::a00:1":         CatTransition,
		"2002:a00:1::1":          CatTransition,
		"4000::1":                CatSpecial,
		"1.1.1.1":                "",
		"151.101.0.223":          "",
		"100.128.0.1":            "",
		"172.32.0.1":             "",
		"2606:4700:4700::1111":   "",
	} {
		if got := ClassifyAddr(netip.MustParseAddr(addr), hostNets, nil); got.Category != want {
			t.Errorf("%s: %v, want %q", addr, got, want)
		}
	}
	// Where this host's networks cannot be read, no address is listed.
	if v := ClassifyAddr(netip.MustParseAddr("1.1.1.1"), nil, errors.New("no interfaces")); v.Category != CatUnclassified {
		t.Errorf("with no host networks: %v", v)
	}
	if v := ClassifyAddr(netip.Addr{}, nil, nil); v.Category != CatUnclassified {
		t.Errorf("zero address: %v", v)
	}
}

func TestClassifyName(t *testing.T) {
	for name, want := range map[string]Category{
		"metadata.google.internal":     CatMetadata,
		"METADATA.goog":                CatMetadata,
		"instance-data.ec2.internal":   CatMetadata,
		"metadata.tencentyun.com":      CatMetadata,
		"db.internal":                  CatInternalName,
		"printer.local":                CatInternalName,
		"host.localdomain":             CatInternalName,
		"app.localhost":                CatInternalName,
		"nas.lan":                      CatInternalName,
		"x.corp":                       CatInternalName,
		"router.home.arpa":             CatInternalName,
		"a.test":                       CatInternalName,
		"x.onion":                      CatInternalName,
		"1.0.0.10.in-addr.arpa":        CatReverseDNS,
		"254.169.254.169.in-addr.arpa": CatReverseDNS,
		"b.a.9.8.7.6.5.0.4.0.0.0.3.0.0.0.2.0.0.0.1.0.0.0.0.0.0.0.1.2.3.4.ip6.arpa": CatReverseDNS,
		"in-addr.arpa":           CatSpecial,
		"kubernetes.default.svc": CatNoPublicTLD,
		"api.cluster":            CatNoPublicTLD,
		"pypi.org":               "",
		"files.pythonhosted.org": "",
		"registry.npmjs.org":     "",
		"example.com":            "",
		"api.openai.com":         "",
		"foo.github.io":          "",
	} {
		if got := ClassifyName(name); got.Category != want {
			t.Errorf("%s: %v, want %q", name, got, want)
		}
	}
	if v := ClassifyName("254.169.254.169.in-addr.arpa"); !strings.Contains(v.Why, "169.254.169.254") {
		t.Errorf("reverse name does not say its address: %v", v)
	}
	if v := ClassifyName("b.a.9.8.7.6.5.0.4.0.0.0.3.0.0.0.2.0.0.0.1.0.0.0.0.0.0.0.1.2.3.4.ip6.arpa"); !strings.Contains(v.Why, "4321:0:1:2:3:4:567:89ab") {
		t.Errorf("reverse IPv6 name: %v", v)
	}
}

// heldLog is a learn sandbox that tried metadata services, private ranges,
// the Docker bridge and reverse lookups beside two public hosts, a name
// sent to a private address and a kind of attempt the report does not know.
const heldLog = `{"event":"exec","sandbox_id":"m","blocked_egress":14,"blocked_egress_destinations":[` +
	`{"kind":"dns","name":"metadata.google.internal","count":3},` +
	`{"kind":"tcp","address":"169.254.169.254","port":80,"count":2},` +
	`{"kind":"http","name":"pypi.org","address":"169.254.169.254","port":80,"count":1},` +
	`{"kind":"tcp","address":"fd00:ec2::254","port":80,"count":1},` +
	`{"kind":"tcp","address":"10.0.0.5","port":5432,"count":1},` +
	`{"kind":"tls","name":"db.corp.example.com","address":"10.0.0.5","port":443,"count":1},` +
	`{"kind":"tcp","address":"172.17.0.1","port":2375,"count":1},` +
	`{"kind":"udp","address":"127.0.0.53","port":53,"count":1},` +
	`{"kind":"dns","name":"5.0.0.10.in-addr.arpa","count":1},` +
	`{"kind":"dns","name":"redis.internal","count":1},` +
	`{"kind":"dns","name":"metadata","count":1},` +
	`{"kind":"tcp","address":"1.1.1.1","port":443,"count":1},` +
	`{"kind":"dns","name":"pypi.org","count":1},` +
	`{"kind":"dns","name":"files.pythonhosted.org","count":1},` +
	`{"kind":"tcp","address":"not-an-ip","port":1,"count":1},` +
	`{"kind":"sctp","address":"1.1.1.1","port":1,"count":1}]}
`

// The paste-ready lists hold only public names and addresses; everything
// else is printed after them, each with a warning naming its category.
func TestWriteHoldsBackMetadataPrivateAndHostEntries(t *testing.T) {
	rep, err := Read(strings.NewReader(heldLog))
	if err != nil {
		t.Fatal(err)
	}
	rep.HostNetworks = hostNets
	a := rep.Allow()
	if got := strings.Join(a.Domains, " "); got != "files.pythonhosted.org" {
		t.Errorf("domains %q: only files.pythonhosted.org (pypi.org was also sent to the metadata address)", got)
	}
	if got := strings.Join(a.Addresses, " "); got != "1.1.1.1" {
		t.Errorf("addresses %q", got)
	}
	var out bytes.Buffer
	rep.Write(&out, "audit.jsonl")
	s := out.String()
	t.Log(s)
	for _, list := range strings.Split(s, "allow = [")[1:] {
		body, _, _ := strings.Cut(list, "]")
		for _, bad := range []string{"metadata", "169.254", "fd00", "10.0.0.5", "172.17", "127.0", "arpa", "internal", "corp", "pypi.org", "not-an-ip", "sctp"} {
			if strings.Contains(body, bad) {
				t.Errorf("a paste-ready list holds %q:\n%s", bad, body)
			}
		}
	}
	for _, want := range []string{
		"#   WARNING metadata.google.internal (dns): cloud metadata endpoint (Google Cloud)\n",
		"#   WARNING 169.254.169.254 (tcp): cloud metadata endpoint (AWS, Google Cloud, Azure",
		"#   WARNING pypi.org (http): name sent to an address held back (sent to 169.254.169.254: cloud metadata endpoint",
		"#   WARNING fd00:ec2::254 (tcp): cloud metadata endpoint (AWS over IPv6)\n",
		"#   WARNING 10.0.0.5 (tcp): private network (RFC 1918)\n",
		"#   WARNING db.corp.example.com (tls): name sent to an address held back (sent to 10.0.0.5: private network (RFC 1918))\n",
		"#   WARNING 172.17.0.1 (tcp): the Docker bridge (docker0, 172.17.0.0/16)\n",
		"#   WARNING 127.0.0.53 (udp): loopback (this host: 127.0.0.0/8, ::1)\n",
		"#   WARNING 5.0.0.10.in-addr.arpa (dns): reverse-DNS name (the name of 10.0.0.5)\n",
		"#   WARNING redis.internal (dns): name for a private or local network (.internal, reserved for private networks)\n",
		"#   WARNING metadata (dns): cloud metadata endpoint (Google Cloud)\n",
		"#   WARNING not-an-ip (tcp): unclassified (not an IP address)\n",
		"#   WARNING sctp 1.1.1.1 (sctp): unclassified (an attempt of a kind this report does not know)\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("want %q in the report", want)
		}
	}
}

// FuzzClassifyName: any name, no panic; a reverse name that reads as an
// address names a valid one; a name listed is under a public TLD.
func FuzzClassifyName(f *testing.F) {
	for _, s := range []string{"pypi.org", "1.0.0.10.in-addr.arpa", "b.a.9.8.7.6.5.0.4.0.0.0.3.0.0.0.2.0.0.0.1.0.0.0.0.0.0.0.1.2.3.4.ip6.arpa", "x.internal", "a..b", ".ip6.arpa"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		v := ClassifyName(name)
		if a, ok := reverseAddr(strings.ToLower(name)); ok && !a.IsValid() {
			t.Fatalf("reverse of %q: invalid address", name)
		}
		if Domain(name) && !v.Held() && strings.HasSuffix(name, ".local") {
			t.Fatalf("%q listed", name)
		}
	})
}
