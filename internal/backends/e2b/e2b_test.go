package e2b_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/e2b"
	e2bserver "github.com/sandboxio/terraform-provider-sandboxio/internal/fakes/e2b"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// canaryKey is the API key of the tests: it must never appear in an error.
const canaryKey = "e2b_canary_9f8e7d6c5b4a39281706f5e4d3c2b1a0"

func TestMain(m *testing.M) {
	if os.Getenv(docker.ScopeEnv) == "" {
		_ = os.Setenv(docker.ScopeEnv, fmt.Sprintf("e2b-test-%d", os.Getpid()))
	}
	os.Exit(m.Run())
}

// open starts a server and an adapter pointed at it (E2B_API_URL and
// E2B_SANDBOX_URL, as a user would point the SDK at it).
func open(t *testing.T) (*e2bserver.Server, backends.Backend) {
	t.Helper()
	srv := e2bserver.NewTestServer(t, canaryKey)
	t.Setenv(e2b.EnvAPIKey, canaryKey)
	t.Setenv(e2b.EnvAPIURL, srv.URL)
	t.Setenv(e2b.EnvSandboxURL, srv.URL)
	b, err := e2b.New(backends.DSN{Scheme: "e2b", Options: map[string]string{}})
	if err != nil {
		t.Fatal(err)
	}
	return srv, b
}

var sessions atomic.Int64

func spec(mods ...func(*model.Spec)) model.Spec {
	s := model.Spec{SpecVersion: model.SpecVersion, Name: "t", Backend: "e2b://", Image: e2bserver.TestTemplate,
		Network: model.NetworkPolicy{}.Normalized(), Resources: model.DefaultCaps(), TimeoutSeconds: 60, LifetimeSeconds: 120,
		TenantID: "acme", SessionID: fmt.Sprintf("s-%d", sessions.Add(1))}
	s = s.ForTenant(s.TenantID, s.SessionID, map[string]string{"team": "agents"})
	for _, m := range mods {
		m(&s)
	}
	return s
}

func create(t *testing.T, b backends.Backend, s model.Spec, secrets map[string]string) backends.Sandbox {
	t.Helper()
	sb, err := b.Create(t.Context(), backends.CreateRequest{Spec: s, Secrets: secrets})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() { _ = sb.Close(context.WithoutCancel(t.Context())) })
	return sb
}

