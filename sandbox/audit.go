package sandbox

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker/egress"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/safefile"
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
	EventOrphaned      = "orphaned"       // teardown not confirmed within the grace, or reap (or the owner's watcher, op watch) removed a dead owner's sandbox
	EventRefused       = "refused"        // refused before provisioning: spec, sha256, tenant, policy, isolation, backend
	EventFailed        = "failed"         // any other failure (backend unavailable, a classed error of another kind)
	EventBrokered      = "brokered"       // a request the broker wrote a secret into, or refused (op broker; see Record.Brokered)
)

// Record is one audit event. Every record carries the sandbox's identity,
// tenancy, the policy in effect and its enforcement; never a secret value
// (secret names only), and every string is redacted against the secrets
// before it is written.
type Record struct {
	Time            time.Time            `json:"time"`
	Event           string               `json:"event"`
	Op              string               `json:"op,omitempty"` // open, run, run_code, upload, close, reap, watch (written by the watcher of a process that died: see AuditLog)
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
	// BlockedEgress counts the egress attempts the backend blocked in this
	// sandbox so far; null where the backend does not report them (Docker
	// reports them under runc, with deny or learn; see package docker).
	BlockedEgress *int64 `json:"blocked_egress"`
	// BlockedEgressDestinations are the first distinct destinations of
	// those attempts (at most 32), each with its count; names and addresses
	// chosen by the sandboxed code, redacted like every string here.
	BlockedEgressDestinations []model.BlockedDestination `json:"blocked_egress_destinations,omitempty"`
	// AllowedEgress counts the connections and flows an egress gateway let
	// out so far, with their first distinct destinations (at most 32);
	// absent where no gateway forwards for the sandbox.
	AllowedEgress             *int64                     `json:"allowed_egress,omitempty"`
	AllowedEgressDestinations []model.BlockedDestination `json:"allowed_egress_destinations,omitempty"`
	ExitCode                  *int                       `json:"exit_code"`
	DurationMS                float64                    `json:"duration_ms"`
	AgeMS                     *float64                   `json:"sandbox_age_ms,omitempty"`
	SecretNames               []string                   `json:"secret_names"`
	Command                   []string                   `json:"command,omitempty"`
	Lang                      string                     `json:"lang,omitempty"`
	CodeSHA256                string                     `json:"code_sha256,omitempty"`
	Path                      string                     `json:"path,omitempty"`
	Bytes                     *int                       `json:"bytes,omitempty"`
	Reason                    string                     `json:"reason,omitempty"`
	DryRun                    bool                       `json:"dry_run,omitempty"`
	ErrorClass                string                     `json:"error_class,omitempty"`
	Rule                      string                     `json:"rule,omitempty"`
	Attribute                 string                     `json:"attribute,omitempty"`
	Limit                     string                     `json:"limit,omitempty"`
	Error                     string                     `json:"error,omitempty"`
	Warnings                  []string                   `json:"warnings,omitempty"`
	// Source says how an open got its sandbox: SourcePool (claimed from a
	// warm pool; ClaimMS is how long the claim took on the backend) or
	// SourceCold (created for the open).
	Source  string   `json:"source,omitempty"`
	ClaimMS *float64 `json:"claim_ms,omitempty"`
	// Hook is the pre-execution hook's decision on a run or run_code call:
	// the rules that found something, what each did, and the analysers'
	// finding IDs; never the code.
	Hook *HookRecord `json:"hook,omitempty"`
	// Brokered is one request through the egress gateway's secret broker
	// (event brokered): the secret written into it, the host, the method
	// and the status; never the value.
	Brokered *model.BrokeredRequest `json:"brokered,omitempty"`
}

// Timeouts are the bounds in effect, in seconds.
type Timeouts struct {
	CreateSeconds   float64 `json:"create_seconds"`
	CallSeconds     float64 `json:"call_seconds"` // the bound of this call (exec events) or the sandbox's default
	LifetimeSeconds float64 `json:"lifetime_seconds"`
}

// AuditLog writes one JSON object per line, each in one Write call; it is safe
// for concurrent use. When it writes to a regular file, a backend's watcher
// (Docker) appends a sandbox's final record if the caller dies without closing
// it; the record is rendered and redacted here at create, and the watcher opens
// the file by path only while it is still the same file (device and inode).
type AuditLog struct {
	mu   sync.Mutex
	w    io.Writer
	fn   func(Record)
	path string // of the file w writes to, for the watcher; "" when w is no regular file
	id   string // the identity of that file (safefile.ID), which the watcher checks
}

// NewAuditLog returns an audit log writing JSON lines to w (a file, or
// os.Stdout), and calling fn, if not nil, with every record.
func NewAuditLog(w io.Writer, fn func(Record)) *AuditLog {
	if w == nil && fn == nil {
		return nil
	}
	a := &AuditLog{w: w, fn: fn}
	a.path, a.id = filePath(w)
	return a
}

