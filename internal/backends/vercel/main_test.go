package vercel_test

import (
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/vercel"
	vercelserver "github.com/sandboxio/terraform-provider-sandboxio/internal/fakes/vercel"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// canaryToken is the access token of the tests: it must never appear in an
// error, a formatted value or the server's records.
const canaryToken = "vercel_canary_3f2e1d0c9b8a7968574635241302a1b0"

func TestMain(m *testing.M) {
	if os.Getenv(docker.ScopeEnv) == "" {
		_ = os.Setenv(docker.ScopeEnv, fmt.Sprintf("vercel-test-%d", os.Getpid()))
	}
	os.Exit(m.Run())
}

const testDSN = "vercel://" + vercelserver.TestTeam + "/" + vercelserver.TestProject

// open starts a server and an adapter pointed at it, with the access token
// (VERCEL_TOKEN) as a user would set it.
func open(t testing.TB) (*vercelserver.Server, backends.Backend) {
	t.Helper()
	srv := vercelserver.NewTestServer(t, canaryToken)
	t.Setenv(vercel.EnvOIDCToken, "")
	t.Setenv(vercel.EnvToken, canaryToken)
	t.Setenv(vercel.EnvAPIURL, srv.URL)
	b, err := vercel.New(backends.DSN{Scheme: "vercel", Team: vercelserver.TestTeam, Project: vercelserver.TestProject, Options: map[string]string{}})
	if err != nil {
		t.Fatal(err)
	}
	return srv, b
}

var sessions atomic.Int64

// vercelCaps are caps Vercel takes exactly: one vCPU with its 2048 MB.
var vercelCaps = model.Caps{CPU: 1, MemoryMB: 2048, DiskMB: model.DefaultDiskMB, Pids: model.DefaultPids}

func baseSpec() model.Spec {
	return model.Spec{SpecVersion: model.SpecVersion, Name: "t", Backend: testDSN, Image: "node22",
		Network: model.NetworkPolicy{}.Normalized(), Resources: vercelCaps, TimeoutSeconds: 60, LifetimeSeconds: 120}
}

func spec(mods ...func(*model.Spec)) model.Spec {
	s := baseSpec().ForTenant("acme", fmt.Sprintf("s-%d", sessions.Add(1)), map[string]string{"team": "agents"})
	for _, m := range mods {
		m(&s)
	}
	return s
}

// observe maps the server's record to what the conformance suite checks.
func observe(srv *vercelserver.Server, id string) (vercelserverObserved, bool) {
	rec, ok := srv.Observe(id)
	if !ok {
		return vercelserverObserved{}, false
	}
	allow := slices.Concat(rec.AllowDomains, rec.AllowCIDRs)
	return vercelserverObserved{Labels: rec.Tags, PlainEnv: rec.Env, Denied: rec.NetworkMode == "deny-all", Allow: allow,
		Caps: model.Caps{CPU: float64(rec.VCPUs), MemoryMB: int64(rec.MemoryMB)}, Lifetime: rec.Timeout}, true
}

type vercelserverObserved struct {
	Labels, PlainEnv map[string]string
	Denied           bool
	Allow            []string
	Caps             model.Caps
	Lifetime         time.Duration
}