func TestOpenRunUploadClose(t *testing.T) {
	srv, b := open(t)
	s := spec(func(s *model.Spec) {
		s.Env = map[string]string{"LANG": "C.UTF-8"}
		s.SecretNames = []string{"API_TOKEN"}
	})
	sb := create(t, b, s, map[string]string{"API_TOKEN": "secret-value-123"})
	rec, ok := srv.Observe(sb.ID())
	if !ok {
		t.Fatalf("the server has no sandbox %s", sb.ID())
	}
	for k, v := range s.Labels {
		if rec.Metadata[k] != v {
			t.Errorf("metadata %s = %q, want %q (labels are E2B metadata)", k, rec.Metadata[k], v)
		}
	}
	if rec.AllowInternetAccess == nil || *rec.AllowInternetAccess || rec.LocalNetwork != "none" {
		t.Errorf("deny egress: allow_internet_access=%v, local network %s", rec.AllowInternetAccess, rec.LocalNetwork)
	}
	if rec.Timeout != 120*time.Second || rec.EnvVars["LANG"] != "C.UTF-8" || rec.EnvVars["API_TOKEN"] != "" {
		t.Errorf("timeout %s (want the lifetime, 120s), envVars %v (secrets must not be in the create)", rec.Timeout, rec.EnvVars)
	}
	if sb.Info().Tier != model.TierMicroVM || sb.Info().BlockedEgress != nil {
		t.Errorf("info %+v: tier MICROVM, blocked egress not reported", sb.Info())
	}

	res, err := sb.Run(t.Context(), []string{"sh", "-c", "echo out $LANG $API_TOKEN; echo err >&2; exit 7"}, backends.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 7 || string(res.Stdout) != "out C.UTF-8 secret-value-123\n" || string(res.Stderr) != "err\n" {
		t.Errorf("run: exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	res, err = sb.Run(t.Context(), []string{"cat"}, backends.RunOptions{Stdin: []byte("from stdin")})
	if err != nil || string(res.Stdout) != "from stdin" {
		t.Errorf("stdin: %q, %v", res.Stdout, err)
	}
	res, err = sb.RunCode(t.Context(), "sh", "echo code $((6*7))", backends.RunOptions{})
	if err != nil || string(res.Stdout) != "code 42\n" {
		t.Errorf("run code: %q, %v", res.Stdout, err)
	}
	if err := sb.Upload(t.Context(), "/work/data/x.sh", []byte("echo uploaded\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	res, err = sb.Run(t.Context(), []string{"sh", "-c", "sh /work/data/x.sh; stat -c %a /work/data/x.sh"}, backends.RunOptions{})
	if err != nil || string(res.Stdout) != "uploaded\n755\n" {
		t.Errorf("upload: %q, %v", res.Stdout, err)
	}

	infos, err := b.List(t.Context(), map[string]string{model.LabelTenantID: "acme", model.LabelSessionID: s.SessionID})
	if err != nil || len(infos) != 1 || infos[0].ID != sb.ID() {
		t.Fatalf("list by labels: %+v, %v", infos, err)
	}
	if err := sb.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := sb.Kill(t.Context()); err != nil {
		t.Errorf("a second kill: %v (kill is idempotent)", err)
	}
	if _, err := sb.Run(t.Context(), []string{"true"}, backends.RunOptions{}); !errors.Is(err, model.ErrSandboxGone) {
		t.Errorf("run after close: %v, want SandboxGone", err)
	}
	if rec, _ := srv.Observe(sb.ID()); rec.Ended != "killed" || len(srv.Running()) != 0 {
		t.Errorf("after close: ended %q, running %v", rec.Ended, srv.Running())
	}
}

func TestAllowListAndCaps(t *testing.T) {
	srv, b := open(t)
	sb := create(t, b, spec(func(s *model.Spec) { s.Network.Allow = []string{"151.101.0.0/16", "pypi.org", "*.pythonhosted.org"} }), nil)
	rec, _ := srv.Observe(sb.ID())
	if !reflect.DeepEqual(rec.DenyOut, []string{"0.0.0.0/0"}) || !reflect.DeepEqual(rec.AllowOut, []string{"151.101.0.0/16", "pypi.org", "*.pythonhosted.org"}) {
		t.Errorf("allow list as sent: denyOut %v allowOut %v", rec.DenyOut, rec.AllowOut)
	}
	if rec.LocalNetwork != "none" || len(rec.Unenforced) == 0 {
		t.Errorf("the local server must report the allow list it cannot enforce: %v %v", rec.LocalNetwork, rec.Unenforced)
	}
	_, err := b.Create(t.Context(), backends.CreateRequest{Spec: spec(func(s *model.Spec) { s.Resources.MemoryMB = 2048 })})
	var me *model.Error
	if !errors.As(err, &me) || me.Class != model.ErrConfiguration || !strings.Contains(me.Error(), e2bserver.TestTemplate) {
		t.Errorf("caps on E2B: %v, want a ConfigurationError naming the template", err)
	}
	_, err = b.Create(t.Context(), backends.CreateRequest{Spec: spec(func(s *model.Spec) { s.Image = "no-such-template" })})
	if !errors.As(err, &me) || me.Class != model.ErrConfiguration || me.Attribute != "image" {
		t.Errorf("unknown template: %v, want a ConfigurationError on image", err)
	}
}

func TestExecTimeoutKillsAndLifetimeEnds(t *testing.T) {
	srv, b := open(t)
	sb := create(t, b, spec(func(s *model.Spec) { s.LifetimeSeconds = 6 }), nil)
	start := time.Now()
	_, err := sb.Run(t.Context(), []string{"sh", "-c", "echo partial; sleep 37"}, backends.RunOptions{Timeout: 700 * time.Millisecond})
	took := time.Since(start)
	if !errors.Is(err, model.ErrExecutionTimeout) {
		t.Fatalf("timeout: %v, want ExecutionTimeout", err)
	}
	if took > 700*time.Millisecond+time.Second {
		t.Errorf("ExecutionTimeout after %s, want within 1 s of the 700ms timeout", took)
	}
	var ps string
	for range 50 {
		res, err := sb.Run(t.Context(), []string{"ps"}, backends.RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ps = string(res.Stdout); !strings.Contains(ps, "sleep 37") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if strings.Contains(ps, "sleep 37") {
		t.Errorf("the timed-out command still runs:\n%s", ps)
	}
	time.Sleep(time.Until(sb.Info().Expires) + 500*time.Millisecond)
	if _, err := sb.Run(t.Context(), []string{"true"}, backends.RunOptions{}); !errors.Is(err, model.ErrSandboxGone) {
		t.Errorf("after the lifetime: %v, want SandboxGone", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, _ := srv.Observe(sb.ID())
		if r.Ended == "timeout" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not end the sandbox at its timeout (ended %q)", r.Ended)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestVendorSideEnd: a sandbox E2B ended (killed elsewhere) is SandboxGone
// on the next command, as envd's proxy answers for it.
func TestVendorSideEnd(t *testing.T) {
	srv, b := open(t)
	sb := create(t, b, spec(), nil)
	req, _ := http.NewRequest(http.MethodDelete, srv.URL+"/sandboxes/"+sb.ID(), nil)
	req.Header.Set("X-API-Key", canaryKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("kill from outside: %v %v", resp, err)
	}
	resp.Body.Close()
	if _, err := sb.Run(t.Context(), []string{"true"}, backends.RunOptions{}); !errors.Is(err, model.ErrSandboxGone) {
		t.Errorf("run in a sandbox E2B ended: %v, want SandboxGone", err)
	}
	if err := sb.Upload(t.Context(), "/tmp/x", []byte("x"), 0o644); !errors.Is(err, model.ErrSandboxGone) {
		t.Errorf("upload to a sandbox E2B ended: %v, want SandboxGone", err)
	}
	if err := sb.Close(t.Context()); err != nil {
		t.Errorf("close of a sandbox already gone: %v", err)
	}
}

func TestFaultsAndCanary(t *testing.T) {
	srv, b := open(t)
	// 429 with Retry-After on an idempotent call: retried, honoured.
	srv.Inject(e2bserver.Fault{Op: e2bserver.OpList, Status: 429, RetryAfter: time.Second, Times: 1})
	start := time.Now()
	if _, err := b.List(t.Context(), map[string]string{"x": "y"}); err != nil {
		t.Fatalf("list after one 429: %v", err)
	}
	if n := srv.Requests(e2bserver.OpList); n != 2 || time.Since(start) < time.Second {
		t.Errorf("list: %d requests in %s, want 2 after Retry-After 1s", n, time.Since(start))
	}
	// A 503 after the sandbox was made: the retry must not make a second.
	srv.Inject(e2bserver.Fault{Op: e2bserver.OpCreate, Status: 503, Applied: true})
	s := spec()
	sb := create(t, b, s, nil)
	infos, _ := b.List(t.Context(), map[string]string{model.LabelSessionID: s.SessionID})
	if len(infos) != 1 || infos[0].ID != sb.ID() || srv.Requests(e2bserver.OpCreate) != 2 {
		t.Errorf("after an ambiguous create: %d sandboxes for the session, %d creates", len(infos), srv.Requests(e2bserver.OpCreate))
	}
	srv.Clear()
	// A persistent 500 on kill: a clear error, retried.
	srv.Inject(e2bserver.Fault{Op: e2bserver.OpKill, Status: 500, Times: 100})
	err := sb.Kill(t.Context())
	if err == nil || !strings.Contains(err.Error(), "500") || srv.Requests(e2bserver.OpKill) < 2 {
		t.Errorf("kill under 500s: %v after %d requests", err, srv.Requests(e2bserver.OpKill))
	}
	srv.Clear()
	// A bad key: ConfigurationError, and no key in any error.
	t.Setenv(e2b.EnvAPIKey, canaryKey+"-wrong")
	bad, _ := e2b.New(backends.DSN{Scheme: "e2b", Options: map[string]string{}})
	_, err = bad.Create(t.Context(), backends.CreateRequest{Spec: spec()})
	if !errors.Is(err, model.ErrConfiguration) || !strings.Contains(err.Error(), "401") {
		t.Errorf("bad key: %v", err)
	}
	for _, e := range []error{err} {
		for _, form := range []string{e.Error(), fmt.Sprintf("%+v", e), fmt.Sprintf("%#v", bad)} {
			if strings.Contains(form, canaryKey) {
				t.Errorf("the API key leaked: %s", form)
			}
		}
	}
	tok := srv.AccessToken(sb.ID())
	if tok == "" || strings.Contains(fmt.Sprintf("%v %+v %#v %v", sb, sb, sb, sb.Info()), tok) {
		t.Errorf("the envd access token leaked in the sandbox's formatting (or is unknown)")
	}
}
