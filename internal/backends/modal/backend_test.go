package modal_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/modal"
	modalserver "github.com/sandboxio/terraform-provider-sandboxio/internal/fakes/modal"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

const secretCanary = "sk-canary-adapter-3f9a1c77e2"

func spec(mods ...func(*model.Spec)) model.Spec {
	s := model.Spec{SpecVersion: model.SpecVersion, Name: "py", Backend: "modal://" + modalserver.TestApp, Image: modalserver.Image,
		IsolationTier: model.TierGVisor, Network: model.NetworkPolicy{}.Normalized(), Resources: model.DefaultCaps(),
		TimeoutSeconds: 30, LifetimeSeconds: 120, Labels: map[string]string{"team": "agents"},
		TenantID: "acme", SessionID: fmt.Sprintf("s-%d", time.Now().UnixNano())}
	for _, m := range mods {
		m(&s)
	}
	return s
}

func openBackend(t *testing.T, dsn string) backends.Backend {
	t.Helper()
	d, err := backends.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	reg, _ := backends.Registered(modal.Name)
	b, err := reg.Open(d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func create(t *testing.T, b backends.Backend, req backends.CreateRequest) backends.Sandbox {
	t.Helper()
	sb, err := b.Create(t.Context(), req)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() {
		if err := sb.Close(context.WithoutCancel(t.Context())); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return sb
}

func TestAdapterOpenRunClose(t *testing.T) {
	s := modalserver.StartForTest(t)
	s.SetEnv(t)
	b := openBackend(t, "modal://"+modalserver.TestApp+"?environment="+modalserver.TestEnvironment)
	sp := spec(func(s *model.Spec) {
		s.Backend = "modal://" + modalserver.TestApp + "?environment=" + modalserver.TestEnvironment + "&region=us-east"
		s.Resources.CPU, s.Resources.MemoryMB = 0.5, 256
		s.Network.Allow = []string{"151.101.0.0/16", "192.0.2.7"}
		s.Env = map[string]string{"LANG": "C.UTF-8"}
		s.SecretNames = []string{"API_KEY"}
	})
	sb := create(t, b, backends.CreateRequest{Spec: sp, Secrets: map[string]string{"API_KEY": secretCanary}})
	rec, ok := s.Sandbox(sb.ID())
	if !ok {
		t.Fatalf("the server has no sandbox %s", sb.ID())
	}
	if rec.Network != "ALLOWLIST" || strings.Join(rec.CIDRs, ",") != "151.101.0.0/16,192.0.2.7/32" || rec.LegacyBlock ||
		rec.MilliCPU != 500 || rec.MilliCPUMax != 500 || rec.MemoryMB != 256 || rec.MemoryMBMax != 256 || rec.TimeoutSecs != 120 ||
		strings.Join(rec.Regions, ",") != "us-east" {
		t.Fatalf("the adapter asked for %+v", rec)
	}
	if rec.Tags[model.LabelTenantID] != "acme" || rec.Tags[model.LabelSessionID] != sp.SessionID || rec.Tags["team"] != "agents" || rec.Tags[model.LabelManaged] != "true" {
		t.Fatalf("tags %v", rec.Tags)
	}
	if len(rec.SecretIDs) != 2 { // the secret, and the SDK's secret for env
		t.Fatalf("secrets went as %v, want Modal Secrets", rec.SecretIDs)
	}
	if info := sb.Info(); info.ID != rec.ID || info.Tier != model.TierGVisor || info.BlockedEgress != nil || !info.Running {
		t.Fatalf("info %+v", info)
	}
	ctx := t.Context()
	res, err := sb.Run(ctx, []string{"sh", "-c", `echo "out $API_KEY $LANG $X"; echo err >&2; exit 7`}, backends.RunOptions{Env: map[string]string{"X": "x1"}})
	if err != nil || res.ExitCode != 7 || string(res.Stdout) != "out "+secretCanary+" C.UTF-8 x1\n" || string(res.Stderr) != "err\n" {
		t.Fatalf("run: %v %+v stdout %q stderr %q", err, res, res.Stdout, res.Stderr)
	}
	res, err = sb.Run(ctx, []string{"cat"}, backends.RunOptions{Stdin: []byte("from stdin\n")})
	if err != nil || string(res.Stdout) != "from stdin\n" {
		t.Fatalf("stdin: %v %q", err, res.Stdout)
	}
	res, err = sb.RunCode(ctx, "sh", "echo code ran", backends.RunOptions{})
	if err != nil || string(res.Stdout) != "code ran\n" {
		t.Fatalf("run code: %v %q", err, res.Stdout)
	}
	if err := sb.Upload(ctx, "/work/x.sh", []byte("#!/bin/sh\necho up\n"), 0o750); err != nil {
		t.Fatal(err)
	}
	res, err = sb.Run(ctx, []string{"sh", "-c", "stat -c %a /work/x.sh; sh /work/x.sh"}, backends.RunOptions{})
	if err != nil || string(res.Stdout) != "750\nup\n" {
		t.Fatalf("upload: %v %q %q", err, res.Stdout, res.Stderr)
	}
	var streamed strings.Builder
	res, err = sb.Run(ctx, []string{"echo", "streamed"}, backends.RunOptions{Stdout: &streamed})
	if err != nil || streamed.String() != "streamed\n" || len(res.Stdout) != 0 {
		t.Fatalf("streaming: %v %q", err, streamed.String())
	}
	infos, err := b.List(ctx, map[string]string{model.LabelTenantID: "acme", model.LabelSessionID: sp.SessionID})
	if err != nil || len(infos) != 1 || infos[0].ID != sb.ID() || infos[0].Labels["team"] != "agents" || infos[0].Expires.IsZero() {
		t.Fatalf("list: %v %+v", err, infos)
	}
	// One sandbox per tenant and session: the second is refused before any create.
	creates := s.CountCalls("SandboxCreate")
	_, err = b.Create(ctx, backends.CreateRequest{Spec: sp, Secrets: map[string]string{"API_KEY": secretCanary}})
	var me *model.Error
	if !errors.As(err, &me) || me.Class != model.ErrConfiguration || !strings.Contains(me.Message, "one sandbox per tenant and session") {
		t.Fatalf("a second sandbox for the session: %v", err)
	}
	if s.CountCalls("SandboxCreate") != creates {
		t.Fatal("the refused second sandbox reached SandboxCreate")
	}
	if err := sb.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sb.Kill(ctx); err != nil {
		t.Fatalf("kill is idempotent: %v", err)
	}
	if _, err := sb.Run(ctx, []string{"true"}, backends.RunOptions{}); !errors.Is(err, model.ErrSandboxGone) {
		t.Fatalf("run after kill: want SandboxGone, got %v", err)
	}
	if infos, _ := b.List(ctx, map[string]string{model.LabelSessionID: sp.SessionID}); len(infos) != 0 {
		t.Fatalf("a killed sandbox is listed: %+v", infos)
	}
}

func TestAdapterDenyIsAnEmptyAllowList(t *testing.T) {
	s := modalserver.StartForTest(t)
	s.SetEnv(t)
	b := openBackend(t, "modal://"+modalserver.TestApp)
	sb := create(t, b, backends.CreateRequest{Spec: spec()})
	rec, _ := s.Sandbox(sb.ID())
	if rec.Network != "ALLOWLIST" || len(rec.CIDRs) != 0 || rec.LegacyBlock || rec.LocalNetwork != "none" {
		t.Fatalf("deny went as %+v; want an allow list with no entries, not the block flag", rec)
	}
	res, err := sb.Run(t.Context(), []string{"ls", "/sys/class/net"}, backends.RunOptions{})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "lo" {
		t.Fatalf("interfaces inside: %v %q", err, res.Stdout)
	}
	open := create(t, b, backends.CreateRequest{Spec: spec(func(s *model.Spec) { s.Network.Egress = model.EgressAllow })})
	if rec, _ := s.Sandbox(open.ID()); rec.Network != "OPEN" {
		t.Fatalf("open egress went as %+v", rec)
	}
}

func TestAdapterTimeoutsAndLifetime(t *testing.T) {
	s := modalserver.StartForTest(t)
	s.SetEnv(t)
	b := openBackend(t, "modal://"+modalserver.TestApp)
	sb := create(t, b, backends.CreateRequest{Spec: spec(func(s *model.Spec) { s.LifetimeSeconds = 6 })})
	ctx := t.Context()
	start := time.Now()
	res, err := sb.Run(ctx, []string{"sh", "-c", "echo partial; sleep 30"}, backends.RunOptions{Timeout: 1500 * time.Millisecond})
	took := time.Since(start)
	if !errors.Is(err, model.ErrExecutionTimeout) || took > 2500*time.Millisecond || res.Stdout != nil {
		t.Fatalf("want ExecutionTimeout within 1 s of the 1.5 s timeout and no output, got %v after %s, %+v", err, took, res)
	}
	time.Sleep(time.Second) // Modal's kill is at the whole second after
	res, err = sb.Run(ctx, []string{"ps"}, backends.RunOptions{})
	if errors.Is(err, model.ErrSandboxGone) {
		// The server's Docker sandbox could not stop the command's
		// processes one by one (a loaded host) and was killed whole: the
		// Modal sandbox ended with it, which also ends the command.
		t.Logf("the sandbox ended with the timed-out command: %v", err)
		return
	}
	if err != nil || strings.Contains(string(res.Stdout), "sleep 30") {
		t.Fatalf("the timed-out command still runs: %v\n%s", err, res.Stdout)
	}
	time.Sleep(time.Until(start.Add(7 * time.Second)))
	if _, err := sb.Run(ctx, []string{"true"}, backends.RunOptions{}); !errors.Is(err, model.ErrSandboxGone) {
		t.Fatalf("after the lifetime: want SandboxGone, got %v", err)
	}
}

func TestAdapterTypedErrors(t *testing.T) {
	s := modalserver.StartForTest(t)
	s.SetEnv(t)
	ctx := t.Context()
	for _, tc := range []struct {
		code  codes.Code
		class model.ErrorClass
		text  string
	}{
		{codes.PermissionDenied, model.ErrConfiguration, "permission denied"},
		{codes.ResourceExhausted, model.ErrResourceLimitExceeded, "quota"},
		{codes.AlreadyExists, model.ErrConfiguration, "one sandbox per tenant"},
		{codes.InvalidArgument, model.ErrConfiguration, "invalid"},
	} {
		b := openBackend(t, "modal://"+modalserver.TestApp)
		s.Inject("SandboxCreate", modalserver.Fault{Code: tc.code})
		_, err := b.Create(ctx, backends.CreateRequest{Spec: spec()})
		var me *model.Error
		if !errors.As(err, &me) || me.Class != tc.class || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%s: want %s mentioning %q, got %v", tc.code, tc.class, tc.text, err)
		}
	}
	// A lost answer to a create: the SDK retries with its idempotency key,
	// and when it gives up the adapter finds the sandbox by name. One
	// sandbox exists, and the caller gets it.
	b := openBackend(t, "modal://"+modalserver.TestApp)
	before := len(s.Sandboxes())
	s.Inject("SandboxCreate", modalserver.Fault{Code: codes.Unavailable, After: true}, modalserver.Fault{Code: codes.Unavailable, After: true},
		modalserver.Fault{Code: codes.Unavailable, After: true}, modalserver.Fault{Code: codes.Unavailable, After: true})
	sb := create(t, b, backends.CreateRequest{Spec: spec()})
	if n := len(s.Sandboxes()) - before; n != 1 {
		t.Fatalf("a create whose answers were lost made %d sandboxes", n)
	}
	if _, ok := s.Sandbox(sb.ID()); !ok {
		t.Fatal("the adopted sandbox is not the one created")
	}
	// Unavailable on an idempotent call is retried by the SDK.
	s.Inject("SandboxList", modalserver.Fault{Code: codes.Unavailable}, modalserver.Fault{Code: codes.Unavailable})
	if _, err := b.List(ctx, map[string]string{model.LabelTenantID: "acme"}); err != nil {
		t.Fatalf("list after two Unavailable: %v", err)
	}
	// An unknown app.
	_, err := openBackend(t, "modal://no-such-app").Create(ctx, backends.CreateRequest{Spec: spec()})
	if !errors.Is(err, model.ErrConfiguration) || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("unknown app: %v", err)
	}
}

func TestAdapterCredentialsNeverLeak(t *testing.T) {
	s := modalserver.StartForTest(t)
	s.SetEnv(t)
	t.Setenv("MODAL_TOKEN_SECRET", "as-canary-wrong-77c1e0b5d2")
	b := openBackend(t, "modal://"+modalserver.TestApp)
	_, err := b.Create(t.Context(), backends.CreateRequest{Spec: spec()})
	if !errors.Is(err, model.ErrConfiguration) || !strings.Contains(err.Error(), "MODAL_TOKEN_ID") {
		t.Fatalf("a wrong token: want a ConfigurationError naming the variables, got %v", err)
	}
	for _, shown := range []string{err.Error(), fmt.Sprintf("%v %+v %#v", b, b, b)} {
		if strings.Contains(shown, "as-canary-wrong-77c1e0b5d2") || strings.Contains(shown, modalserver.TestTokenID) {
			t.Fatalf("a credential leaked: %s", shown)
		}
	}
	t.Setenv("MODAL_TOKEN_SECRET", "")
	_, err = openBackend(t, "modal://"+modalserver.TestApp).Create(t.Context(), backends.CreateRequest{Spec: spec()})
	if !errors.Is(err, model.ErrConfiguration) || !strings.Contains(err.Error(), "MODAL_TOKEN_SECRET") {
		t.Fatalf("no token: %v", err)
	}
}

func TestAdapterReap(t *testing.T) {
	s := modalserver.StartForTest(t)
	s.SetEnv(t)
	b := openBackend(t, "modal://"+modalserver.TestApp)
	sb := create(t, b, backends.CreateRequest{Spec: spec()})
	r, ok := b.(backends.Reaper)
	if !ok {
		t.Fatal("the Modal backend does not reap")
	}
	got, err := r.Reap(t.Context(), backends.ReapOptions{})
	if err != nil || len(got) != 0 {
		t.Fatalf("reap of a live sandbox: %v %+v", err, got)
	}
	got, err = r.Reap(t.Context(), backends.ReapOptions{Now: time.Now().Add(time.Hour)})
	if err != nil || len(got) != 1 || got[0].Info.ID != sb.ID() {
		t.Fatalf("reap past the lifetime: %v %+v", err, got)
	}
	if rec, _ := s.Sandbox(sb.ID()); rec.ID == "" {
		t.Fatal("no record")
	}
	if _, err := sb.Run(t.Context(), []string{"true"}, backends.RunOptions{}); !errors.Is(err, model.ErrSandboxGone) {
		t.Fatalf("a reaped sandbox still runs: %v", err)
	}
}

// Each tenant's volume name is derived from the template's volume name and
// the tenant id: deterministic, different per tenant, a valid Modal name.
func TestTenantVolumeName(t *testing.T) {
	a, b := modal.TenantVolumeName("datasets", "acme"), modal.TenantVolumeName("datasets", "globex")
	if a == b || a != modal.TenantVolumeName("datasets", "acme") || !strings.HasPrefix(a, "datasets-") {
		t.Fatalf("names %q %q", a, b)
	}
	long := modal.TenantVolumeName(strings.Repeat("x", 38), strings.Repeat("t", 128))
	if len(long) > 63 || strings.Contains(long, strings.Repeat("t", 10)) {
		t.Fatalf("%q: longer than Modal allows, or repeats the tenant id", long)
	}
}

// A spec with a volume opened for no tenant is refused before any call:
// the volume could not be scoped.
func TestAdapterVolumeNeedsTenant(t *testing.T) {
	t.Setenv("MODAL_TOKEN_ID", modalserver.TestTokenID)
	t.Setenv("MODAL_TOKEN_SECRET", modalserver.TestTokenSecret)
	t.Setenv("MODAL_SERVER_URL", "http://127.0.0.1:1") // never called
	b := openBackend(t, "modal://"+modalserver.TestApp)
	_, err := b.Create(t.Context(), backends.CreateRequest{Spec: spec(func(s *model.Spec) {
		s.TenantID, s.SessionID, s.Labels = "", "", nil
		s.Volume = &model.Volume{Name: "datasets", MountPath: "/data"}
	})})
	var me *model.Error
	if !errors.As(err, &me) || me.Class != model.ErrConfiguration || me.Attribute != "volume" {
		t.Fatalf("a volume without a tenant: %v", err)
	}
}
