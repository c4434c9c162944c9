package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
)

// A secret value too short to redact is refused at Open, naming the secret
// and never its value, and the refusal itself is not redacted with it: a
// secret "x" would otherwise turn every "x" of the message and of the audit
// record into [REDACTED] ("e[REDACTED]port"), and give the value away.
func TestOpen_ShortSecretRefusedWithoutGarbling(t *testing.T) {
	tpl := template(t, withSecretNames("API_TOKEN", "OPENAI_API_KEY"))
	spec, sum := tenantSpec(t, tpl, "acme", "s-1")
	for _, tc := range []struct{ value, want string }{
		{"x", `secret "API_TOKEN" has a value of fewer than 8 characters`},
		{"e", `secret "API_TOKEN" has a value of fewer than 8 characters`},
		{"", `secret "API_TOKEN" has an empty value`},
	} {
		f := &fakeBackend{}
		c, audit := newClient(t)
		withFake(c, f)
		_, err := c.Open(t.Context(), Request{Spec: spec, SpecSHA256: sum, TenantID: "acme", SessionID: "s-1",
			Secrets: NewSecrets(map[string]string{"API_TOKEN": tc.value, "OPENAI_API_KEY": canary})})
		wantClass(t, err, ErrConfiguration, rules.ShortSecret)
		if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), Redacted) {
			t.Errorf("value %q: %v", tc.value, err)
		}
		if f.creates.Load() != 0 || f.preflight.Load() != 0 {
			t.Fatal("the backend was asked")
		}
		recs := audit.records(t)
		if len(recs) != 1 || recs[0]["event"] != EventRefused || recs[0]["rule"] != rules.ShortSecret {
			t.Fatalf("audit: %s", audit)
		}
		// The long secret is still redacted; the short one garbles nothing.
		if strings.Contains(audit.String(), canary) || strings.Contains(audit.String(), Redacted) {
			t.Errorf("audit: %s", audit)
		}
	}
	// Eight characters is enough.
	f := &fakeBackend{}
	c, _ := newClient(t)
	withFake(c, f)
	sb, err := c.Open(t.Context(), Request{Spec: spec, SpecSHA256: sum, TenantID: "acme", SessionID: "s-1",
		Secrets: NewSecrets(map[string]string{"API_TOKEN": "12345678", "OPENAI_API_KEY": canary})})
	if err != nil {
		t.Fatal(err)
	}
	_ = sb.Close(t.Context())
}

