// Package egressreport reads the blocked egress recorded in an audit log and
// turns it into a summary and paste-ready allow lists (`sandboxio egress
// report`). Every name in the log was chosen by sandboxed code, so only plain
// domain names and canonical IP addresses go into an allow list (nothing pasted
// can carry HCL syntax or a control sequence); the rest, and whatever reaches a
// metadata service, this host or other non-Internet places (classify.go), are
// listed as left out, with why. See docs/design/egress-report-held-back.md.
package egressreport

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
	"github.com/sandboxio/terraform-provider-sandboxio/policies"
)

// maxLine bounds one audit line.
const maxLine = 1 << 20

// Destination is one destination with its attempts, over every sandbox.
type Destination struct {
	model.BlockedDestination
}

// Label is how the destination is shown: a name, an address:port, or an
// address with its protocol.
func (d Destination) Label() string {
	if d.Kind == model.EgressKindDNS {
		return safe(d.Name)
	}
	a, err := netip.ParseAddr(d.Address)
	if err != nil {
		return safe(d.Address)
	}
	switch d.Kind {
	case model.EgressKindTCP, model.EgressKindUDP:
		return netip.AddrPortFrom(a, uint16(d.Port)).String()
	case model.EgressKindTLS, model.EgressKindHTTP:
		return safe(d.Name) + " at " + netip.AddrPortFrom(a, uint16(d.Port)).String()
	case model.EgressKindIP:
		return fmt.Sprintf("%s (protocol %d)", a, d.Protocol)
	}
	return a.String()
}

// safe shows a string read from the log as it is when it is plain printable
// ASCII, quoted and escaped otherwise: a hand-edited or foreign log cannot
// send control sequences to the terminal through the report.
func safe(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return strconv.QuoteToASCII(s)
		}
	}
	return s
}

// Report is what an audit log says of blocked egress.
type Report struct {
	Attempts     int64 // over every reporting sandbox
	Unlisted     int64 // attempts to destinations past each sandbox's first N
	Sandboxes    int   // sandboxes with a blocked_egress count
	NotReporting int   // sandboxes whose records carry null
	Skipped      int   // lines that were not audit records
	Destinations []Destination

	// HostNetworks are this host's networks (LocalNetworks), whose
	// addresses are held back from the lists; HostNetworksErr, when they
	// could not be read, holds back every address.
	HostNetworks    []HostNet
	HostNetworksErr error
}

type record struct {
	SandboxID    *string                    `json:"sandbox_id"`
	Blocked      *int64                     `json:"blocked_egress"`
	Destinations []model.BlockedDestination `json:"blocked_egress_destinations"`
}

// Read reads an audit log. Each record carries its sandbox's counts so far,
// so the last (largest) one of each sandbox is taken, then the sandboxes
// are added up.
func Read(r io.Reader) (Report, error) {
	var rep Report
	latest := map[string]record{}
	silent := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var rec record
		if json.Unmarshal([]byte(line), &rec) != nil {
			rep.Skipped++
			continue
		}
		if rec.SandboxID == nil {
			continue // refused before anything was provisioned
		}
		id := *rec.SandboxID
		if rec.Blocked == nil {
			silent[id] = true
			continue
		}
		if prev, ok := latest[id]; !ok || *rec.Blocked >= *prev.Blocked {
			latest[id] = rec
		}
	}
	if err := sc.Err(); err != nil {
		return rep, fmt.Errorf("audit log: %w", err)
	}
	merged := map[model.BlockedDestination]int{}
	for id, rec := range latest {
		delete(silent, id)
		rep.Sandboxes++
		rep.Attempts += max(*rec.Blocked, 0)
		var listed int64
		for _, d := range rec.Destinations {
			n := max(d.Count, 0)
			if d.Kind != model.EgressKindTLS && d.Kind != model.EgressKindHTTP {
				listed += n // a name on a connection: counted by its tcp entry
			}
			d.Count = 0
			if i, ok := merged[d]; ok {
				rep.Destinations[i].Count += n
				continue
			}
			merged[d] = len(rep.Destinations)
			d.Count = n
			rep.Destinations = append(rep.Destinations, Destination{d})
		}
		rep.Unlisted += max(*rec.Blocked-listed, 0)
	}
	rep.NotReporting = len(silent)
	slices.SortFunc(rep.Destinations, func(a, b Destination) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return strings.Compare(a.Kind+" "+a.Label(), b.Kind+" "+b.Label())
	})
	return rep, nil
}

