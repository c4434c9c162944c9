package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// canary is a secret value that must never show outside a sandbox.
var canary = "CANARY-s3cr3t-" + runID

func withSecretNames(names ...string) func(*inputs.Template) {
	return func(t *inputs.Template) { t.SecretNames = names }
}

// Every refusal happens before anything is provisioned: the backend is not
// asked to create, and the refusal is audited without the secret.
func TestOpen_RefusalsProvisionNothing(t *testing.T) {
	tpl := template(t)
	perTenant, sum := tenantSpec(t, tpl, "acme", "s-1")
	edit := func(old, new string) []byte {
		if !bytes.Contains(perTenant, []byte(old)) {
			t.Fatalf("spec has no %s: %s", old, perTenant)
		}
		return bytes.Replace(perTenant, []byte(old), []byte(new), 1)
	}
	tplJSON, _ := canonical(t, tpl)
	edited := tpl
	edited.Labels = map[string]string{"team": "agents", model.LabelTemplate: "other"}
	tplWithReserved, _ := canonical(t, edited)
	gvisor := template(t, func(x *inputs.Template) { x.Runtime = "runsc"; x.RequireIsolation = "GVISOR" })
	gvisorJSON, _ := tenantSpec(t, gvisor, "acme", "s-1")
	withSecret := template(t, withSecretNames("OPENAI_API_KEY"))
	withSecretJSON, _ := tenantSpec(t, withSecret, "acme", "s-1")

	secrets := NewSecrets(map[string]string{"OPENAI_API_KEY": canary})
	for _, tc := range []struct {
		name      string
		req       Request
		liveTier  model.Tier
		class     model.ErrorClass
		rule      string
		preflight bool // the live backend was asked (and refused)
	}{
		{"not a spec", Request{Spec: []byte(`{"x":1}`), TenantID: "acme", SessionID: "s-1"}, "", ErrConfiguration, "SBX-SPC-001", false},
		{"digest of another spec", Request{Spec: edit(`"memory_mb":512`, `"memory_mb":4096`), SpecSHA256: sum, TenantID: "acme", SessionID: "s-1"},
			"", ErrConfiguration, "SBX-SPC-003", false},
		{"malformed digest", Request{Spec: perTenant, SpecSHA256: "abc", TenantID: "acme", SessionID: "s-1"}, "", ErrConfiguration, "SBX-SPC-003", false},
		{"edited to an allow list, no digest", Request{Spec: edit(`"allow":[]`, `"allow":["151.101.0.0/16"]`), TenantID: "acme", SessionID: "s-1"},
			"", ErrCapabilityNotSupported, "SBX-NET-003", false},
		{"edited to unset a cap", Request{Spec: edit(`"pids":256`, `"pids":0`), TenantID: "acme", SessionID: "s-1"}, "", ErrConfiguration, "SBX-RES-001", false},
		// Checked as the data source checks them at plan (inputs.Spec),
		// before the live backend is asked.
		{"edited to claim another tier", Request{Spec: edit(`"isolation_tier":"CONTAINER"`, `"isolation_tier":"MICROVM"`), TenantID: "acme", SessionID: "s-1"},
			"", ErrConfiguration, "SBX-SPC-005", false},
		{"edited to a tier that is none", Request{Spec: edit(`"isolation_tier":"CONTAINER"`, `"isolation_tier":"LOL"`), TenantID: "acme", SessionID: "s-1"},
			"", ErrConfiguration, "SBX-SPC-005", false},
		{"edited to no backend", Request{Spec: edit(`"backend":"docker://"`, `"backend":""`), TenantID: "acme", SessionID: "s-1"},
			"", ErrConfiguration, "SBX-DSN-001", false},
		// Learning is accepted only where blocked egress is observed (runc).
		{"edited to learn egress on runsc", Request{Spec: bytes.Replace(gvisorJSON, []byte(`"egress":"deny"`), []byte(`"egress":"learn"`), 1),
			TenantID: "acme", SessionID: "s-1"}, "", ErrCapabilityNotSupported, "SBX-NET-001", false},
		{"another tenant's spec", Request{Spec: perTenant, SpecSHA256: sum, TenantID: "globex", SessionID: "s-1"}, "", ErrConfiguration, "SBX-SPC-004", false},
		{"another session's spec", Request{Spec: perTenant, TenantID: "acme", SessionID: "s-2"}, "", ErrConfiguration, "SBX-SPC-004", false},
		{"reserved label edited", Request{Spec: edit(`"sandboxio.tenant_id":"acme"`, `"sandboxio.tenant_id":"globex"`), TenantID: "acme", SessionID: "s-1"},
			"", ErrConfiguration, "SBX-SPC-004", false},
		{"template for an empty tenant", Request{Spec: tplJSON, TenantID: "", SessionID: "s-1"}, "", ErrConfiguration, "SBX-TEN-001", false},
		{"template for a malformed session", Request{Spec: tplJSON, TenantID: "acme", SessionID: "s 1;rm"}, "", ErrConfiguration, "SBX-TEN-002", false},
		// "backend not in this build" is gone: every backend the policy
		// knows provisions in this build since E2B, Modal, Vercel and
		// Daytona landed.
		{"missing secret", Request{Spec: withSecretJSON, TenantID: "acme", SessionID: "s-1"}, "", ErrConfiguration, "SBX-RUN-001", false},
		{"undeclared secret", Request{Spec: perTenant, TenantID: "acme", SessionID: "s-1", Secrets: secrets}, "", ErrConfiguration, "SBX-RUN-001", false},
		{"secret value too short", Request{Spec: withSecretJSON, TenantID: "acme", SessionID: "s-1",
			Secrets: NewSecrets(map[string]string{"OPENAI_API_KEY": "sk-1234"})}, "", ErrConfiguration, "SBX-RUN-002", false},
		{"empty secret value", Request{Spec: withSecretJSON, TenantID: "acme", SessionID: "s-1",
			Secrets: NewSecrets(map[string]string{"OPENAI_API_KEY": ""})}, "", ErrConfiguration, "SBX-RUN-002", false},
		{"env sets a secret name", Request{Spec: withSecretJSON, TenantID: "acme", SessionID: "s-1", Secrets: secrets,
			Env: map[string]string{"OPENAI_API_KEY": "from-env-instead"}}, "", ErrConfiguration, "SBX-SEC-003", false},
		{"open timeout above timeout_seconds", Request{Spec: perTenant, TenantID: "acme", SessionID: "s-1", Timeout: 61 * time.Second},
			"", ErrConfiguration, "SBX-RUN-003", false},
		{"extra labels on a per-tenant spec", Request{Spec: perTenant, TenantID: "acme", SessionID: "s-1", ExtraLabels: map[string]string{"run": "r1"}},
			"", ErrConfiguration, "SBX-RUN-004", false},
		{"live tier below require_isolation", Request{Spec: gvisorJSON, TenantID: "acme", SessionID: "s-1"}, model.TierContainer,
			ErrConfiguration, "SBX-ISO-003", true},
		{"live tier differs from the spec's", Request{Spec: perTenant, TenantID: "acme", SessionID: "s-1"}, model.TierGVisor,
			ErrConfiguration, "SBX-SPC-005", true},
		{"negative timeout", Request{Spec: perTenant, TenantID: "acme", SessionID: "s-1", Timeout: -time.Second}, "", ErrConfiguration, "", false},
		// A reserved label given at run time, or edited into a template
		// spec, is refused rather than overwritten by the one sandboxio sets.
		{"extra label sets the reserved tenant label", Request{Spec: tplJSON, TenantID: "acme", SessionID: "s-1",
			ExtraLabels: map[string]string{model.LabelTenantID: "globex"}}, "", ErrConfiguration, "SBX-LBL-001", false},
		{"extra label sets the reserved session label to its own value", Request{Spec: tplJSON, TenantID: "acme", SessionID: "s-1",
			ExtraLabels: map[string]string{model.LabelSessionID: "s-1"}}, "", ErrConfiguration, "SBX-LBL-001", false},
		{"template spec edited to carry a reserved label", Request{Spec: tplWithReserved, TenantID: "acme", SessionID: "s-1"},
			"", ErrConfiguration, "SBX-LBL-001", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeBackend{tier: tc.liveTier}
			c, audit := newClient(t)
			withFake(c, f)
			if tc.req.Secrets.Len() == 0 && tc.name != "missing secret" {
				tc.req.Secrets = Secrets{}
			}
			sb, err := c.Open(t.Context(), tc.req)
			if sb != nil {
				t.Fatalf("a sandbox was returned: %v", sb)
			}
			wantClass(t, err, tc.class, tc.rule)
			if n := f.creates.Load(); n != 0 {
				t.Fatalf("%d sandboxes were created", n)
			}
			if got := f.preflight.Load() > 0; got != tc.preflight {
				t.Fatalf("live backend asked: %v, want %v", got, tc.preflight)
			}
			recs := audit.records(t)
			if len(recs) != 1 || recs[0]["event"] != EventRefused || recs[0]["sandbox_id"] != nil || recs[0]["error_class"] != string(tc.class) {
				t.Fatalf("want one refused record, got %s", audit)
			}
			if strings.Contains(audit.String(), canary) || strings.Contains(err.Error(), canary) {
				t.Fatalf("the canary leaked: %v\n%s", err, audit)
			}
			t.Logf("%v", err)
		})
	}
}

