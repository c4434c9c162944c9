package policies_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// regoEntry is how the bundle reads one allow-list entry: its kind, block
// and port (lib), and whether the plan accepts it on the egress gateway
// (no SBX-NET-006 or SBX-NET-011 finding).
type regoEntry struct {
	Kind, Block, Port string
	Accepted          bool
}

const agreementModule = `package agreement

import data.sandboxio.fixtures
import data.sandboxio.lib
import data.sandboxio.network

default kind := ""

kind := lib.address_kind(input.e)

default block := ""

block := lib.ip_block(input.e)

port := lib.entry_port(input.e)

ids := {f.id | some f in network.deny with input as fixtures.network_input("docker/runc+gateway", {"allow": [input.e]})}
`

// entryQuery prepares, once, the query that reads an entry as the plan does.
func entryQuery(t testing.TB) func(t testing.TB, entry string) regoEntry {
	t.Helper()
	res := loadBundle(t)
	var opts []func(*rego.Rego)
	for _, m := range res.ParsedModules() {
		opts = append(opts, rego.ParsedModule(m))
	}
	opts = append(opts,
		rego.Store(inmem.NewFromObject(res.Documents)),
		rego.Module("agreement.rego", agreementModule),
		rego.Query("data.agreement"))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	pq, err := rego.New(opts...).PrepareForEval(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return func(t testing.TB, entry string) regoEntry {
		t.Helper()
		rs, err := pq.Eval(t.Context(), rego.EvalInput(map[string]any{"e": entry}))
		if err != nil || len(rs) != 1 {
			t.Fatalf("evaluate %q: %v (%d results)", entry, err, len(rs))
		}
		b, _ := rs[0].Expressions[0].Value.(map[string]any)
		ids, _ := b["ids"].([]any)
		r := regoEntry{Kind: b["kind"].(string), Block: b["block"].(string), Port: b["port"].(string), Accepted: true}
		for _, id := range ids {
			if id == "SBX-NET-006" || id == "SBX-NET-011" {
				r.Accepted = false
			}
		}
		return r
	}
}

// agree checks the run time's parser (model.ParseEgressEntry) against the
// plan's reading of one entry: whatever the plan accepts, the gateway
// parses to the same kind, block and port, so that both enforce one list.
// Only an internationalised name may be refused by the parser after the
// plan accepted it (IDNA rules the bundle cannot apply); then the gateway
// refuses the template at open, never widens it.
func agree(t *testing.T, read func(testing.TB, string) regoEntry, entry string) {
	t.Helper()
	r := read(t, entry)
	g, err := model.ParseEgressEntry(entry)
	if err == nil && r.Kind == "" {
		t.Errorf("%q: the gateway parses it as %s but the plan does not read it as an entry", entry, g.Kind)
	}
	if !r.Accepted {
		return
	}
	if err != nil {
		if !isASCII(entry) {
			return
		}
		t.Errorf("%q: the plan accepts it as %s, the gateway refuses it: %v", entry, r.Kind, err)
		return
	}
	if g.Kind != r.Kind {
		t.Errorf("%q: kind %s to the plan, %s to the gateway", entry, r.Kind, g.Kind)
	}
	if g.Kind != model.AllowDomain {
		if g.Prefix.String() != r.Block {
			t.Errorf("%q: block %s to the plan, %s to the gateway", entry, r.Block, g.Prefix)
		}
		want := r.Port
		if got := portString(g.Port); got != want {
			t.Errorf("%q: port %q to the plan, %q to the gateway", entry, want, got)
		}
		return
	}
	if isASCII(entry) && g.Name != strings.ToLower(entry) {
		t.Errorf("%q: the gateway normalises it to %q", entry, g.Name)
	}
}

func portString(p uint16) string {
	if p == 0 {
		return ""
	}
	return strconv.Itoa(int(p))
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

var entryCorpus = []string{
	"198.51.100.7", "198.51.100.0/24", "198.51.100.7:443", "198.51.100.0/24:443", "10.0.0.0/8",
	"2001:db8::1", "2001:db8::/32", "[2001:db8::1]:443", "[2001:db8::/32]:8443", "::ffff:198.51.100.7",
	"[::ffff:198.51.100.7]:22", "2001:DB8::1", "10.1.2.3/8", "198.51.100.7:0", "198.51.100.7:65536",
	"198.51.100.7:0443", "[198.51.100.7]:443", "2001:db8::1:443", "pypi.org", "PyPI.org", "*.example.com",
	"*.com", "a.*.example.com", "example.com:443", "bücher.example", "*.müller.example", "xn--bcher-kva.example",
	"пример.рф", "bü cher.example", "-a.example", "a-.example", "a.1example", "http://pypi.org", "",
	"010.0.0.1", "1.2.3.4/08", "fe80::1%eth0", "[fe80::1%eth0]:80", "1.2.3.4/33", "::/0:443", "a..example",
	strings.Repeat("a", 63) + ".example", strings.Repeat("a", 64) + ".example",
}

func TestEgressEntriesPlanAndGatewayAgree(t *testing.T) {
	read := entryQuery(t)
	for _, e := range entryCorpus {
		agree(t, read, e)
	}
	// The corpus has entries of each outcome, so the test can fail.
	var accepted, refused int
	for _, e := range entryCorpus {
		if read(t, e).Accepted {
			accepted++
		} else {
			refused++
		}
	}
	if accepted < 10 || refused < 10 {
		t.Fatalf("corpus: %d accepted, %d refused", accepted, refused)
	}
}

func FuzzEgressEntriesPlanAndGatewayAgree(f *testing.F) {
	for _, e := range entryCorpus {
		f.Add(e)
	}
	read := entryQuery(f)
	f.Fuzz(func(t *testing.T, entry string) {
		if len(entry) > 300 || !utf8.ValidString(entry) {
			return
		}
		agree(t, read, entry)
	})
}
