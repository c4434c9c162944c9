package vercelserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker"
	dockertest "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/docker"
)

// Test support for the packages whose tests run against the server.

const requireDockerEnv = "SANDBOXIO_REQUIRE_DOCKER"

// The team and project the test servers serve.
const (
	TestTeam    = "team_sandboxio0conformance"
	TestProject = "prj_sandboxio0conformance"
)

var probe struct {
	once sync.Once
	err  error
}

// NeedDocker skips (or, with SANDBOXIO_REQUIRE_DOCKER=1, fails) without a
// usable daemon, and builds the local image.
func NeedDocker(t testing.TB) {
	t.Helper()
	probe.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		probe.err = docker.EnsureLocalImage(ctx, docker.LocalImage, docker.DefaultBusybox)
	})
	if probe.err != nil {
		if os.Getenv(requireDockerEnv) == "1" {
			t.Fatalf("Docker daemon required (%s=1) but not usable: %v", requireDockerEnv, probe.err)
		}
		t.Skipf("SKIP: no usable Docker daemon (%v); set %s=1 to fail instead", probe.err, requireDockerEnv)
	}
}

// TestRuntimes are the runtimes the test servers serve, all over the local
// busybox image (whose shell is all a conformance test needs).
func TestRuntimes() map[string]string {
	return map[string]string{"node22": docker.LocalImage, "node24": docker.LocalImage, "python3.13": docker.LocalImage}
}

// OIDCToken is an unsigned token in the form of Vercel's OIDC tokens: a
// JWT whose payload names the team (owner_id) and project (project_id),
// which the SDK reads without verifying. The server accepts it only when
// configured to.
func OIDCToken(team, project, nonce string) string {
	enc := base64.RawURLEncoding
	payload, _ := json.Marshal(map[string]any{"owner_id": team, "project_id": project, "exp": time.Now().Add(24 * time.Hour).Unix(),
		"iat": time.Now().Unix(), "nonce": nonce})
	return enc.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + enc.EncodeToString(payload) + "." + enc.EncodeToString([]byte("unsigned"))
}

// NewTestServer starts a server over the Docker backend accepting the
// tokens; the test closes it and checks that every local sandbox it made
// is gone.
func NewTestServer(t testing.TB, tokens ...string) *Server {
	t.Helper()
	NeedDocker(t)
	d, err := docker.New(docker.WithoutEgressObserver())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := Start(Config{Tokens: tokens, TeamID: TestTeam, ProjectID: TestProject, Docker: d,
		MaxTimeout: 45 * time.Minute, Runtimes: TestRuntimes()})
	if err != nil {
		_ = d.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("server close: %v", err)
		}
		checkGone(t, srv)
		_ = d.Close()
	})
	return srv
}

// checkGone fails the test for any local container of the server's
// sandboxes that still runs.
func checkGone(t testing.TB, srv *Server) {
	t.Helper()
	srv.mu.Lock()
	var ids []string
	for _, r := range srv.records {
		ids = append(ids, r.DockerID)
	}
	srv.mu.Unlock()
	dockertest.CheckStopped(t, ids)
}
