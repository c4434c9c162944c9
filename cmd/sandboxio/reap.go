package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/safefile"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
	"github.com/sandboxio/terraform-provider-sandboxio/sandbox"
)

const reapExitCodesHelp = `Exit codes:
  0   done (also when there was nothing to reap)
  2   usage or input error: bad flags or arguments
  64  ConfigurationError: a malformed --backend DSN
  65  CapabilityNotSupported: the backend is not in this build, or has no reaper
  70  the backend failed or cannot be reached (the Docker daemon is down, say)`

func init() {
	register(&command{
		name:    "reap",
		summary: "remove sandboxes left behind: lifetime passed, or owner process gone",
		usage:   "reap [flags]",
		help: `Removes the sandboxio sandboxes that nothing will close any more: those whose lifetime has
passed, and those whose owner process is verifiably gone (on this host, in this boot, in the
same PID namespace). On Docker only containers that carry this host's mark are removed.`,
		example: `sandboxio reap --dry-run                    # list what would be removed
sandboxio reap --label sandboxio.tenant_id=acme`,
		exitCodes: reapExitCodesHelp,
		setup:     setupReap,
	})
}

// reapFlags are the flags of reap.
type reapFlags struct {
	dryRun  bool
	labels  kvFlag
	backend string
	audit   string
	asJSON  bool
}

func setupReap(fs *pflag.FlagSet) runFunc {
	f := &reapFlags{}
	fs.BoolVar(&f.dryRun, "dry-run", false, "list what would be removed, remove nothing")
	fs.Var(&f.labels, "label", "reap only sandboxes carrying the label `KEY=VALUE`; repeatable")
	fs.StringVar(&f.backend, "backend", "", "the backend `DSN` to sweep (default: every backend of this build that lists)")
	fs.StringVar(&f.audit, "audit", "", "append one JSON audit record per sandbox to `FILE` (- for standard output)")
	fs.BoolVar(&f.asJSON, "json", false, "print the sandboxes as a JSON array")
	return f.run
}

func (f *reapFlags) run(ctx context.Context, e *env, args []string) int {
	if len(args) > 0 {
		fmt.Fprintf(e.stderr, "sandboxio reap: unexpected argument %q\n", args[0])
		return exitUsage
	}
	auditOut, closeAudit, err := openAudit(f.audit, e.stdout)
	if err != nil {
		fmt.Fprintf(e.stderr, "sandboxio reap: audit: %v\n", err)
		return exitUsage
	}
	defer closeAudit()
	client, err := sandbox.New(ctx, sandbox.Config{Audit: sandbox.NewAuditLog(auditOut, nil)})
	if err != nil {
		fmt.Fprintf(e.stderr, "sandboxio reap: %s\n", classLine(err))
		return exitFor(err)
	}
	reaped, err := client.Reap(ctx, sandbox.ReapOptions{Backend: f.backend, DryRun: f.dryRun, Labels: f.labels})
	sort.Slice(reaped, func(i, j int) bool { return reaped[i].ID < reaped[j].ID })
	if f.asJSON {
		printReapedJSON(e.stdout, reaped, f.dryRun)
	} else {
		printReaped(e.stdout, reaped, f.dryRun)
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "sandboxio reap: %s\n", classLine(err))
		return exitFor(err)
	}
	counts := map[string]int{}
	left := 0
	for _, r := range reaped {
		if r.Left != "" {
			left++
			continue
		}
		counts[r.Reason]++
	}
	if left > 0 {
		fmt.Fprintf(e.stderr, "sandboxio reap: left %d sandbox(es) that sandboxio did not create on this host (see above)\n", left)
	}
	switch n := len(reaped) - left; {
	case n == 0 && left > 0:
		fmt.Fprintf(e.stderr, "sandboxio reap: nothing else to reap\n")
	case n == 0:
		fmt.Fprintf(e.stderr, "sandboxio reap: nothing to reap\n")
	case f.dryRun:
		fmt.Fprintf(e.stderr, "sandboxio reap: would remove %d sandbox(es) (%s); run without --dry-run to remove them\n", n, reasons(counts))
	default:
		fmt.Fprintf(e.stderr, "sandboxio reap: removed %d sandbox(es) (%s)\n", n, reasons(counts))
	}
	return exitOK
}

// printReapedJSON prints the sandboxes reaped (or, with dryRun, those that
// would be) as a JSON array.
func printReapedJSON(w io.Writer, reaped []sandbox.Reaped, dryRun bool) {
	type row struct {
		ID        string            `json:"id"`
		Backend   string            `json:"backend"`
		TenantID  string            `json:"tenant_id"`
		SessionID string            `json:"session_id"`
		Template  string            `json:"template"`
		Reason    string            `json:"reason"`
		Removed   bool              `json:"removed"`
		Left      string            `json:"left,omitempty"`
		Labels    map[string]string `json:"labels"`
	}
	rows := make([]row, 0, len(reaped))
	for _, r := range reaped {
		rows = append(rows, row{ID: r.ID, Backend: r.Backend, TenantID: r.TenantID, SessionID: r.SessionID,
			Template: r.Template, Reason: r.Reason, Removed: !dryRun && r.Left == "", Left: r.Left, Labels: r.Labels})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(rows)
}

// printReaped prints one line per sandbox reaped (or, with dryRun, that
// would be).
func printReaped(w io.Writer, reaped []sandbox.Reaped, dryRun bool) {
	verb := "removed"
	if dryRun {
		verb = "would remove"
	}
	for _, r := range reaped {
		verb := verb
		tenant, session, reason := orDash(r.TenantID), orDash(r.SessionID), r.Reason
		if r.Left != "" {
			verb, reason = "left", reason+"; "+r.Left
		}
		if r.Labels[bindingLabel] == "name" && (r.TenantID == "" || r.SessionID == "") {
			// A claimed warm sandbox (Docker): its tenant and session are
			// in its name, which only a sweep by tenant reads back.
			tenant, session = orUnknown(r.TenantID), orUnknown(r.SessionID)
			reason += "; bound by its name: sweep with --label " + model.LabelTenantID + "=ID to see its tenant and session"
		}
		fmt.Fprintf(w, "%s %s backend=%s tenant=%s session=%s template=%s (%s)\n",
			verb, shortID(r.ID), r.Backend, tenant, session, orDash(r.Template), reason)
	}
}

// bindingLabel marks a sandbox whose tenant and session are bound by
// something other than its labels ("name": a claimed warm sandbox on
// Docker, whose name carries them).
const bindingLabel = model.ReservedLabelPrefix + "binding"

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// openAudit opens the --audit destination: none for "", stdout for "-",
// else the file, created or appended to. close closes what was opened.
func openAudit(path string, stdout io.Writer) (out io.Writer, closeFn func(), err error) {
	switch path {
	case "":
		return nil, func() {}, nil
	case "-":
		return stdout, func() {}, nil
	}
	// Opened once, never through a symlink: the watcher that writes the
	// last record of a killed run reopens it only when it is still this
	// file (see sandbox.AuditLog).
	f, err := safefile.OpenAppend(path, 0o600)
	if err != nil {
		return nil, func() {}, err
	}
	return f, func() { _ = f.Close() }, nil
}

func reasons(counts map[string]int) string {
	parts := make([]string, 0, len(counts))
	for r, n := range counts {
		parts = append(parts, fmt.Sprintf("%d %s", n, r))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
