package main

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	dockertest "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/docker"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
	"github.com/sandboxio/terraform-provider-sandboxio/sandbox/docker"
)

// cliChildEnv turns the test binary into the CLI itself (see TestMain), for
// the tests that need the CLI as a separate process: one that exits, so that
// its sandboxes' owner is gone.
const cliChildEnv = "SANDBOXIO_TEST_CLI"

// runID labels every sandbox this test process (and its CLI children)
// creates (label test_run), so that the leak check finds exactly ours.
var runID = dockertest.RunID

func TestMain(m *testing.M) {
	if os.Getenv(cliChildEnv) == "1" {
		// As main does.
		protect()
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := run(ctx, os.Args[1:], &env{stdout: os.Stdout, stderr: os.Stderr, stdin: os.Stdin, now: time.Now, reexec: true})
		stop()
		os.Exit(code)
	}
	code := m.Run()
	closeE2B()
	closeDaytona()
	os.Exit(dockertest.CheckLeaks(code))
}

// needDocker skips the test (or fails it under SANDBOXIO_REQUIRE_DOCKER=1)
// when no daemon answers, and makes sure the local image exists.
func needDocker(t testing.TB) { dockertest.Need(t) }

func countLabelled(t testing.TB, labels ...string) int {
	t.Helper()
	return len(labelled(t, labels...))
}

// labelled lists the containers carrying every label ("key=value").
func labelled(t testing.TB, labels ...string) []container.Summary {
	t.Helper()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	f := filters.NewArgs()
	for _, l := range labels {
		f.Add("label", l)
	}
	cs, err := cli.ContainerList(t.Context(), container.ListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// specFile renders a per-tenant spec of a small template of the local image
// into a file, and returns the file and the spec's sha256.
func specFile(t testing.TB, tenant, session string, mods ...func(*inputs.Template)) (string, string) {
	t.Helper()
	timeout, lifetime := int64(30), int64(120)
	disk := int64(64)
	tpl := inputs.Template{
		Name: "cli", Backend: "docker://", Image: docker.LocalImage,
		TimeoutSeconds: &timeout, LifetimeSeconds: &lifetime,
		Caps:   model.CapsRequest{DiskMB: &disk},
		Labels: map[string]string{"test_run": runID},
	}
	for _, m := range mods {
		m(&tpl)
	}
	spec, _, err := tpl.Build("")
	if err != nil {
		t.Fatal(err)
	}
	ts, _, err := inputs.Tenant{TenantID: tenant, SessionID: session}.Sandbox(spec)
	if err != nil {
		t.Fatal(err)
	}
	b, sum, err := ts.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "spec.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p, sum
}
