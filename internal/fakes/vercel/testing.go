package vercelserver

import (
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/fakes/fakeserver"
)

// Test support for the packages whose tests run against the server.

// The team and project the test servers serve.
const (
	TestTeam    = "team_sandboxio0conformance"
	TestProject = "prj_sandboxio0conformance"
)

var probe = fakeserver.Probe{Prepare: fakeserver.LocalImage}

// NeedDocker skips (or, with SANDBOXIO_REQUIRE_DOCKER=1, fails) without a
// usable daemon, and builds the local image.
func NeedDocker(t testing.TB) {
	t.Helper()
	probe.Need(t)
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
	return fakeserver.OnDocker(t, func(d backends.Backend) (*Server, error) {
		return Start(Config{Tokens: tokens, TeamID: TestTeam, ProjectID: TestProject, Docker: d,
			MaxTimeout: 45 * time.Minute, Runtimes: TestRuntimes()})
	}, (*Server).containers)
}

// containers lists the local container of every sandbox the server made.
func (s *Server) containers() []string {
	return fakeserver.IDs(&s.mu, s.records, func(r *Record) string { return r.DockerID })
}
