package vercel_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/vercel"
	vercelserver "github.com/sandboxio/terraform-provider-sandboxio/internal/fakes/vercel"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

var dsn = backends.DSN{Scheme: "vercel", Team: vercelserver.TestTeam, Project: vercelserver.TestProject, Options: map[string]string{}}

func create(t *testing.T, b backends.Backend, s model.Spec, secrets map[string]string) backends.Sandbox {
	t.Helper()
	sb, err := b.Create(t.Context(), backends.CreateRequest{Spec: s, Secrets: secrets})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() { _ = sb.Close(context.WithoutCancel(t.Context())) })
	return sb
}

// TestCreateAsVercelTakesIt: what the adapter sends is what Vercel
// enforces: the runtime, the lifetime as the session timeout, the vCPUs,
// deny-all, the labels as tags, the env without the secrets (which go with
// each command only).
func TestCreateAsVercelTakesIt(t *testing.T) {
	srv, b := open(t)
	s := spec(func(s *model.Spec) {
		s.Env = map[string]string{"LANG": "C.UTF-8"}
		s.SecretNames = []string{"API_TOKEN"}
		s.Resources = model.Caps{CPU: 2, MemoryMB: 4096, DiskMB: model.DefaultDiskMB, Pids: model.DefaultPids}
	})
	sb := create(t, b, s, map[string]string{"API_TOKEN": "secret-value-123"})
	rec, ok := srv.Observe(sb.ID())
	if !ok || !strings.HasPrefix(sb.ID(), "sandboxio-") {
		t.Fatalf("the server has no sandbox %s", sb.ID())
	}
	if rec.Path != "/v2/sandboxes" || rec.Runtime != "node22" || rec.VCPUs != 2 || rec.MemoryMB != 4096 || rec.Timeout != 120*time.Second ||
		rec.NetworkMode != "deny-all" || rec.LocalNetwork != "none" || !reflect.DeepEqual(rec.Tags, s.Labels) || rec.Persistent {
		t.Errorf("create as recorded: %+v", rec)
	}
	if rec.Env["LANG"] != "C.UTF-8" || rec.Env["API_TOKEN"] != "" {
		t.Errorf("create env %v: the secret must not be in it", rec.Env)
	}
	res, err := sb.Run(t.Context(), []string{"sh", "-c", "echo out $LANG $API_TOKEN; echo err >&2; exit 7"}, backends.RunOptions{})
	if err != nil || res.ExitCode != 7 || string(res.Stdout) != "out C.UTF-8 secret-value-123\n" || string(res.Stderr) != "err\n" {
		t.Errorf("run: %+v, %v", res, err)
	}
	res, err = sb.Run(t.Context(), []string{"cat"}, backends.RunOptions{Stdin: []byte("from stdin")})
	if err != nil || string(res.Stdout) != "from stdin" {
		t.Errorf("stdin: %q, %v", res.Stdout, err)
	}
	res, err = sb.Run(t.Context(), []string{"sh", "-c", "ls /tmp/.sandboxio-stdin-* 2>/dev/null | wc -l"}, backends.RunOptions{})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "0" {
		t.Errorf("the stdin file was left behind: %q, %v", res.Stdout, err)
	}
	if info := sb.Info(); info.Tier != model.TierMicroVM || info.BlockedEgress != nil || !info.Running {
		t.Errorf("info %+v: tier MICROVM, blocked egress not reported, running", info)
	}
	if err := sb.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if rec, _ := srv.Observe(sb.ID()); rec.Ended != "stopped" || !rec.Deleted {
		t.Errorf("close: ended %q deleted %v, want the session stopped and the sandbox deleted", rec.Ended, rec.Deleted)
	}
}

// TestAllowListAsSubnetsAndDomains: domains go in allow, addresses and
// CIDR blocks in subnets.allow (an address as a /32).
func TestAllowListAsSubnetsAndDomains(t *testing.T) {
	srv, b := open(t)
	sb := create(t, b, spec(func(s *model.Spec) {
		s.Network.Allow = []string{"151.101.0.0/16", "192.0.2.7", "pypi.org", "*.pythonhosted.org"}
	}), nil)
	rec, _ := srv.Observe(sb.ID())
	if rec.NetworkMode != "custom" || !reflect.DeepEqual(rec.AllowDomains, []string{"pypi.org", "*.pythonhosted.org"}) ||
		!reflect.DeepEqual(rec.AllowCIDRs, []string{"151.101.0.0/16", "192.0.2.7/32"}) || len(rec.Unenforced) != 1 {
		t.Errorf("network as recorded: %+v", rec)
	}
}

