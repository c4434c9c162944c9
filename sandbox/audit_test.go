package sandbox

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/safefile"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// stringsIn collects every string of a decoded JSON value, object keys
// included.
func stringsIn(v any, out *[]string) {
	switch x := v.(type) {
	case string:
		*out = append(*out, x)
	case []any:
		for _, e := range x {
			stringsIn(e, out)
		}
	case map[string]any:
		for k, e := range x {
			*out = append(*out, k)
			stringsIn(e, out)
		}
	}
}

// Short and numeric secrets ("0", "1") occur inside numbers, timestamps and
// hashes. Redacting the encoded line used to replace those bytes too and
// write invalid JSON ("create_seconds":[REDACTED]). Open now refuses values
// that short (SBX-RUN-002), but the audit log must stay sound with any
// Secrets: the records of a session are written again with such values.
// Every line must parse, keep its numbers, and hold no secret inside any
// string.
func TestAudit_ShortSecretsKeepJSONValid(t *testing.T) {
	values := map[string]string{"ZERO": "0", "ONE": "1", "TENANT": "acme", "LONG": canary}
	withShort := template(t, withSecretNames("ZERO", "ONE", "TENANT", "LONG"))
	shortSpec, shortSum := tenantSpec(t, withShort, "acme", "s-10")
	c0, _ := newClient(t)
	withFake(c0, &fakeBackend{})
	_, err := c0.Open(t.Context(), Request{Spec: shortSpec, SpecSHA256: shortSum, TenantID: "acme", SessionID: "s-10", Secrets: NewSecrets(values)})
	wantClass(t, err, model.ErrConfiguration, rules.ShortSecret)

	tpl := template(t, withSecretNames("LONG"), func(tp *inputs.Template) {
		tp.Labels["team"] = "acme-10"
	})
	spec, sum := tenantSpec(t, tpl, "acme", "s-10")
	f := &fakeBackend{runOut: []byte("out 0 1 acme " + canary + "\n")}
	var mu sync.Mutex
	var written []Record
	c, err := New(t.Context(), Config{Audit: NewAuditLog(nil, func(r Record) {
		mu.Lock()
		defer mu.Unlock()
		written = append(written, r)
	})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.WithoutCancel(t.Context())) })
	withFake(c, f)
	req := Request{Spec: spec, SpecSHA256: sum, TenantID: "acme", SessionID: "s-10", Secrets: NewSecrets(map[string]string{"LONG": canary})}
	err = c.With(t.Context(), req, func(ctx context.Context, sb *Sandbox) error {
		if _, err := sb.Run(ctx, []string{"echo", "0", "1", "acme", canary, `quote " and \ ` + canary}, RunOptions{}); err != nil {
			return err
		}
		f.runErr = &model.Error{Class: model.ErrResourceLimitExceeded, Limit: model.LimitMemory, Message: "acme used 100 MB, holding " + canary}
		_, _ = sb.Run(ctx, []string{"true"}, RunOptions{})
		f.runErr = errors.New("daemon said 0 and 1 about acme: " + canary)
		_, _ = sb.Run(ctx, []string{"true"}, RunOptions{})
		f.runErr = nil
		_, err := sb.RunCode(ctx, "python", "print(10, 'acme', '"+canary+"')", RunOptions{})
		return err
	})
	audit := &auditBuffer{}
	log := NewAuditLog(audit, nil)
	all := NewSecrets(values)
	mu.Lock()
	for _, r := range written {
		log.emit(r, all)
	}
	mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	recs := audit.records(t) // every line parses as one JSON object
	if len(recs) < 5 {
		t.Fatalf("only %d records:\n%s", len(recs), audit)
	}
	sc := bufio.NewScanner(strings.NewReader(audit.String()))
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("invalid JSON: %v\n%s", err, sc.Text())
		}
		var ss []string
		stringsIn(m, &ss)
		for _, s := range ss {
			for _, v := range values {
				if strings.Contains(s, v) {
					t.Fatalf("string %q holds secret %q:\n%s", s, v, sc.Text())
				}
			}
		}
		to, _ := m["timeouts"].(map[string]any)
		if _, ok := to["create_seconds"].(float64); !ok {
			t.Fatalf("timeouts.create_seconds is not a number:\n%s", sc.Text())
		}
		caps, _ := m["caps"].(map[string]any)
		if _, ok := caps["cpu"].(float64); !ok {
			t.Fatalf("caps.cpu is not a number:\n%s", sc.Text())
		}
		if _, ok := m["duration_ms"].(float64); !ok {
			t.Fatalf("duration_ms is not a number:\n%s", sc.Text())
		}
	}
}

// The backstop after encoding replaces a whole string literal that still
// holds a secret (here a timestamp, which redactRecord cannot reach) and
// never touches numbers or the record's own keys.
func TestRedactLine_ReplacesWholeLiterals(t *testing.T) {
	s := NewSecrets(map[string]string{"A": "0", "B": "tim", "C": `q"x`})
	line := []byte(`{"time":"2030-01-01T00:00:00Z","duration_ms":100,"labels":{"k0":"v","tim":"x"},"error":"a \"q\"x\" b","event":"exec"}` + "\n")
	got := redactLine(line, s)
	var m map[string]any
	if err := json.Unmarshal(got, &m); err != nil {
		t.Fatalf("invalid JSON: %v\n%s", err, got)
	}
	want := `{"time":"[REDACTED]","duration_ms":100,"labels":{"[REDACTED]":"v","[REDACTED]":"x"},"error":"[REDACTED]","event":"exec"}` + "\n"
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if clean := []byte(`{"event":"exec","duration_ms":0}`); &redactLine(clean, NewSecrets(map[string]string{"A": "zzz"}))[0] != &clean[0] {
		t.Fatal("a line with no secret should be returned as is")
	}
}

// The audit log gives its watcher the file's absolute path and identity
// (what fstat says of the open file), so that a reopen by name can check
// it; a writer that is no regular file, or a path no longer naming the
// open file (replaced by a symlink), gives none.
func TestAuditLog_FilePathAndIdentity(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "audit.jsonl")
	f, err := safefile.OpenAppend(p, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	a := NewAuditLog(f, nil)
	if a.path != p || a.id == "" || a.id != safefile.ID(fi) {
		t.Fatalf("path %q id %q; want %q and %q", a.path, a.id, p, safefile.ID(fi))
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if a := NewAuditLog(w, nil); a.path != "" || a.id != "" {
		t.Errorf("a pipe: path %q id %q", a.path, a.id)
	}
	if err := os.Rename(p, p+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(p+".moved", p); err != nil {
		t.Fatal(err)
	}
	// /proc names the moved file, which is still the open one.
	if a := NewAuditLog(f, nil); a.path != p+".moved" || a.id != safefile.ID(fi) {
		t.Errorf("after a rename: path %q id %q", a.path, a.id)
	}
}