// A template spec is rendered for the tenant here, as the data source would,
// and the digest may be the template's.
func TestOpen_TemplateSpecRenderedForTenant(t *testing.T) {
	tpl := template(t)
	tplJSON, tplSum := canonical(t, tpl)
	_, tenantSum := tenantSpec(t, tpl, "acme", "s-1")
	f := &fakeBackend{}
	c, audit := newClient(t)
	withFake(c, f)
	sb, err := c.Open(t.Context(), Request{Spec: tplJSON, SpecSHA256: tplSum, TenantID: "acme", SessionID: "s-1",
		ExtraLabels: map[string]string{"run": "r1"}})
	if err != nil {
		t.Fatal(err)
	}
	in := sb.Info()
	if in.TenantID != "acme" || in.SessionID != "s-1" || in.Labels[model.LabelTenantID] != "acme" || in.Labels["run"] != "r1" {
		t.Fatalf("info: %+v", in)
	}
	if err := sb.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	recs := audit.records(t)
	if got := events(recs); strings.Join(got, " ") != "created/open killed/close" {
		t.Fatalf("events: %v", got)
	}
	// Rendered with extra labels, the spec differs from the plain render.
	if recs[0]["spec_sha256"] == tenantSum || recs[0]["spec_sha256"] == "" {
		t.Fatalf("spec_sha256 %v", recs[0]["spec_sha256"])
	}
}