// TestRefusedBeforeAnyCall: what Vercel cannot take exactly is refused
// under the policy's rule, and nothing is created.
func TestRefusedBeforeAnyCall(t *testing.T) {
	srv, b := open(t)
	caps := func(c model.Caps) func(*model.Spec) { return func(s *model.Spec) { s.Resources = c } }
	for _, c := range []struct {
		what string
		mod  func(*model.Spec)
		rule string
	}{
		{"default memory", caps(model.DefaultCaps()), rules.ResVCPUSteps},
		{"half a vCPU", caps(model.Caps{CPU: 0.5, MemoryMB: 1024, DiskMB: 1024, Pids: 256}), rules.ResVCPUSteps},
		{"nine vCPUs", caps(model.Caps{CPU: 9, MemoryMB: 9 * 2048, DiskMB: 1024, Pids: 256}), rules.ResVCPUSteps},
		{"a disk cap", caps(model.Caps{CPU: 1, MemoryMB: 2048, DiskMB: 4096, Pids: 256}), rules.ResNotSettable},
		{"a lifetime above 5 hours", func(s *model.Spec) { s.LifetimeSeconds = 18001 }, rules.TmoAboveMax},
		{"learn", func(s *model.Spec) { s.Network = model.NetworkPolicy{Egress: model.EgressLearn} }, rules.NetLearn},
		{"six labels", func(s *model.Spec) { s.Labels["a"], s.Labels["b"] = "1", "2" }, rules.LblTooMany},
	} {
		_, err := b.Create(t.Context(), backends.CreateRequest{Spec: spec(c.mod)})
		var me *model.Error
		if !errors.As(err, &me) || me.Rule != c.rule || me.Class != model.ErrCapabilityNotSupported && me.Class != model.ErrConfiguration {
			t.Errorf("%s: %v, want a typed refusal under %q", c.what, err, c.rule)
		}
	}
	if n := srv.Requests(vercelserver.OpCreate); n != 0 {
		t.Errorf("%d creates reached the server", n)
	}
}

// TestExecTimeoutAndLifetime: a command past its timeout is
// ExecutionTimeout, killed; at the lifetime Vercel stops the session and
// every use is SandboxGone, never a resumed session.
func TestExecTimeoutAndLifetime(t *testing.T) {
	srv, b := open(t)
	sb := create(t, b, spec(func(s *model.Spec) { s.LifetimeSeconds = 12 }), nil)
	start := time.Now()
	_, err := sb.Run(t.Context(), []string{"sh", "-c", "echo partial; sleep 37"}, backends.RunOptions{Timeout: 700 * time.Millisecond})
	if !errors.Is(err, model.ErrExecutionTimeout) || time.Since(start) > 700*time.Millisecond+time.Second {
		t.Fatalf("timeout: %v after %s, want ExecutionTimeout within 1 s", err, time.Since(start))
	}
	res, err := sb.Run(t.Context(), []string{"sh", "-c", "ps | grep -c 'sleep 3[7]'"}, backends.RunOptions{})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "0" {
		t.Errorf("the timed-out command still runs: %q, %v", res.Stdout, err)
	}
	_, err = sb.Run(t.Context(), []string{"sleep", "30"}, backends.RunOptions{Timeout: 20 * time.Second})
	if !errors.Is(err, model.ErrSandboxGone) {
		t.Fatalf("a command at the lifetime: %v, want SandboxGone", err)
	}
	if err := sb.Upload(t.Context(), "/tmp/x", []byte("x"), 0o644); !errors.Is(err, model.ErrSandboxGone) {
		t.Errorf("upload after the lifetime: %v, want SandboxGone", err)
	}
	if rec, _ := srv.Observe(sb.ID()); rec.Ended != "timeout" {
		t.Errorf("the server ended the session for %q, want its timeout", rec.Ended)
	}
}

