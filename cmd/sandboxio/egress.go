package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/egressreport"
)

const egressExitCodesHelp = `Exit codes:
  0   done (also when nothing was attempted)
  2   usage or input error: no file, or one that cannot be read`

func init() {
	register(&command{
		name:    "egress report",
		summary: "what sandboxes tried to reach (learn or deny), and a paste-ready allow list",
		usage:   "egress report AUDIT.jsonl",
		help: `Reads an audit log (sandboxio run --audit FILE, or the Go API's AuditLog) and prints the
egress its sandboxes attempted and were refused: DNS names asked for, addresses and ports
connected to (with the TLS server name or HTTP Host sent there), with counts, added up over every sandbox in the log. Then it prints an allow
list to paste into a template on a backend that enforces one: domain names and addresses
for the backends that match names, CIDR blocks for those that take blocks only (the names
left out are said). Only plain domain names and addresses are put into a list, and not all of them: names
and addresses that reach a cloud's metadata service (169.254.169.254, metadata.google.internal,
...), loopback, private and other special-purpose ranges, the Docker bridge and this host's
other networks, reverse-DNS names (in-addr.arpa, ip6.arpa) and names for local networks
(.internal, .local, ...) or under no public top-level domain are held back, each printed after
the lists with a warning naming why; so is anything the report cannot classify.

Blocked egress is recorded by Docker sandboxes on the runc runtime, under egress = "deny"
and egress = "learn" alike; other backends do not report it, and their sandboxes are
counted as not reporting. - reads the log from standard input.

  sandboxio run --spec learn.json --tenant acme --session s1 --audit audit.jsonl -- python3 app.py
  sandboxio egress report audit.jsonl`,
		exitCodes: egressExitCodesHelp,
		setup:     func(*flag.FlagSet) runFunc { return runEgressReport },
	})
}

func runEgressReport(_ context.Context, e *env, args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(e.stderr, "sandboxio egress report: give one audit log (JSON lines), or - for standard input")
		return exitUsage
	}
	r := e.stdin
	if args[0] != "-" {
		f, err := os.Open(args[0])
		if err != nil {
			fmt.Fprintf(e.stderr, "sandboxio egress report: %v\n", err)
			return exitUsage
		}
		defer f.Close()
		r = f
	}
	rep, err := egressreport.Read(r)
	if err != nil {
		fmt.Fprintf(e.stderr, "sandboxio egress report: %v\n", err)
		return exitUsage
	}
	// This host's networks (its Docker bridges among them) are held back
	// from the lists; when they cannot be read, every address is.
	rep.HostNetworks, rep.HostNetworksErr = egressreport.LocalNetworks()
	rep.Write(e.stdout, args[0])
	return exitOK
}