func TestSecrets_RedactedEverywhere(t *testing.T) {
	s := NewSecrets(map[string]string{"OPENAI_API_KEY": canary, "B": "other-secret-value"})
	type holder struct {
		Public  Secrets
		private Secrets
	}
	h := holder{Public: s, private: s}
	var out []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%T"} {
		out = append(out, fmt.Sprintf(verb, s), fmt.Sprintf(verb, h), fmt.Sprintf(verb, &h), fmt.Sprintf(verb, []Secrets{s}),
			fmt.Sprintf(verb, map[string]any{"s": s}))
	}
	out = append(out, s.String(), s.GoString(), fmt.Sprint(s), fmt.Sprintln(s))
	j, err := json.Marshal(map[string]any{"secrets": s, "holder": h})
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, string(j))
	var logBuf bytes.Buffer
	slog.New(slog.NewJSONHandler(&logBuf, nil)).Info("open", "secrets", s, "req", Request{Secrets: s})
	slog.New(slog.NewTextHandler(&logBuf, nil)).Info("open", "secrets", s)
	out = append(out, logBuf.String(), fmt.Sprintf("%+v", Request{Secrets: s}), fmt.Sprintf("%#v", Request{Secrets: s}))
	for _, o := range out {
		if strings.Contains(o, canary) || strings.Contains(o, "other-secret-value") || strings.Contains(o, "s3cr3t") {
			t.Fatalf("a value leaked: %s", o)
		}
	}
	if got := s.String(); got != "Secrets{B=[REDACTED], OPENAI_API_KEY=[REDACTED]}" {
		t.Fatalf("String: %s", got)
	}
	if got := string(j); !strings.Contains(got, `"OPENAI_API_KEY":"[REDACTED]"`) {
		t.Fatalf("JSON: %s", got)
	}
	if got := s.RedactString("key=" + canary + ";"); got != "key=[REDACTED];" {
		t.Fatalf("redact: %s", got)
	}
	if _, err := SecretsFromEnv([]string{"SANDBOXIO_TEST_UNSET_SECRET"}, func(string) (string, bool) { return "", false }); ClassOf(err) != ErrConfiguration ||
		!strings.Contains(err.Error(), "SANDBOXIO_TEST_UNSET_SECRET") {
		t.Fatalf("missing secret: %v", err)
	}
}

