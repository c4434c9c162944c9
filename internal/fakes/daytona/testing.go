package daytonaserver

import (
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/fakes/fakeserver"
)

// Test support for the packages whose tests run against the server.

var probe = fakeserver.Probe{Prepare: fakeserver.LocalImage}

// NeedDocker skips (or, with SANDBOXIO_REQUIRE_DOCKER=1, fails) without a
// usable daemon, and builds the local image the snapshot stands for.
func NeedDocker(t testing.TB) {
	t.Helper()
	probe.Need(t)
}

// TestSnapshot is the snapshot name the test servers serve.
const TestSnapshot = "sandboxio-busybox"

// NewTestServer starts a server over the Docker backend, with Daytona's
// minute shortened to minute (0 keeps a real minute); the test closes it
// and checks that every local sandbox it made is gone.
func NewTestServer(t testing.TB, key string, minute time.Duration) *Server {
	t.Helper()
	NeedDocker(t)
	return fakeserver.OnDocker(t, func(d backends.Backend) (*Server, error) {
		return Start(Config{APIKey: key, Docker: d, Minute: minute, MaxCommand: 10 * time.Minute,
			Snapshots: map[string]string{TestSnapshot: docker.LocalImage}})
	}, (*Server).containers)
}

// containers lists the local container of every sandbox the server made.
func (s *Server) containers() []string {
	return fakeserver.IDs(&s.mu, s.records, func(r *Record) string { return r.DockerID })
}
