package daytonaserver

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker"
	dockertest "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/docker"
)

// Test support for the packages whose tests run against the server.

const requireDockerEnv = "SANDBOXIO_REQUIRE_DOCKER"

var probe struct {
	once sync.Once
	err  error
}

// NeedDocker skips (or, with SANDBOXIO_REQUIRE_DOCKER=1, fails) without a
// usable daemon, and builds the local image the snapshot stands for.
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

// TestSnapshot is the snapshot name the test servers serve.
const TestSnapshot = "sandboxio-busybox"

// NewTestServer starts a server over the Docker backend, with Daytona's
// minute shortened to minute (0 keeps a real minute); the test closes it
// and checks that every local sandbox it made is gone.
func NewTestServer(t testing.TB, key string, minute time.Duration) *Server {
	t.Helper()
	NeedDocker(t)
	d, err := docker.New(docker.WithoutEgressObserver())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := Start(Config{APIKey: key, Docker: d, Minute: minute, MaxCommand: 10 * time.Minute,
		Snapshots: map[string]string{TestSnapshot: docker.LocalImage}})
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