// TestVendorSideStop: a session stopped elsewhere is SandboxGone on the
// next command and upload (410); reap removes the stopped sandbox's
// record, and Close still succeeds.
func TestVendorSideStop(t *testing.T) {
	srv, b := open(t)
	s := spec()
	sb := create(t, b, s, nil)
	labels := map[string]string{model.LabelTenantID: "acme", model.LabelSessionID: s.SessionID}
	infos, err := b.List(t.Context(), labels)
	if err != nil || len(infos) != 1 || infos[0].ID != sb.ID() {
		t.Fatalf("list: %+v, %v", infos, err)
	}
	rec, _ := srv.Observe(sb.ID())
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v2/sandboxes/sessions/"+rec.SessionID+"/stop?teamId="+vercelserver.TestTeam, nil)
	req.Header.Set("Authorization", "Bearer "+canaryToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("stop from outside: %v %v", resp, err)
	}
	resp.Body.Close()
	if _, err := sb.Run(t.Context(), []string{"true"}, backends.RunOptions{}); !errors.Is(err, model.ErrSandboxGone) {
		t.Errorf("run in a stopped session: %v, want SandboxGone", err)
	}
	if err := sb.Upload(t.Context(), "/tmp/x", []byte("x"), 0o644); !errors.Is(err, model.ErrSandboxGone) {
		t.Errorf("upload to a stopped session: %v, want SandboxGone", err)
	}
	if infos, err := b.List(t.Context(), labels); err != nil || len(infos) != 0 {
		t.Errorf("a stopped sandbox is still listed: %+v, %v", infos, err)
	}
	reaped, err := b.(backends.Reaper).Reap(t.Context(), backends.ReapOptions{Labels: labels})
	if err != nil || len(reaped) != 1 || reaped[0].Info.ID != sb.ID() {
		t.Errorf("reap of the stopped sandbox: %+v, %v", reaped, err)
	}
	if rec, _ := srv.Observe(sb.ID()); !rec.Deleted {
		t.Errorf("reap did not delete the stopped sandbox")
	}
	if err := sb.Close(t.Context()); err != nil {
		t.Errorf("close of a sandbox already gone: %v", err)
	}
}

// TestCredentialsAndCanary: a bad token is a ConfigurationError naming the
// credentials; no token, or an OIDC token of another project, is refused
// at open; the token never appears in an error or a formatted value.
func TestCredentialsAndCanary(t *testing.T) {
	srv, b := open(t)
	t.Setenv(vercel.EnvToken, canaryToken+"-wrong")
	bad, err := vercel.New(dsn)
	if err != nil {
		t.Fatal(err)
	}
	_, err = bad.Create(t.Context(), backends.CreateRequest{Spec: spec()})
	var me *model.Error
	if !errors.As(err, &me) || me.Class != model.ErrConfiguration || me.Attribute != "credentials" || !strings.Contains(err.Error(), "403") {
		t.Errorf("bad token: %v", err)
	}
	forms := []string{err.Error(), fmt.Sprintf("%+v %#v %v %#v", err, bad, b, b)}
	t.Setenv(vercel.EnvToken, canaryToken)
	other, _ := vercel.New(backends.DSN{Scheme: "vercel", Team: vercelserver.TestTeam, Project: "prj_other", Options: map[string]string{}})
	_, err = other.Create(t.Context(), backends.CreateRequest{Spec: spec()})
	if !errors.As(err, &me) || me.Class != model.ErrConfiguration || !strings.Contains(me.Message, "prj_other") {
		t.Errorf("unknown project: %v, want a ConfigurationError naming it", err)
	}
	t.Setenv(vercel.EnvToken, "")
	if _, err := vercel.New(dsn); !errors.Is(err, model.ErrConfiguration) || !strings.Contains(err.Error(), vercel.EnvToken) {
		t.Errorf("no token: %v", err)
	}
	t.Setenv(vercel.EnvOIDCToken, vercelserver.OIDCToken(vercelserver.TestTeam, "prj_other", "x"))
	if _, err := vercel.New(dsn); !errors.Is(err, model.ErrConfiguration) {
		t.Errorf("an OIDC token of another project: %v", err)
	}
	// The OIDC token of the DSN's project opens.
	oidc := vercelserver.OIDCToken(vercelserver.TestTeam, vercelserver.TestProject, "ok")
	t.Setenv(vercel.EnvOIDCToken, oidc)
	ob, err := vercel.New(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ob.List(t.Context(), map[string]string{"x": "y"}); !errors.Is(err, model.ErrConfiguration) {
		t.Errorf("the server accepts only the canary token, so the OIDC token is refused: %v", err)
	}
	forms = append(forms, fmt.Sprintf("%v %+v %#v", ob, ob, ob))
	for _, f := range forms {
		if strings.Contains(f, canaryToken) || strings.Contains(f, oidc) {
			t.Errorf("a token leaked: %s", f)
		}
	}
	_ = srv
}
