package fakeserver

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker"
	dockertest "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/docker"
)

// RequireDockerEnv=1 (as in CI) turns the skips of the fakes' tests, for
// want of Docker, node or a vendor's SDK, into failures.
const RequireDockerEnv = "SANDBOXIO_REQUIRE_DOCKER"

// Main runs a fake's own tests in a Docker scope of their own, unless the
// environment names one.
func Main(m *testing.M, name string) {
	if os.Getenv(docker.ScopeEnv) == "" {
		_ = os.Setenv(docker.ScopeEnv, fmt.Sprintf("%s-test-%d", name, os.Getpid()))
	}
	os.Exit(m.Run())
}

// Probe checks, once per test binary, that Docker can run a fake's
// sandboxes.
type Probe struct {
	// Prepare builds the image the fake's sandboxes run.
	Prepare func(context.Context) error

	once sync.Once
	err  error
}

// LocalImage is the Prepare of the fakes whose sandboxes run the local
// test image (docker.LocalImage).
func LocalImage(ctx context.Context) error {
	return docker.EnsureLocalImage(ctx, docker.LocalImage, docker.DefaultBusybox)
}

// Need skips (or, with RequireDockerEnv=1, fails) the test without a
// usable daemon.
func (p *Probe) Need(t testing.TB) {
	t.Helper()
	p.once.Do(func() {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		p.err = p.Prepare(ctx)
	})
	if p.err != nil {
		if os.Getenv(RequireDockerEnv) == "1" {
			t.Fatalf("Docker daemon required (%s=1) but not usable: %v", RequireDockerEnv, p.err)
		}
		t.Skipf("SKIP: no usable Docker daemon (%v); set %s=1 to fail instead", p.err, RequireDockerEnv)
	}
}

// OnDocker starts a fake for one test over a Docker backend of its own.
// When the test ends it closes the fake, fails the test for any of the
// fake's containers that still runs, and closes the backend.
func OnDocker[S io.Closer](t testing.TB, start func(backends.Backend) (S, error), containers func(S) []string) S {
	t.Helper()
	d, err := docker.New(docker.WithoutEgressObserver())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := start(d)
	if err != nil {
		_ = d.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("server close: %v", err)
		}
		dockertest.CheckStopped(t, containers(srv))
		_ = d.Close()
	})
	return srv
}

// IDs lists id(r) for every record of m, holding mu.
func IDs[R any](mu *sync.Mutex, m map[string]R, id func(R) string) []string {
	mu.Lock()
	defer mu.Unlock()
	ids := make([]string, 0, len(m))
	for _, r := range m {
		ids = append(ids, id(r))
	}
	return ids
}