// filePath is the absolute path of the regular file w writes to, checked to
// be the same file, and that file's identity; "" when there is none.
func filePath(w io.Writer) (string, string) {
	f, ok := w.(*os.File)
	if !ok || f == nil {
		return "", ""
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || safefile.ID(st) == "" {
		return "", ""
	}
	// The name the file was opened by may be relative, or /dev/stdout.
	p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	if err != nil {
		if p, err = filepath.Abs(f.Name()); err != nil {
			return "", ""
		}
	}
	if pst, err := os.Lstat(p); err != nil || !os.SameFile(st, pst) {
		return "", ""
	}
	return p, safefile.ID(st)
}

func (a *AuditLog) emit(r Record, secrets Secrets) {
	if a == nil {
		return
	}
	r, line := a.render(r, secrets)
	if a.fn != nil {
		a.fn(r)
	}
	if a.w == nil || line == nil {
		return
	}
	a.mu.Lock()
	_, _ = a.w.Write(line)
	a.mu.Unlock()
}

// render completes and redacts a record, and encodes it as one line (nil
// if it cannot be encoded).
func (a *AuditLog) render(r Record, secrets Secrets) (Record, []byte) {
	if r.Time.IsZero() {
		r.Time = time.Now().UTC()
	}
	if r.SecretNames == nil {
		r.SecretNames = []string{}
	}
	if r.Labels == nil {
		r.Labels = map[string]string{}
	}
	// Every string field is redacted before encoding: replacing bytes of
	// the encoded line would also hit numbers, timestamps and JSON syntax
	// (a secret "0" turned `"create_seconds":0` into invalid JSON), and a
	// value that JSON escapes could not be found there anyway.
	r = redactRecord(r, secrets)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return r, nil
	}
	return r, redactLine(buf.Bytes(), secrets)
}

// trail hands the sandbox's backend the final records its watcher writes
// should this process die without closing the sandbox (see AuditLog).
func (c *Client) trail(s *Sandbox) {
	a := c.cfg.Audit
	t, ok := s.b.(backends.Trailer)
	if a == nil || a.path == "" || !ok {
		return
	}
	const gone = "owner gone: the process that opened the sandbox ended without closing it (killed or crashed); "
	line := func(event, reason string) []byte {
		r := s.record(event, "watch")
		r.Time, r.AgeMS, r.Reason = backends.TrailTime, nil, gone+reason
		// Rendered now, written later by a watcher that observes nothing:
		// a count of now would be taken for the final one.
		r.BlockedEgress, r.BlockedEgressDestinations = nil, nil
		r.AllowedEgress, r.AllowedEgressDestinations = nil, nil
		_, b := a.render(r, s.secrets)
		return b
	}
	tr := backends.Trail{
		Path:      a.path,
		FileID:    a.id,
		Removed:   line(EventOrphaned, "its watcher removed the sandbox"),
		Unremoved: line(EventOrphaned, "its watcher could not remove the sandbox; its lifetime ends it, or `sandboxio reap` removes it"),
		Gone:      line(EventGone, "the sandbox had already been removed when its watcher looked"),
		Expired:   line(EventExpired, "the sandbox's lifetime had ended when its watcher looked"),
		Expires:   s.info.Expires,
	}
	for _, v := range s.secrets.values() {
		// A value made only of a timestamp's characters could occur in the
		// time the watcher writes; it writes [REDACTED] instead, as
		// redactLine would.
		if strings.Trim(v, "0123456789-:.TZ+") == "" {
			tr.RedactTime = true
		}
	}
	if tr.Removed == nil || tr.Unremoved == nil || tr.Gone == nil || tr.Expired == nil {
		return
	}
	t.SetTrail(tr)
}

