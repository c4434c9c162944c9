package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// requireDockerEnv makes Docker tests fail instead of skipping when no
// daemon answers (CI sets it after starting one).
const requireDockerEnv = "SANDBOXIO_REQUIRE_DOCKER"

// childEnv turns the test binary into the helper process of
// TestReaperRemovesSandboxesOfKilledOwner (see childMain).
const childEnv = "SANDBOXIO_TEST_REAPER_CHILD"

var (
	// childOwners are owner ids of helper processes this run started; the
	// leftover check covers their containers too.
	childOwnersMu sync.Mutex
	childOwners   []string
)

// childModes maps an environment variable to the helper process the test
// binary becomes when it is set (the test files add theirs in init).
var childModes = map[string]func() int{childEnv: childMain}

func TestMain(m *testing.M) {
	for env, main := range childModes {
		if os.Getenv(env) != "" {
			os.Exit(main())
		}
	}
	if os.Getenv(ScopeEnv) == "" {
		// Test runs sharing a daemon (CI jobs, a developer's two shells) do
		// not hold each other's tenant and session names.
		_ = os.Setenv(ScopeEnv, "test-"+randomHex(6))
	}
	code := m.Run()
	if dockerProbe.err == nil && dockerProbe.done {
		if left := leftovers(); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "FAIL: sandboxio-labelled containers left behind by this test run:\n  %s\n", strings.Join(left, "\n  "))
			code = 1
		}
	}
	os.Exit(code)
}

// leftovers lists (and then removes, so one failing run does not poison the
// next) the containers this process or its helper children created.
func leftovers() []string {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return []string{"docker client: " + err.Error()}
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	childOwnersMu.Lock()
	owners := append([]string{processOwner().ID}, childOwners...)
	childOwnersMu.Unlock()
	var left []string
	for _, o := range owners {
		cs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
			filters.Arg("label", model.LabelManaged+"=true"), filters.Arg("label", labelOwner+"="+o))})
		if err != nil {
			return []string{"container list: " + err.Error()}
		}
		for _, c := range cs {
			left = append(left, fmt.Sprintf("%s %v %s", c.ID[:12], c.Names, c.State))
			_ = cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
		}
	}
	return left
}

var dockerProbe struct {
	once    sync.Once
	done    bool
	err     error
	runsc   bool
	runtime map[string]bool
}

// needDocker skips the test (or fails it under SANDBOXIO_REQUIRE_DOCKER=1)
// when no daemon answers, and makes sure the local image exists.
func needDocker(t testing.TB) {
	t.Helper()
	dockerProbe.once.Do(func() {
		dockerProbe.done = true
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
		if err != nil {
			dockerProbe.err = err
			return
		}
		defer cli.Close()
		info, err := cli.Info(ctx)
		if err != nil {
			dockerProbe.err = err
			return
		}
		dockerProbe.runtime = map[string]bool{}
		for name := range info.Runtimes {
			dockerProbe.runtime[name] = true
		}
		dockerProbe.err = EnsureLocalImage(ctx, LocalImage, DefaultBusybox)
	})
	if dockerProbe.err != nil {
		if os.Getenv(requireDockerEnv) == "1" {
			t.Fatalf("Docker daemon required (%s=1) but not usable: %v", requireDockerEnv, dockerProbe.err)
		}
		t.Skipf("SKIP: no usable Docker daemon (%v); run scripts/docker-up.sh, or set %s=1 to fail instead of skipping", dockerProbe.err, requireDockerEnv)
	}
}

// needRuntime additionally needs a runtime registered on the daemon.
func needRuntime(t testing.TB, rt string) {
	t.Helper()
	needDocker(t)
	if !dockerProbe.runtime[rt] {
		if os.Getenv(requireDockerEnv) == "1" {
			t.Fatalf("runtime %s is not registered on the daemon; scripts/docker-up.sh registers runsc", rt)
		}
		t.Skipf("SKIP: runtime %s is not registered on the daemon; run scripts/docker-up.sh", rt)
	}
}