// The spec's timeout_seconds bounds every call: a longer RunOptions.Timeout
// is refused before the backend is asked, audited as refused; a timeout up
// to the bound runs.
func TestRun_TimeoutAboveSpecRefused(t *testing.T) {
	tpl := template(t) // timeout_seconds 60
	spec, sum := tenantSpec(t, tpl, "acme", "s-1")
	f := &fakeBackend{}
	c, audit := newClient(t)
	withFake(c, f)
	err := c.With(t.Context(), Request{Spec: spec, SpecSHA256: sum, TenantID: "acme", SessionID: "s-1"}, func(ctx context.Context, sb *Sandbox) error {
		for _, d := range []time.Duration{61 * time.Second, 800 * time.Hour} {
			_, err := sb.Run(ctx, []string{"sleep", "40"}, RunOptions{Timeout: d})
			wantClass(t, err, ErrConfiguration, rules.CallTimeout)
			var me *Error
			if !errors.As(err, &me) || me.Attribute != "timeout" || !strings.Contains(me.Fix, "at most 1m0s") {
				t.Errorf("error: %v", err)
			}
			if _, err := sb.RunCode(ctx, "sh", "sleep 40", RunOptions{Timeout: d}); ClassOf(err) != ErrConfiguration {
				t.Errorf("run code: %v", err)
			}
		}
		if n := f.runs.Load(); n != 0 {
			t.Fatalf("the backend ran %d calls", n)
		}
		_, err := sb.Run(ctx, []string{"true"}, RunOptions{Timeout: 60 * time.Second})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(events(audit.records(t)), " ")
	if got != "created/open refused/run refused/run_code refused/run refused/run_code exec/run killed/close" {
		t.Fatalf("events: %s", got)
	}
}

// Request.Env reaches every call, under the per-call env; RunOptions.Env
// still cannot name a secret.
func TestOpen_EnvForEveryCall(t *testing.T) {
	tpl := template(t, withSecretNames("OPENAI_API_KEY"))
	spec, sum := tenantSpec(t, tpl, "acme", "s-1")
	f := &fakeBackend{}
	c, _ := newClient(t)
	withFake(c, f)
	req := Request{Spec: spec, SpecSHA256: sum, TenantID: "acme", SessionID: "s-1",
		Secrets: NewSecrets(map[string]string{"OPENAI_API_KEY": canary}), Env: map[string]string{"A": "1", "B": "2"}}
	err := c.With(t.Context(), req, func(ctx context.Context, sb *Sandbox) error {
		if _, err := sb.Run(ctx, []string{"true"}, RunOptions{}); err != nil {
			return err
		}
		if _, err := sb.Run(ctx, []string{"true"}, RunOptions{Env: map[string]string{"B": "3"}}); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(f.envs); got != "[map[A:1 B:2] map[A:1 B:3]]" {
		t.Fatalf("envs: %s", got)
	}
	if req.Env["B"] != "2" {
		t.Fatal("Request.Env was modified")
	}
}

// Only a daemon that cannot be reached is diagnosed as one: a missing file
// of this host (the busybox an image is built from) or an EOF is not.
func TestBackendError_DaemonDownDiagnosis(t *testing.T) {
	const down = "the Docker daemon does not answer"
	sock := func(errno syscall.Errno) error {
		return fmt.Errorf("exec create: %w", &net.OpError{Op: "dial", Net: "unix", Addr: &net.UnixAddr{Name: "/var/run/docker.sock", Net: "unix"},
			Err: os.NewSyscallError("connect", errno)})
	}
	busybox := fmt.Errorf("busybox: %w (install Debian's busybox-static)", &fs.PathError{Op: "open", Path: "/nonexistent", Err: syscall.ENOENT})
	for _, tc := range []struct {
		name string
		err  error
		down bool
		file bool
	}{
		{"missing busybox", busybox, false, true},
		{"unexpected EOF", fmt.Errorf("image import: %w", io.ErrUnexpectedEOF), false, false},
		{"EOF in a message", errors.New("upload: EOF"), false, false},
		{"socket missing", sock(syscall.ENOENT), true, false},
		{"connection refused", sock(syscall.ECONNREFUSED), true, false},
		{"client cannot connect", errors.New("Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?"), true, false},
		{"attach cannot connect", errors.New("cannot connect to the Docker daemon. Is 'docker daemon' running on this host?: dial unix: x"), true, false},
		{"unavailable", fmt.Errorf("info: %w", cerrdefs.ErrUnavailable), true, false},
	} {
		msg := (&BackendError{Backend: docker.Name, Op: "image", Err: tc.err}).Error()
		if got := strings.Contains(msg, down); got != tc.down {
			t.Errorf("%s: daemon down %v, want %v: %s", tc.name, got, tc.down, msg)
		}
		if got := strings.Contains(msg, "/nonexistent is a file on this host that could not be used: check the path"); got != tc.file {
			t.Errorf("%s: file %v, want %v: %s", tc.name, got, tc.file, msg)
		}
	}
	// The real thing: DOCKER_HOST at a socket that does not exist.
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/sandboxio-test.sock")
	_, err := prepareDockerImage(t.Context(), docker.LocalImage, "", nil)
	if !errors.Is(err, ErrBackend) || !strings.Contains(err.Error(), down) {
		t.Fatalf("no daemon: %v", err)
	}
}

// Against the live daemon, building an image from a busybox that does not
// exist says so, and does not blame the daemon.
func TestBackendError_MissingBusyboxIsNotTheDaemon(t *testing.T) {
	needDocker(t)
	err := docker.EnsureLocalImage(t.Context(), "sandboxio/never-built:"+strings.ToLower(runID), "/nonexistent/busybox")
	if err == nil {
		t.Fatal("an image was built from a missing busybox")
	}
	msg := (&BackendError{Backend: docker.Name, Op: "image", Err: err}).Error()
	if strings.Contains(msg, "daemon does not answer") || !strings.Contains(msg, "/nonexistent/busybox is a file on this host") {
		t.Fatalf("message: %s", msg)
	}
}