// redactRecord redacts every string field of a record, nested ones
// included (labels, keys and values; the network's allow list; command;
// warnings; secret names), so that the encoded record holds no secret value
// in any string. Numbers and times are not strings and are left alone. The
// record's slices, maps and pointers are copied, never modified in place.
func redactRecord(r Record, s Secrets) Record {
	if s.Len() == 0 {
		return r
	}
	str := s.RedactString
	list := func(xs []string) []string {
		if xs == nil {
			return nil
		}
		out := make([]string, len(xs))
		for i, x := range xs {
			out[i] = str(x)
		}
		return out
	}
	r.Event = str(r.Event)
	r.Op = str(r.Op)
	if r.SandboxID != nil {
		r.SandboxID = ptr(str(*r.SandboxID))
	}
	r.Backend = str(r.Backend)
	r.Tier = model.Tier(str(string(r.Tier)))
	r.TenantID = str(r.TenantID)
	r.SessionID = str(r.SessionID)
	r.Template = str(r.Template)
	r.SpecSHA256 = str(r.SpecSHA256)
	if r.Labels != nil {
		labels := make(map[string]string, len(r.Labels))
		for k, v := range r.Labels {
			labels[str(k)] = str(v)
		}
		r.Labels = labels
	}
	if r.Network != nil {
		n := *r.Network
		n.Egress = str(n.Egress)
		n.Allow = list(n.Allow)
		r.Network = &n
	}
	dests := func(in []model.BlockedDestination) []model.BlockedDestination {
		if in == nil {
			return nil
		}
		ds := make([]model.BlockedDestination, len(in))
		for i, d := range in {
			d.Kind, d.Name, d.Address = str(d.Kind), redactName(d.Name, s), str(d.Address)
			ds[i] = d
		}
		return ds
	}
	r.BlockedEgressDestinations = dests(r.BlockedEgressDestinations)
	r.AllowedEgressDestinations = dests(r.AllowedEgressDestinations)
	r.DiskCapStrategy = str(r.DiskCapStrategy)
	r.PidsCapStrategy = str(r.PidsCapStrategy)
	r.SecretNames = list(r.SecretNames)
	r.Command = list(r.Command)
	r.Lang = str(r.Lang)
	r.CodeSHA256 = str(r.CodeSHA256)
	r.Path = str(r.Path)
	r.Reason = str(r.Reason)
	r.ErrorClass = str(r.ErrorClass)
	r.Rule = str(r.Rule)
	r.Attribute = str(r.Attribute)
	r.Limit = str(r.Limit)
	r.Error = str(r.Error)
	r.Warnings = list(r.Warnings)
	if r.Brokered != nil {
		b := *r.Brokered
		b.Secret, b.Host, b.Method = str(b.Secret), str(b.Host), str(b.Method)
		r.Brokered = &b
	}
	return r
}

// redactName redacts a DNS name the egress observer recorded. Sandboxed code
// can put a secret it was given into a name it looks up; the observer
// records names in lower case with some bytes escaped, so each secret is
// looked for as it is and as the observer would have written it, ignoring
// case. (A secret the code encodes first cannot be recognised: the names are
// the code's choice.)
func redactName(name string, s Secrets) string {
	name = s.RedactString(name)
	lower := asciiLower(name)
	for _, v := range s.sortedValues() {
		for _, form := range []string{asciiLower(v), egress.EscapeName(v)} {
			for from := 0; form != "" && from < len(lower); {
				i := strings.Index(lower[from:], form)
				if i < 0 {
					break
				}
				i += from
				name = name[:i] + Redacted + name[i+len(form):]
				lower = lower[:i] + Redacted + lower[i+len(form):]
				from = i + len(Redacted)
			}
		}
	}
	return name
}

func asciiLower(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, s)
}

// redactLine is the backstop after encoding. redactRecord leaves no secret
// in a string field; what it cannot reach is a string the encoder makes
// itself, such as the timestamp (a secret "0" occurs in every one). Every
// JSON string literal of the line that still holds a secret value, once
// decoded, is replaced whole by "[REDACTED]": the line stays valid JSON,
// with its numbers and syntax untouched. An object key is replaced only if
// it is not one of the record's own field names.
func redactLine(line []byte, s Secrets) []byte {
	if s.Len() == 0 {
		return line
	}
	var out []byte
	last := 0
	for i := 0; i < len(line); i++ {
		if line[i] != '"' {
			continue
		}
		// Outside string literals, JSON has no quote: this one opens a
		// literal. Find its closing quote.
		j, escaped := i+1, false
		for ; j < len(line) && line[j] != '"'; j++ {
			if line[j] == '\\' {
				escaped = true
				j++
			}
		}
		if j >= len(line) {
			// Not what the encoder writes; write nothing rather than risk it.
			return []byte(`{"event":"` + EventFailed + `","error":"audit record could not be checked for secrets"}` + "\n")
		}
		lit := line[i : j+1]
		var v string
		if escaped {
			if json.Unmarshal(lit, &v) != nil {
				v = string(lit) // undecodable: compare the raw form
			}
		} else {
			v = string(lit[1 : len(lit)-1])
		}
		isKey := j+1 < len(line) && line[j+1] == ':'
		if s.Contains(v) && (!isKey || !auditKeys[v]) {
			out = append(out, line[last:i]...)
			out = append(out, `"`+Redacted+`"`...)
			last = j + 1
		}
		i = j
	}
	if out == nil {
		return line
	}
	return append(out, line[last:]...)
}

// auditKeys are the JSON field names of a record and of its nested structs:
// fixed by sandboxio, so never a secret value whatever the secrets are.
var auditKeys = func() map[string]bool {
	keys := map[string]bool{}
	var add func(t reflect.Type)
	add = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || t == reflect.TypeOf(time.Time{}) {
			return
		}
		for i := range t.NumField() {
			f := t.Field(i)
			if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
				keys[name] = true
			}
			add(f.Type)
		}
	}
	add(reflect.TypeOf(Record{}))
	return keys
}()

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
