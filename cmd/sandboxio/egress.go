package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/pflag"

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
		help: `Reads an audit log (sandboxio run --audit FILE; - reads standard input) and prints the
egress its sandboxes attempted and were refused (DNS names, addresses and ports, with
counts), then an allow list to paste into a template. Metadata, loopback, private and
local names and addresses are held back, each with a warning naming why.`,
		example: `sandboxio run --spec learn.json --tenant acme --session s1 --audit audit.jsonl -- python3 app.py
sandboxio egress report audit.jsonl`,
		exitCodes: egressExitCodesHelp,
		setup:     func(*pflag.FlagSet) runFunc { return runEgressReport },
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
