package e2bserver

import (
	"context"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/fakes/fakeserver"
)

// Test support for the packages whose tests run against the server.

var probe = fakeserver.Probe{Prepare: func(ctx context.Context) error {
	return EnsureTemplateImage(ctx, docker.DefaultBusybox)
}}

// NeedDocker skips (or, with SANDBOXIO_REQUIRE_DOCKER=1, fails) without a
// usable daemon, and builds the template image.
func NeedDocker(t testing.TB) {
	t.Helper()
	probe.Need(t)
}

// TestTemplate is the template ID the test servers serve.
const TestTemplate = "base"

// NewTestServer starts a server over the Docker backend; the test closes it
// and checks that every local sandbox it made is gone.
func NewTestServer(t testing.TB, key string) *Server {
	t.Helper()
	NeedDocker(t)
	return fakeserver.OnDocker(t, func(d backends.Backend) (*Server, error) {
		return Start(Config{APIKey: key, Docker: d, MaxTimeout: 10 * time.Minute,
			Templates: map[string]Template{TestTemplate: {Image: TemplateImage, CPUCount: 1, MemoryMB: 512, DiskSizeMB: 1024}}})
	}, (*Server).containers)
}

// containers lists the local container of every sandbox the server made.
func (s *Server) containers() []string {
	return fakeserver.IDs(&s.mu, s.records, func(r *Record) string { return r.DockerID })
}