// Output and errors that carry a secret value are redacted; the error keeps
// its class and limit.
func TestRun_RedactsOutputAndErrors(t *testing.T) {
	tpl := template(t, withSecretNames("OPENAI_API_KEY"))
	spec, sum := tenantSpec(t, tpl, "acme", "s-1")
	f := &fakeBackend{runOut: []byte("key is " + canary + "\n")}
	c, audit := newClient(t)
	withFake(c, f)
	req := Request{Spec: spec, SpecSHA256: sum, TenantID: "acme", SessionID: "s-1", Secrets: NewSecrets(map[string]string{"OPENAI_API_KEY": canary})}
	err := c.With(t.Context(), req, func(ctx context.Context, sb *Sandbox) error {
		res, err := sb.Run(ctx, []string{"sh", "-c", "echo key is $OPENAI_API_KEY " + canary}, RunOptions{})
		if err != nil {
			return err
		}
		if string(res.Stdout) != "key is [REDACTED]\n" {
			t.Errorf("stdout not redacted: %q", res.Stdout)
		}
		f.runErr = &model.Error{Class: model.ErrResourceLimitExceeded, Limit: model.LimitMemory, Message: "killed while holding " + canary,
			Err: errors.New("inner " + canary)}
		_, err = sb.Run(ctx, []string{"true"}, RunOptions{})
		if strings.Contains(err.Error(), canary) || strings.Contains(fmt.Sprintf("%+v %#v", err, err), canary) {
			t.Errorf("error not redacted: %v", err)
		}
		if !errors.Is(err, ErrResourceLimitExceeded) {
			t.Errorf("class lost: %v", err)
		}
		if l, ok := LimitOf(err); !ok || l != model.LimitMemory {
			t.Errorf("limit lost: %v", err)
		}
		for e := err; e != nil; e = errors.Unwrap(e) {
			if strings.Contains(e.Error(), canary) {
				t.Errorf("the chain holds the value: %v", e)
			}
		}
		f.runErr = errors.New("daemon said " + canary)
		_, err = sb.Run(ctx, []string{"true"}, RunOptions{})
		if !errors.Is(err, ErrBackend) || strings.Contains(err.Error(), canary) {
			t.Errorf("backend error: %v", err)
		}
		f.runErr = nil
		_, err = sb.Run(ctx, []string{"true"}, RunOptions{Env: map[string]string{"OPENAI_API_KEY": "x"}})
		wantClass(t, err, ErrConfiguration, "SBX-SEC-003")
		// The fix names both ways of passing a secret, not the Go API's only.
		if !strings.Contains(err.Error(), "the CLI reads declared secrets from its environment; the Go API takes Request.Secrets") {
			t.Errorf("fix: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(audit.String(), canary) {
		t.Fatalf("audit holds the value:\n%s", audit)
	}
	got := strings.Join(events(audit.records(t)), " ")
	if got != "created/open exec/run limit_exceeded/run failed/run refused/run killed/close" {
		t.Fatalf("events: %s", got)
	}
	if !strings.Contains(audit.String(), `"limit":"memory"`) || !strings.Contains(audit.String(), `"secret_names":["OPENAI_API_KEY"]`) {
		t.Fatalf("audit:\n%s", audit)
	}
	// The secret reached the backend, and only through Secrets.
	if v := f.reqs[0].Secrets["OPENAI_API_KEY"]; v != canary {
		t.Fatalf("the backend did not get the secret")
	}
	if strings.Contains(fmt.Sprint(f.reqs[0].Spec), canary) {
		t.Fatalf("the secret is in the spec")
	}
}

// A call in flight when the cancellation's close overtakes it finds the
// sandbox gone; With still reports the cancellation, its cause (stress
// round 8 hit this order by chance in TestWith_ClosesOnEveryPath).
func TestWith_CallAfterTheCancellationCloseReportsTheCancellation(t *testing.T) {
	tpl := template(t)
	spec, _ := tenantSpec(t, tpl, "acme", "s-1")
	f := &fakeBackend{}
	c, _ := newClient(t)
	withFake(c, f)
	ctx, cancel := context.WithCancel(t.Context())
	// The cancellation lands once the call has passed the helper's checks
	// and hook, and its close completes before the backend looks.
	f.beforeRun = func() {
		cancel()
		deadline := time.Now().Add(5 * time.Second)
		for f.closes.Load() == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if f.closes.Load() == 0 {
			t.Error("the cancellation did not close the sandbox")
		}
	}
	err := c.With(ctx, Request{Spec: spec, TenantID: "acme", SessionID: "s-1"}, func(ctx context.Context, sb *Sandbox) error {
		_, err := sb.Run(ctx, []string{"true"}, RunOptions{})
		return err
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("want the cancellation, got %v", err)
	}
}

// A call whose context is cancelled before it reaches the backend (in the
// hook, or before it) is audited as killed (cancelled), as one cut short
// mid-command is: the policy did not refuse it. With's cancellation can land
// there, which TestWith_ClosesOnEveryPath met under load.
func TestRun_CancelledBeforeTheBackendIsKilledNotRefused(t *testing.T) {
	tpl := template(t)
	spec, _ := tenantSpec(t, tpl, "acme", "s-pre")
	f := &fakeBackend{}
	c, audit := newClient(t)
	withFake(c, f)
	sb, err := c.Open(t.Context(), Request{Spec: spec, TenantID: "acme", SessionID: "s-pre"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sb.Close(t.Context()) }()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := sb.Run(ctx, []string{"sleep", "1000"}, RunOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("want the cancellation, got %v", err)
	}
	if f.runs.Load() != 0 {
		t.Fatal("a cancelled call reached the backend")
	}
	var got []string
	for _, r := range audit.records(t) {
		if r["op"] == "run" {
			got = append(got, fmt.Sprint(r["event"], ":", r["reason"]))
		}
	}
	if strings.Join(got, " ") != EventKilled+":cancelled" {
		t.Fatalf("run audited as %q; want killed:cancelled", got)
	}
}

// An upload whose context was cancelled, and whose sandbox the
// cancellation closed first (as With does), has the cancellation as its
// cause, as a run does: errors.Is(err, context.Canceled), the SandboxGone
// still in the chain, and the audit records the upload killed (cancelled),
// not gone.
func TestUpload_CancelledFirst(t *testing.T) {
	tpl := template(t)
	spec, _ := tenantSpec(t, tpl, "acme", "s-up")
	f := &fakeBackend{}
	c, audit := newClient(t)
	withFake(c, f)
	ctx, cancel := context.WithCancel(t.Context())
	sb, err := c.Open(ctx, Request{Spec: spec, TenantID: "acme", SessionID: "s-up"})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	_ = sb.Close(t.Context())
	err = sb.Upload(ctx, "/work/a.txt", []byte("x"), 0)
	if !errors.Is(err, context.Canceled) || ClassOf(err) != ErrSandboxGone {
		t.Fatalf("want the cancellation first and SandboxGone in the chain, got %v", err)
	}
	var got []string
	for _, r := range audit.records(t) {
		if r["op"] == "upload" {
			got = append(got, fmt.Sprint(r["event"], ":", r["reason"]))
		}
	}
	if strings.Join(got, " ") != EventKilled+":cancelled" {
		t.Fatalf("upload records: %v", got)
	}
	// Without a cancellation, the same call is plainly gone.
	if err := sb.Upload(t.Context(), "/work/a.txt", []byte("x"), 0); errors.Is(err, context.Canceled) || ClassOf(err) != ErrSandboxGone {
		t.Fatalf("want SandboxGone alone, got %v", err)
	}
}

// With closes on return, error, panic and cancellation; on cancellation at
// once, while fn is still inside a call.
func TestWith_ClosesOnEveryPath(t *testing.T) {
	tpl := template(t)
	spec, _ := tenantSpec(t, tpl, "acme", "s-1")
	req := Request{Spec: spec, TenantID: "acme", SessionID: "s-1"}
	f := &fakeBackend{}
	c, audit := newClient(t)
	withFake(c, f)

	if err := c.With(t.Context(), req, func(context.Context, *Sandbox) error { return nil }); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := c.With(t.Context(), req, func(context.Context, *Sandbox) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("want boom, got %v", err)
	}
	func() {
		defer func() {
			if r := recover(); r != "panic in fn" {
				t.Fatalf("the panic did not continue: %v", r)
			}
		}()
		_ = c.With(t.Context(), req, func(context.Context, *Sandbox) error { panic("panic in fn") })
	}()

	f.runBlock = make(chan struct{})
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	done := make(chan error)
	var sbox atomic.Pointer[Sandbox]
	go func() {
		done <- c.With(ctx, req, func(ctx context.Context, sb *Sandbox) error {
			sbox.Store(sb)
			_, err := sb.Run(ctx, []string{"sleep", "1000"}, RunOptions{})
			return err
		})
	}()
	deadline := time.Now().Add(5 * time.Second)
	for sbox.Load() == nil && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("want the cancellation, got %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("With did not return after cancellation")
	}
	if n := f.creates.Load(); n != 4 || f.closes.Load() != 4 {
		t.Fatalf("created %d, closed %d", n, f.closes.Load())
	}
	if _, ok := c.Get("acme", "s-1"); ok {
		t.Fatal("a closed sandbox is still registered")
	}
	var reasons []string
	for _, r := range audit.records(t) {
		if r["event"] == EventKilled {
			reasons = append(reasons, fmt.Sprint(r["op"], ":", r["reason"]))
		}
	}
	// The cancelled command is audited as killed too; it and its sandbox's
	// close race.
	slices.Sort(reasons)
	if got := strings.Join(reasons, " "); got != "close:cancelled close:closed close:closed close:panic run:cancelled" {
		t.Fatalf("close reasons: %s", got)
	}
	// Close is idempotent.
	sb := sbox.Load()
	if err := sb.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestClose_OrphanedWarnsAndAuditsOnce(t *testing.T) {
	tpl := template(t)
	spec, _ := tenantSpec(t, tpl, "acme", "s-1")
	f := &fakeBackend{closeErr: errors.New("daemon did not answer")}
	var audit auditBuffer
	var warnings []model.Warning
	c, err := New(t.Context(), Config{Audit: NewAuditLog(&audit, nil), OnWarning: func(w model.Warning) { warnings = append(warnings, w) }})
	if err != nil {
		t.Fatal(err)
	}
	withFake(c, f)
	sb, err := c.Open(t.Context(), Request{Spec: spec, TenantID: "acme", SessionID: "s-1"})
	if err != nil {
		t.Fatal(err)
	}
	err = sb.Close(t.Context())
	var oe *OrphanedError
	if !errors.As(err, &oe) || oe.Warning.SandboxID != sb.ID() || oe.Warning.Labels[model.LabelTenantID] != "acme" {
		t.Fatalf("want an orphan error naming the sandbox, got %v", err)
	}
	if err2 := sb.Close(t.Context()); err2 != err { //nolint:errorlint // the very same error value
		t.Fatalf("second close: %v", err2)
	}
	if len(warnings) != 1 || warnings[0].Class != model.OrphanedSandboxWarning {
		t.Fatalf("warnings: %v", warnings)
	}
	if got := strings.Join(events(audit.records(t)), " "); got != "created/open orphaned/close" {
		t.Fatalf("events: %s", got)
	}
}

// One sandbox per tenant and session, under concurrency: of many opens
// racing for each pair exactly one wins; Get answers only for the exact pair.
func TestTenancy_OnePerTenantAndSessionUnderConcurrency(t *testing.T) {
	tpl := template(t)
	f := &fakeBackend{delay: 2 * time.Millisecond}
	c, _ := newClient(t)
	withFake(c, f)
	const tenants, racers = 20, 8
	var wins [tenants]atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var unexpected []error
	for i := range tenants {
		tenant := fmt.Sprintf("tenant-%02d", i)
		spec, sum := tenantSpec(t, tpl, tenant, "s-1")
		for range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sb, err := c.Open(context.WithoutCancel(t.Context()), Request{Spec: spec, SpecSHA256: sum, TenantID: tenant, SessionID: "s-1"})
				if err == nil {
					wins[i].Add(1)
					if sb.Info().TenantID != tenant || sb.Info().Labels[model.LabelTenantID] != tenant {
						mu.Lock()
						unexpected = append(unexpected, fmt.Errorf("%s got %+v", tenant, sb.Info()))
						mu.Unlock()
					}
					return
				}
				if ClassOf(err) != ErrConfiguration || !strings.Contains(err.Error(), "already open") {
					mu.Lock()
					unexpected = append(unexpected, err)
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	if len(unexpected) > 0 {
		t.Fatal(errors.Join(unexpected...))
	}
	ids := map[string]string{}
	for i := range tenants {
		tenant := fmt.Sprintf("tenant-%02d", i)
		if n := wins[i].Load(); n != 1 {
			t.Fatalf("%s: %d opens won, want 1", tenant, n)
		}
		sb, ok := c.Get(tenant, "s-1")
		if !ok || sb.Info().TenantID != tenant {
			t.Fatalf("Get(%s) = %v %v", tenant, sb, ok)
		}
		if other, ok := ids[sb.ID()]; ok {
			t.Fatalf("%s and %s share sandbox %s", tenant, other, sb.ID())
		}
		ids[sb.ID()] = tenant
		if _, ok := c.Get(tenant, "s-2"); ok {
			t.Fatalf("Get answered for another session")
		}
	}
	if n := f.creates.Load(); n != tenants {
		t.Fatalf("%d sandboxes created for %d tenants", n, tenants)
	}
	if err := c.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := f.closes.Load(); n != tenants {
		t.Fatalf("client close closed %d of %d", n, tenants)
	}
}

// An open cancelled while the backend is still creating is audited as
// killed, with the reason, and leaves nothing registered.
func TestOpen_CancelledMidCreateIsAuditedWithItsReason(t *testing.T) {
	spec, _ := tenantSpec(t, template(t), "acme", "s-1")
	f := &fakeBackend{createErr: fmt.Errorf("container start: %w", context.Canceled)}
	c, audit := newClient(t)
	withFake(c, f)
	_, err := c.Open(t.Context(), Request{Spec: spec, TenantID: "acme", SessionID: "s-1"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("want the cancellation, got %v", err)
	}
	if _, ok := c.Get("acme", "s-1"); ok {
		t.Fatal("a cancelled open is registered")
	}
	var got []string
	for _, r := range audit.records(t) {
		got = append(got, fmt.Sprint(r["event"], "/", r["op"], "/", r["reason"]))
	}
	if strings.Join(got, " ") != "killed/open/cancelled" {
		t.Fatalf("audit: %v", got)
	}
}

// A With whose context is cancelled closes the sandbox as cancelled, also
// when fn returns before the cancellation's own close has run (on a busy
// host that close starts late): the audit record says why the sandbox
// went, never "closed" for a cancellation.
func TestWith_CancelledCloseIsAuditedAsCancelled(t *testing.T) {
	tpl := template(t)
	spec, _ := tenantSpec(t, tpl, "acme", "s-1")
	req := Request{Spec: spec, TenantID: "acme", SessionID: "s-1"}
	f := &fakeBackend{}
	c, audit := newClient(t)
	withFake(c, f)
	const n = 20
	for range n {
		ctx, cancel := context.WithCancel(t.Context())
		err := c.With(ctx, req, func(context.Context, *Sandbox) error { cancel(); return nil })
		if err != nil {
			t.Fatal(err)
		}
	}
	var reasons []string
	for _, r := range audit.records(t) {
		if r["event"] == EventKilled {
			reasons = append(reasons, fmt.Sprint(r["reason"]))
		}
	}
	if len(reasons) != n || slices.ContainsFunc(reasons, func(r string) bool { return r != "cancelled" }) {
		t.Fatalf("close reasons: %v", reasons)
	}
}