// domainPattern is what an allow list takes as a domain (policies/lib.rego's
// domain_pattern, without the wildcard): labels of letters, digits and inner
// hyphens, a last label starting with a letter.
var domainPattern = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Domain reports whether a recorded DNS name can go into an allow list.
func Domain(name string) bool { return len(name) <= 253 && domainPattern.MatchString(name) }

// AllowLists are the entries for each kind of backend.
type AllowLists struct {
	Domains   []string // DNS names that can be allow-list entries
	Addresses []string // IP addresses connected to directly (canonical)
	Held      []HeldEntry
	Left      []string // unclassified: names recorded that are no domain an allow list takes
}

// HeldEntry is a name or address kept out of the lists, and why.
type HeldEntry struct {
	Entry string // as the report shows it (safe)
	Kind  string // the kind of attempt it was recorded under
	Verdict
}

// Allow derives the allow-list entries from a report. An entry held back
// for any of its attempts is held back: a name looked up and also sent to
// a private address is not listed.
func (r Report) Allow() AllowLists {
	type verdict struct {
		entry, kind string
		isName      bool
		left        bool // unclassified name: listed in Left
		Verdict
	}
	var vs []verdict
	for _, d := range r.Destinations {
		switch d.Kind {
		case model.EgressKindDNS, model.EgressKindTLS, model.EgressKindHTTP:
			// A name looked up, or sent first on a connection (TLS server
			// name, HTTP Host): the connection's address is listed by its
			// tcp entry. Lookups were refused, so the record holds no
			// answers: a name is judged by itself and, when sent on a
			// connection, by the address it was sent to.
			v := verdict{entry: d.Name, kind: d.Kind, isName: true}
			if who, ok := metadataNames[strings.ToLower(d.Name)]; ok {
				v.entry, v.Verdict = safe(d.Name), Verdict{CatMetadata, who}
			} else if !Domain(d.Name) {
				v.entry, v.left = safe(d.Name), true
			} else if v.Verdict = ClassifyName(d.Name); !v.Held() && d.Kind != model.EgressKindDNS {
				if ip, err := netip.ParseAddr(d.Address); err != nil {
					v.Verdict = Verdict{CatUnclassified, "sent to an address that does not parse"}
				} else if av := ClassifyAddr(ip, r.HostNetworks, r.HostNetworksErr); av.Held() {
					v.Verdict = Verdict{CatSentToHeld, fmt.Sprintf("sent to %s: %s", ip.Unmap().WithZone(""), av)}
				}
			}
			vs = append(vs, v)
		case model.EgressKindTCP, model.EgressKindUDP, model.EgressKindIP:
			ip, err := netip.ParseAddr(d.Address)
			if err != nil {
				vs = append(vs, verdict{entry: safe(d.Address), kind: d.Kind, Verdict: Verdict{CatUnclassified, "not an IP address"}})
				continue
			}
			ip = ip.Unmap().WithZone("")
			vs = append(vs, verdict{entry: ip.String(), kind: d.Kind, Verdict: ClassifyAddr(ip, r.HostNetworks, r.HostNetworksErr)})
		default:
			vs = append(vs, verdict{entry: safe(d.Kind) + " " + d.Label(), kind: safe(d.Kind),
				Verdict: Verdict{CatUnclassified, "an attempt of a kind this report does not know"}})
		}
	}
	held := map[string]bool{}
	for _, v := range vs {
		if v.Held() {
			held[v.entry] = true
		}
	}
	var a AllowLists
	seen := map[string]bool{}
	for _, v := range vs {
		switch {
		case v.Held():
			if !seen["held "+v.entry] {
				a.Held = append(a.Held, HeldEntry{Entry: v.entry, Kind: v.kind, Verdict: v.Verdict})
			}
			seen["held "+v.entry] = true
		case held[v.entry] || seen[v.entry]:
		case v.left:
			a.Left = append(a.Left, v.entry)
		case v.isName:
			a.Domains = append(a.Domains, v.entry)
		default:
			a.Addresses = append(a.Addresses, v.entry)
		}
		seen[v.entry] = true
	}
	return a
}

