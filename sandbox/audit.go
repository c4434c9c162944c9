package sandbox

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Audit events.
const (
	EventCreated       = "created"        // a sandbox was provisioned
	EventExec          = "exec"           // a command (run, run_code, upload) ended with an exit code
	EventTimeout       = "timeout"        // CreateTimeout or ExecutionTimeout
	EventLimitExceeded = "limit_exceeded" // ResourceLimitExceeded (limit names the cap)
	EventKilled        = "killed"         // removed by Close (reason: closed, cancelled, panic, client closed), or a command cut short by cancellation
	EventExpired       = "expired"        // the sandbox's lifetime ended (SandboxGone), or reap removed an expired one
	EventGone          = "gone"           // the sandbox disappeared for another reason (SandboxGone)
	EventOrphaned      = "orphaned"       // teardown not confirmed within the grace, or reap removed a dead owner's sandbox
	EventRefused       = "refused"        // refused before provisioning: spec, sha256, tenant, policy, isolation, backend
	EventFailed        = "failed"         // any other failure (backend unavailable, a classed error of another kind)
)

// Record is one audit event. Every record carries the sandbox's identity,
// tenancy, the policy in effect and its enforcement; never a secret value
// (secret names only), and every string is redacted against the secrets
// before it is written.
type Record struct {
	Time            time.Time            `json:"time"`
	Event           string               `json:"event"`
	Op              string               `json:"op,omitempty"` // open, run, run_code, upload, close, reap
	SandboxID       *string              `json:"sandbox_id"`   // null when nothing was provisioned
	Backend         string               `json:"backend"`
	Tier            model.Tier           `json:"tier"`
	TenantID        string               `json:"tenant_id"`
	SessionID       string               `json:"session_id"`
	Template        string               `json:"template"`
	SpecSHA256      string               `json:"spec_sha256,omitempty"`
	Labels          map[string]string    `json:"labels"` // the spec's: the template's, the tenant's and sandboxio.tenant_id/session_id/template
	Network         *model.NetworkPolicy `json:"network"`
	Caps            *model.Caps          `json:"caps"`
	DiskCapStrategy string               `json:"disk_cap_strategy"`
	PidsCapStrategy string               `json:"pids_cap_strategy"`
	Timeouts        Timeouts             `json:"timeouts"`
	// BlockedEgress counts egress attempts the backend blocked; null where
	// the backend does not report them (Docker's network mode none drops
	// packets without counting).
	BlockedEgress *int64   `json:"blocked_egress"`
	ExitCode      *int     `json:"exit_code"`
	DurationMS    float64  `json:"duration_ms"`
	AgeMS         *float64 `json:"sandbox_age_ms,omitempty"`
	SecretNames   []string `json:"secret_names"`
	Command       []string `json:"command,omitempty"`
	Lang          string   `json:"lang,omitempty"`
	CodeSHA256    string   `json:"code_sha256,omitempty"`
	Path          string   `json:"path,omitempty"`
	Bytes         *int     `json:"bytes,omitempty"`
	Reason        string   `json:"reason,omitempty"`
	DryRun        bool     `json:"dry_run,omitempty"`
	ErrorClass    string   `json:"error_class,omitempty"`
	Rule          string   `json:"rule,omitempty"`
	Attribute     string   `json:"attribute,omitempty"`
	Limit         string   `json:"limit,omitempty"`
	Error         string   `json:"error,omitempty"`
	Warnings      []string `json:"warnings,omitempty"`
}

// Timeouts are the bounds in effect, in seconds.
type Timeouts struct {
	CreateSeconds   float64 `json:"create_seconds"`
	CallSeconds     float64 `json:"call_seconds"` // the bound of this call (exec events) or the sandbox's default
	LifetimeSeconds float64 `json:"lifetime_seconds"`
}

// AuditLog writes one JSON object per line. It is safe for concurrent use;
// each record is written with one Write call.
type AuditLog struct {
	mu sync.Mutex
	w  io.Writer
	fn func(Record)
}

// NewAuditLog returns an audit log writing JSON lines to w (a file, or
// os.Stdout), and calling fn, if not nil, with every record.
func NewAuditLog(w io.Writer, fn func(Record)) *AuditLog {
	if w == nil && fn == nil {
		return nil
	}
	return &AuditLog{w: w, fn: fn}
}

func (a *AuditLog) emit(r Record, secrets Secrets) {
	if a == nil {
		return
	}
	if r.Time.IsZero() {
		r.Time = time.Now().UTC()
	}
	if r.SecretNames == nil {
		r.SecretNames = []string{}
	}
	if r.Labels == nil {
		r.Labels = map[string]string{}
	}
	// Field by field first: a value that JSON would escape could not be
	// found in the encoded line. The line is redacted again as a whole.
	r = redactRecord(r, secrets)
	if a.fn != nil {
		a.fn(r)
	}
	if a.w == nil {
		return
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return
	}
	line := secrets.Redact(buf.Bytes())
	a.mu.Lock()
	_, _ = a.w.Write(line)
	a.mu.Unlock()
}

// redactRecord redacts every free-text field of a record.
func redactRecord(r Record, s Secrets) Record {
	if s.Len() == 0 {
		return r
	}
	r.Error = s.RedactString(r.Error)
	r.TenantID = s.RedactString(r.TenantID)
	r.SessionID = s.RedactString(r.SessionID)
	r.Template = s.RedactString(r.Template)
	r.Reason = s.RedactString(r.Reason)
	if r.Command != nil {
		cmd := make([]string, len(r.Command))
		for i, a := range r.Command {
			cmd[i] = s.RedactString(a)
		}
		r.Command = cmd
	}
	labels := make(map[string]string, len(r.Labels))
	for k, v := range r.Labels {
		labels[s.RedactString(k)] = s.RedactString(v)
	}
	r.Labels = labels
	r.Path = s.RedactString(r.Path)
	if r.Warnings != nil {
		ws := make([]string, len(r.Warnings))
		for i, w := range r.Warnings {
			ws[i] = s.RedactString(w)
		}
		r.Warnings = ws
	}
	return r
}

// auditCommand bounds what an audit record keeps of a command line. Each
// argument is redacted before it is cut, so that no part of a value survives.
func auditCommand(cmd []string, secrets Secrets) []string {
	const maxArgs, maxArg = 32, 256
	out := make([]string, 0, min(len(cmd), maxArgs+1))
	for i, a := range cmd {
		if i == maxArgs {
			out = append(out, "…("+itoa(len(cmd)-maxArgs)+" more arguments)")
			break
		}
		a = secrets.RedactString(a)
		if len(a) > maxArg {
			a = strings.ToValidUTF8(a[:maxArg], "") + "…(" + itoa(len(a)) + " bytes)"
		}
		out = append(out, a)
	}
	return out
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func seconds(d time.Duration) float64 { return d.Seconds() }

func ptr[T any](v T) *T { return &v }
