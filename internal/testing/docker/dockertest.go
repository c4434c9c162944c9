// Package dockertest is the Docker test harness shared by the packages whose
// tests drive the real daemon: a probe that skips (or, under
// SANDBOXIO_REQUIRE_DOCKER=1, fails) when no daemon answers and that builds
// the local image, a per-process run id to label test sandboxes with, and the
// leak check their TestMain runs.
package dockertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/testing/docker/probeimage"
)

// RequireEnv makes Docker tests fail instead of skipping when no daemon
// answers (CI sets it after starting one).
const RequireEnv = "SANDBOXIO_REQUIRE_DOCKER"

// RunIDEnv passes the run id to child processes a test starts, so that
// their sandboxes are found by the same leak check.
const RunIDEnv = "SANDBOXIO_TEST_RUN_ID"

// RunID labels (label test_run) every sandbox this test process and its
// children create, so that the leak check finds exactly those.
var RunID = func() string {
	if id := os.Getenv(RunIDEnv); id != "" {
		return id
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}()

// The scope of the one-sandbox-per-tenant-and-session rule (docker.ScopeEnv)
// is this run's, unless set already: test runs sharing a daemon (CI jobs,
// other packages' tests, a developer's shells) use the same tenant and
// session ids without holding each other's. Child processes a test starts
// inherit it, so within one run the rule holds across processes.
func init() {
	if os.Getenv(docker.ScopeEnv) == "" {
		_ = os.Setenv(docker.ScopeEnv, "test-"+RunID)
	}
}

var probe struct {
	once sync.Once
	done bool
	err  error
	cli  *client.Client
}

// Need returns a client of a daemon that answers and holds the local test
// image, or skips the test saying why (fails it under RequireEnv=1).
func Need(t testing.TB) *client.Client {
	t.Helper()
	probe.once.Do(func() {
		probe.done = true
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
		if err != nil {
			probe.err = err
			return
		}
		if _, err := cli.Info(ctx); err != nil {
			probe.err = err
			return
		}
		probe.cli = cli
		probe.err = docker.EnsureLocalImage(ctx, docker.LocalImage, docker.DefaultBusybox)
	})
	if probe.err != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("Docker daemon required (%s=1) but not usable: %v", RequireEnv, probe.err)
		}
		t.Skipf("SKIP: no usable Docker daemon (%v); run scripts/docker-up.sh, or set %s=1 to fail instead of skipping", probe.err, RequireEnv)
	}
	return probe.cli
}

// CheckLeaks is for TestMain: after the tests ran, it removes every
// container labelled with this run's id and turns a passing exit code into a
// failure if there were any.
func CheckLeaks(code int) int {
	if !probe.done || probe.err != nil {
		return code
	}
	if left := leftovers(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: sandboxio containers left behind by this test run:\n  %s\n", strings.Join(left, "\n  "))
		return 1
	}
	return code
}

func leftovers() []string {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return []string{"docker client: " + err.Error()}
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := settled(ctx, cli, "test_run="+RunID)
	if err != nil {
		return []string{"container list: " + err.Error()}
	}
	var left []string
	for _, c := range cs {
		left = append(left, fmt.Sprintf("%s %v %s", c.ID[:12], c.Names, c.State))
		_ = cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
	}
	return left
}

// settled lists the containers carrying every one of labels by the rule a
// close is held to. A close confirms the kill within the teardown grace; the
// removal of the stopped container may finish a little later (the daemon's
// AutoRemove, the close's background removal), and the daemon's list may
// still show a container for a moment after inspecting it says it is gone.
// So a running container is left at once, a stopped one only if it is still
// there after 30 s.
func settled(ctx context.Context, cli *client.Client, labels ...string) ([]container.Summary, error) {
	f := filters.NewArgs()
	for _, l := range labels {
		f.Add("label", l)
	}
	for wait := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		cs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
		if err != nil || len(cs) == 0 || time.Now().After(wait) ||
			slices.ContainsFunc(cs, func(c container.Summary) bool { return c.State == "running" }) {
			return cs, err
		}
	}
}

// Left counts the containers carrying every one of labels that closes left
// behind: any that still runs, and any stopped one still there 30 s on.
func Left(t testing.TB, labels ...string) int {
	t.Helper()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cs, err := settled(ctx, cli, labels...)
	if err != nil {
		t.Fatalf("container list: %v", err)
	}
	return len(cs)
}

// CheckStopped fails the test for any of the containers that still runs
// 30 s on: the local sandboxes of a vendor conformance server, once the
// server has closed.
// It runs in the server's t.Cleanup, after t.Context is cancelled.
func CheckStopped(t testing.TB, ids []string) {
	t.Helper()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Error(err)
		return
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 30*time.Second)
	defer cancel()
	for _, id := range ids {
		for {
			ins, err := cli.ContainerInspect(ctx, id)
			if cerrdefs.IsNotFound(err) || (err == nil && ins.State != nil && !ins.State.Running) {
				break
			}
			if ctx.Err() != nil {
				t.Errorf("local sandbox container %s is still there after the server closed", id)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// ProbeImage is the test image with egressprobe (package probeimage) at
// /bin/egressprobe, built on first use.
func ProbeImage(t testing.TB) string {
	t.Helper()
	tag, err := probeimage.Image(func(ctx context.Context, tag string, files map[string][]byte) error {
		return docker.EnsureImageWithFiles(ctx, tag, docker.DefaultBusybox, files)
	})
	if err != nil {
		t.Fatal(err)
	}
	return tag
}
