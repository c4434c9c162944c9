// Package egressreport reads the blocked egress recorded in an audit log
// (JSON lines, as sandbox.AuditLog writes them) and turns it into a summary
// and paste-ready allow lists: what `sandboxio egress report` prints.
//
// Every name and address in the log was chosen by sandboxed code. Only
// entries that are plain domain names, IP addresses (in canonical form) go
// into an allow list, so nothing pasted can carry HCL syntax (a quote, an
// interpolation) or a terminal control sequence; the rest are listed in the
// summary as the audit record escaped them, and said to be left out.
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
	Left      []string // names recorded that are no domain an allow list takes
}

// Allow derives the allow-list entries from a report.
func (r Report) Allow() AllowLists {
	var a AllowLists
	seen := map[string]bool{}
	for _, d := range r.Destinations {
		switch d.Kind {
		case model.EgressKindDNS, model.EgressKindTLS, model.EgressKindHTTP:
			// A name looked up, or sent first on a connection (TLS server
			// name, HTTP Host): the connection's address is listed by its
			// tcp entry.
			if Domain(d.Name) && !seen[d.Name] {
				a.Domains = append(a.Domains, d.Name)
			} else if !Domain(d.Name) {
				a.Left = append(a.Left, safe(d.Name))
			}
			seen[d.Name] = true
		default:
			ip, err := netip.ParseAddr(d.Address)
			if err != nil || seen[ip.String()] || !ip.IsGlobalUnicast() && !ip.IsPrivate() {
				continue
			}
			seen[ip.String()] = true
			a.Addresses = append(a.Addresses, ip.Unmap().String())
		}
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
	writeList(w, "E2B and Vercel (domain names, IP addresses and CIDR blocks)", append(quoteAll(a.Domains, "DNS name"), quoteAll(a.Addresses, "")...))
	var cidrs []string
	for _, ip := range a.Addresses {
		cidrs = append(cidrs, netip.PrefixFrom(netip.MustParseAddr(ip), netip.MustParseAddr(ip).BitLen()).String())
	}
	writeList(w, "Modal (CIDR blocks only)", quoteAll(cidrs, ""))
	if len(a.Domains) > 0 {
		fmt.Fprintf(w, "# Modal takes no DNS names: %s are left out of its list; resolve them to the blocks\n# their services publish, or use E2B or Vercel, which match names.\n", strings.Join(a.Domains, ", "))
	}
	if len(a.Left) > 0 {
		fmt.Fprintf(w, "# Not domain names an allow list takes, left out: %s\n", strings.Join(a.Left, ", "))
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