func newTestBackend(t testing.TB, opts ...Option) *dockerBackend {
	t.Helper()
	b, err := newBackend(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// testSpec is a small sandbox of the local image; mods adjust it.
func testSpec(t testing.TB, mods ...func(*model.Spec)) model.Spec {
	s := model.Spec{
		SpecVersion:     model.SpecVersion,
		Name:            "test",
		Backend:         "docker://",
		Image:           LocalImage,
		Network:         model.NetworkPolicy{}.Normalized(),
		Resources:       model.DefaultCaps(),
		TimeoutSeconds:  60,
		LifetimeSeconds: 180,
		TenantID:        "acme",
		SessionID:       testSession(),
		Labels:          map[string]string{"test": labelSafe(t.Name())},
	}
	for _, m := range mods {
		m(&s)
	}
	return s
}

// testSession is a new session id: one per testSpec, since the daemon holds
// one sandbox per tenant and session and the tests run in parallel, some
// with several sandboxes (the scope set in TestMain keeps other test runs
// apart).
func testSession() string { return fmt.Sprintf("s-42-%d", sessions.Add(1)) }

var sessions atomic.Int64

func labelSafe(s string) string { return strings.NewReplacer("/", ".", " ", "_").Replace(s) }

func withRuntime(rt string) func(*model.Spec) { return func(s *model.Spec) { s.Runtime = rt } }

// open creates a sandbox that the test closes at its end.
func open(t testing.TB, b *dockerBackend, spec model.Spec) *sandbox {
	t.Helper()
	return openRequest(t, b, backends.CreateRequest{Spec: spec})
}

// openRequest is open with the whole request.
func openRequest(t testing.TB, b *dockerBackend, req backends.CreateRequest) *sandbox {
	t.Helper()
	sb, err := b.Create(t.Context(), req)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() {
		if err := sb.Close(context.WithoutCancel(t.Context())); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return sb.(*sandbox)
}

// sh runs a shell script in the sandbox and wants exit 0.
func sh(t testing.TB, sb *sandbox, script string) string {
	t.Helper()
	res, err := sb.Run(t.Context(), []string{"sh", "-c", script}, backends.RunOptions{Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("run %q: %v", script, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("run %q: exit %d\nstdout: %s\nstderr: %s", script, res.ExitCode, res.Stdout, res.Stderr)
	}
	return strings.TrimSpace(string(res.Stdout))
}

// wantClass fails unless err is a model.Error of class c (anywhere in its
// chain) and, for ResourceLimitExceeded, names limit.
func wantClass(t testing.TB, err error, c model.ErrorClass, limit string) {
	t.Helper()
	_ = classError(t, err, c, limit)
}

// classError is wantClass returning the matching error.
func classError(t testing.TB, err error, c model.ErrorClass, limit string) *model.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("want %s, got no error", c)
	}
	if !errors.Is(err, c) {
		t.Fatalf("want %s, got %v", c, err)
	}
	var found *model.Error
	for e := err; e != nil; {
		var me *model.Error
		if !errors.As(e, &me) {
			break
		}
		if me.Class == c {
			found = me
			break
		}
		e = me.Err
	}
	if found == nil {
		t.Fatalf("want a *model.Error of class %s in %v", c, err)
	}
	if limit != "" && found.Limit != limit {
		t.Fatalf("want %s(%s), got %v", c, limit, err)
	}
	return found
}

// waitGone polls until no container carries the labels, for up to d.
func waitGone(t testing.TB, b *dockerBackend, labels map[string]string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		cs, err := b.List(t.Context(), labels)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) == 0 {
			return
		}
		if time.Now().After(deadline) {
			ids := make([]string, len(cs))
			for i, c := range cs {
				ids[i] = short(c.ID)
			}
			t.Fatalf("containers still present after %s: %v", d, ids)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// logTraces sends the backend's trace lines to the test's log until it ends.
func logTraces(t *testing.T) {
	tracef = t.Logf
	t.Cleanup(func() { tracef = func(string, ...any) {} })
}