// Write prints the report and the allow lists.
func (r Report) Write(w io.Writer, source string) {
	fmt.Fprintf(w, "Blocked egress in %s: %d attempts from %d sandboxes", source, r.Attempts, r.Sandboxes)
	if r.NotReporting > 0 {
		fmt.Fprintf(w, " (%d more sandboxes on backends that do not report blocked egress)", r.NotReporting)
	}
	fmt.Fprintln(w)
	if r.Skipped > 0 {
		fmt.Fprintf(w, "%d lines were not audit records and were skipped.\n", r.Skipped)
	}
	if len(r.Destinations) == 0 {
		fmt.Fprintln(w, "Nothing was attempted: no allow list is needed.")
		return
	}
	fmt.Fprintf(w, "\n  %8s  %-4s  %s\n", "ATTEMPTS", "KIND", "DESTINATION")
	for _, d := range r.Destinations {
		fmt.Fprintf(w, "  %8d  %-4s  %s\n", d.Count, d.Kind, d.Label())
	}
	if r.Unlisted > 0 {
		fmt.Fprintf(w, "  %8d  more, to destinations past those each sandbox lists: counted, not listed\n", r.Unlisted)
	}
	a := r.Allow()
	fmt.Fprintln(w)
	writeList(w, policies.Expand("${domain_allowlist} (domain names, IP addresses and CIDR blocks)"), append(quoteAll(a.Domains, "DNS name"), quoteAll(a.Addresses, "")...))
	var cidrs []string
	for _, ip := range a.Addresses {
		cidrs = append(cidrs, netip.PrefixFrom(netip.MustParseAddr(ip), netip.MustParseAddr(ip).BitLen()).String())
	}
	writeList(w, "Modal (CIDR blocks only)", quoteAll(cidrs, ""))
	if len(a.Domains) > 0 {
		fmt.Fprintf(w, "# Modal takes no DNS names: %s are left out of its list; resolve them to the blocks\n# their services publish, or use %s, which match names.\n", strings.Join(a.Domains, ", "), policies.Expand("${domain_allowlist|or}"))
	}
	if len(a.Held) > 0 {
		fmt.Fprintln(w, "# Held back from the lists: these reach a cloud's metadata service, this host, its networks or")
		fmt.Fprintln(w, "# other places that are not the Internet. Allowing one opens that place to the sandbox: add it")
		fmt.Fprintln(w, "# by hand only if that is what you mean.")
		for _, h := range a.Held {
			fmt.Fprintf(w, "#   WARNING %s (%s): %s\n", h.Entry, h.Kind, h.Verdict)
		}
	}
	if len(a.Left) > 0 {
		fmt.Fprintf(w, "# Unclassified, not domain names an allow list takes, left out: %s\n", strings.Join(a.Left, ", "))
	}
	fmt.Fprintln(w, "# DNS names were refused at the resolver, so the sandbox never learned their addresses\n# or tried them: with the names allowed, the code may need more (run learn again).")
}

func quoteAll(xs []string, note string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = strconv.Quote(x) + ","
		if note != "" {
			out[i] += " # " + note
		}
	}
	return out
}

func writeList(w io.Writer, title string, entries []string) {
	fmt.Fprintf(w, "# Allow list for %s, under egress = \"deny\":\n", title)
	if len(entries) == 0 {
		fmt.Fprintln(w, "allow = []")
		return
	}
	fmt.Fprintln(w, "allow = [")
	for _, e := range entries {
		fmt.Fprintf(w, "  %s\n", e)
	}
	fmt.Fprintln(w, "]")
}
