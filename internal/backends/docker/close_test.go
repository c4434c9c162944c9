package docker

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/client"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// slowRemovals puts a proxy in front of the daemon that holds every
// container removal for hold before passing it on: the daemon of a busy
// host, where removing 50 containers at once (unmounts, layer deletion)
// outlasts the teardown grace while killing them does not.
func slowRemovals(t *testing.T, daemonHost string, hold time.Duration) *client.Client {
	t.Helper()
	u, err := url.Parse(daemonHost)
	if err != nil || u.Scheme != "unix" {
		t.Skipf("the daemon is not on a unix socket (%s)", daemonHost)
	}
	proxy := &httputil.ReverseProxy{
		ErrorLog: log.New(io.Discard, "", 0),
		Rewrite:  func(r *httputil.ProxyRequest) { r.Out.URL.Scheme, r.Out.URL.Host = "http", "docker" },
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", u.Path)
		}},
	}
	sock := filepath.Join(t.TempDir(), "docker.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete && strings.Contains(r.URL.Path, "/containers/") {
			time.Sleep(hold)
		}
		proxy.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	cli, err := client.NewClientWithOpts(client.WithHost("unix://"+sock), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// Close confirms the kill within the teardown grace, not the removal: with
// removals slower than the grace, a close still returns cleanly, with no
// OrphanedSandboxWarning, the container is stopped when it returns, and it
// is gone shortly after (the daemon's AutoRemove and the close's background
// removal).
func TestCloseConfirmsTheKillWithinTheGrace(t *testing.T) {
	needDocker(t)
	t.Parallel()
	b := newTestBackend(t)
	var warned []model.Warning
	sbi, err := b.Create(t.Context(), backends.CreateRequest{Spec: testSpec(t), OnWarning: func(w model.Warning) { warned = append(warned, w) }})
	if err != nil {
		t.Fatal(err)
	}
	sb := sbi.(*sandbox)
	real := b.cli
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), time.Minute)
		defer cancel()
		_ = (&dockerBackend{cli: real}).removeContainer(ctx, sb.id)
	})
	grace := 2 * time.Second
	b.cli = slowRemovals(t, real.DaemonHost(), 2*grace)
	b.cfg.teardownGrace = grace

	start := time.Now()
	err = sb.Close(t.Context())
	took := time.Since(start)
	if err != nil || len(warned) != 0 {
		t.Fatalf("close: %v, warnings %v", err, warned)
	}
	if took > grace+time.Second {
		t.Fatalf("close took %s, beyond the grace of %s", took, grace)
	}
	ins, err := real.ContainerInspect(t.Context(), sb.id)
	if err == nil && ins.State != nil && ins.State.Running {
		t.Fatalf("the sandbox still runs after its close returned")
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := real.ContainerInspect(t.Context(), sb.id); cerrdefs.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stopped sandbox was not removed within 30 s of its close")
		}
	}
	t.Logf("closed in %s; removed %s after the close began", took.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}
