package modalserver_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	modal "github.com/modal-labs/libmodal/modal-go"
	pb "github.com/modal-labs/libmodal/modal-go/proto/modal_proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	modalserver "github.com/sandboxio/terraform-provider-sandboxio/internal/fakes/modal"
)

// The referee: the official Modal Go SDK drives the conformance server for
// every operation the adapter uses. The SDK is not ours; if it cannot use
// the server, the server is wrong.

func sdkClient(t *testing.T, s *modalserver.Server, id, secret string, interceptors ...grpc.UnaryClientInterceptor) (*modal.Client, error) { //nolint:unparam // the token pair as the SDK takes it
	t.Helper()
	s.SetEnv(t)
	c, err := modal.NewClientWithOptions(&modal.ClientParams{TokenID: id, TokenSecret: secret,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), GRPCUnaryInterceptors: interceptors})
	if err == nil {
		t.Cleanup(c.Close)
	}
	return c, err
}

func exec(t *testing.T, sb *modal.Sandbox, params *modal.SandboxExecParams, args ...string) (string, string, int, error) {
	t.Helper()
	ctx := t.Context()
	p, err := sb.Exec(ctx, args, params)
	if err != nil {
		return "", "", 0, err
	}
	type res struct {
		b   []byte
		err error
	}
	outc, errc := make(chan res, 1), make(chan res, 1)
	go func() { b, err := io.ReadAll(p.Stdout); outc <- res{b, err} }()
	go func() { b, err := io.ReadAll(p.Stderr); errc <- res{b, err} }()
	code, werr := p.Wait(ctx)
	o, e := <-outc, <-errc
	if werr != nil {
		return string(o.b), string(e.b), code, werr
	}
	if o.err != nil || e.err != nil {
		return "", "", code, errors.Join(o.err, e.err)
	}
	return string(o.b), string(e.b), code, nil
}

func TestRefereeBadTokenIsTheSDKsAuthError(t *testing.T) {
	s := modalserver.StartForTest(t)
	_, err := sdkClient(t, s, modalserver.TestTokenID, "as-wrong-secret")
	if status.Code(errors.Unwrap(errors.Unwrap(errors.Unwrap(err)))) != codes.Unauthenticated && !strings.Contains(err.Error(), "Unauthenticated") {
		t.Fatalf("a wrong token secret: want the SDK's Unauthenticated error, got %v", err)
	}
	if strings.Contains(err.Error(), "as-wrong-secret") {
		t.Fatalf("the error echoes the secret: %v", err)
	}
	if _, err := sdkClient(t, s, modalserver.TestTokenID, modalserver.TestTokenSecret); err != nil {
		t.Fatalf("the right token: %v", err)
	}
}

func TestRefereeAppAndObjects(t *testing.T) {
	s := modalserver.StartForTest(t)
	c, err := sdkClient(t, s, modalserver.TestTokenID, modalserver.TestTokenSecret)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := c.Apps.FromName(ctx, modalserver.TestApp, nil); err != nil {
		t.Fatalf("app lookup: %v", err)
	}
	if _, err := c.Apps.FromName(ctx, modalserver.TestApp, &modal.AppFromNameParams{Environment: modalserver.TestEnvironment}); err != nil {
		t.Fatalf("app lookup in an environment: %v", err)
	}
	var nf modal.NotFoundError
	if _, err := c.Apps.FromName(ctx, "no-such-app", nil); !errors.As(err, &nf) {
		t.Fatalf("a missing app: want NotFoundError, got %v", err)
	}
	if _, err := c.Apps.FromName(ctx, modalserver.TestApp, &modal.AppFromNameParams{Environment: "nope"}); !errors.As(err, &nf) {
		t.Fatalf("a missing environment: want NotFound, got %v", err)
	}
	if _, err := c.Secrets.FromName(ctx, "missing", nil); !errors.As(err, &nf) {
		t.Fatalf("a missing secret: want NotFoundError, got %v", err)
	}
	s.AddSecret("", "named", map[string]string{"K": "value-of-k"})
	if sec, err := c.Secrets.FromName(ctx, "named", &modal.SecretFromNameParams{RequiredKeys: []string{"K"}}); err != nil || sec.SecretID == "" {
		t.Fatalf("a named secret: %v", err)
	}
	if _, err := c.Secrets.FromMap(ctx, map[string]string{"not a name": "x"}, nil); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a secret key that is no variable name: want InvalidArgument, got %v", err)
	}
	if _, err := c.Volumes.FromName(ctx, "vol", nil); !errors.As(err, &nf) {
		t.Fatalf("a missing volume: want NotFoundError, got %v", err)
	}
	v1, err := c.Volumes.FromName(ctx, "vol", &modal.VolumeFromNameParams{CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	v2, err := c.Volumes.FromName(ctx, "vol", nil)
	if err != nil || v2.VolumeID != v1.VolumeID {
		t.Fatalf("volume lookup after create: %v, ids %s %s", err, v1.VolumeID, v2.VolumeID)
	}
}

func TestRefereeSandboxLifecycle(t *testing.T) {
	s := modalserver.StartForTest(t)
	c, err := sdkClient(t, s, modalserver.TestTokenID, modalserver.TestTokenSecret)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	app, err := c.Apps.FromName(ctx, modalserver.TestApp, nil)
	if err != nil {
		t.Fatal(err)
	}
	sec, err := c.Secrets.FromMap(ctx, map[string]string{"API_TOKEN": "tok-referee-5f1c2a9b"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	vol, err := c.Volumes.FromName(ctx, "referee-vol", &modal.VolumeFromNameParams{CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := c.Sandboxes.Create(ctx, app, c.Images.FromRegistry(modalserver.Image, nil), &modal.SandboxCreateParams{
		CPU: 0.5, CPULimit: 1, MemoryMiB: 256, MemoryLimitMiB: 512, Timeout: 120 * time.Second,
		CIDRAllowlist: []string{"10.0.0.0/8"}, Secrets: []*modal.Secret{sec}, Name: "referee",
		Volumes: map[string]*modal.Volume{"/data": vol}, Env: map[string]string{"GREETING": "hello"},
	})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	rec, _ := s.Sandbox(sb.SandboxID)
	if rec.Network != "ALLOWLIST" || len(rec.CIDRs) != 1 || rec.CIDRs[0] != "10.0.0.0/8" || rec.MilliCPU != 500 || rec.MilliCPUMax != 1000 ||
		rec.MemoryMB != 256 || rec.MemoryMBMax != 512 || rec.TimeoutSecs != 120 || rec.Volumes["/data"] != vol.VolumeID || rec.LocalNetwork != "none" {
		t.Fatalf("the server recorded %+v", rec)
	}
	if len(rec.Notes) == 0 || !strings.Contains(rec.Notes[0], "not enforceable") {
		t.Fatalf("an allow list the local sandbox cannot enforce is not reported: %+v", rec.Notes)
	}

	t.Run("exec", func(t *testing.T) {
		out, errOut, code, err := exec(t, sb, nil, "sh", "-c", `echo "out $GREETING $API_TOKEN"; echo err >&2; exit 3`)
		if err != nil || code != 3 || out != "out hello tok-referee-5f1c2a9b\n" || errOut != "err\n" {
			t.Fatalf("exec: err %v, code %d, stdout %q, stderr %q", err, code, out, errOut)
		}
		out, _, _, err = exec(t, sb, &modal.SandboxExecParams{Env: map[string]string{"PER_EXEC": "per-exec-value"}, Workdir: "/tmp"}, "sh", "-c", `echo "$PER_EXEC $(pwd)"`)
		if err != nil || out != "per-exec-value /tmp\n" {
			t.Fatalf("exec env and workdir: %v %q", err, out)
		}
		// No network interface but loopback: the allow list is run stricter.
		out, _, _, err = exec(t, sb, nil, "sh", "-c", `ls /sys/class/net`)
		if err != nil || strings.TrimSpace(out) != "lo" {
			t.Fatalf("interfaces: %v %q", err, out)
		}
	})
	t.Run("exec timeout", func(t *testing.T) {
		start := time.Now()
		_, _, _, err := exec(t, sb, &modal.SandboxExecParams{Timeout: time.Second}, "sh", "-c", "sleep 30")
		var te modal.ExecTimeoutError
		if !errors.As(err, &te) || time.Since(start) > 5*time.Second {
			t.Fatalf("want ExecTimeoutError soon after 1 s, got %v after %s", err, time.Since(start))
		}
		out, _, _, err := exec(t, sb, nil, "ps")
		if err != nil || strings.Contains(out, "sleep 30") {
			t.Fatalf("the timed-out command is still running: %v\n%s", err, out)
		}
	})
	t.Run("volume", func(t *testing.T) {
		if _, _, code, err := exec(t, sb, nil, "sh", "-c", "echo kept > /data/f.txt"); err != nil || code != 0 {
			t.Fatalf("write: %v %d", err, code)
		}
		dir, _ := s.VolumeDir("", "referee-vol")
		if b, err := os.ReadFile(filepath.Join(dir, "f.txt")); err != nil || string(b) != "kept\n" {
			t.Fatalf("the volume's directory holds %q, %v", b, err)
		}
	})
	t.Run("file write", func(t *testing.T) {
		f, err := sb.Open(ctx, "/tmp/up.txt", "w")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte("uploaded\n")); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if out, _, _, err := exec(t, sb, nil, "cat", "/tmp/up.txt"); err != nil || out != "uploaded\n" {
			t.Fatalf("read back: %v %q", err, out)
		}
	})
	t.Run("tags and list", func(t *testing.T) {
		tags := map[string]string{"sandboxio.tenant_id": "acme", "sandboxio.session_id": "s-1"}
		if err := sb.SetTags(ctx, tags); err != nil {
			t.Fatal(err)
		}
		got, err := sb.GetTags(ctx)
		if err != nil || got["sandboxio.tenant_id"] != "acme" {
			t.Fatalf("tags: %v %v", err, got)
		}
		if ids := list(t, c, map[string]string{"sandboxio.tenant_id": "acme"}); len(ids) != 1 || ids[0] != sb.SandboxID {
			t.Fatalf("list by tags: %v", ids)
		}
		if ids := list(t, c, map[string]string{"sandboxio.tenant_id": "other"}); len(ids) != 0 {
			t.Fatalf("list by other tags: %v", ids)
		}
		byName, err := c.Sandboxes.FromName(ctx, modalserver.TestApp, "referee", nil)
		if err != nil || byName.SandboxID != sb.SandboxID {
			t.Fatalf("from name: %v", err)
		}
	})
	t.Run("terminate", func(t *testing.T) {
		if _, err := sb.Terminate(ctx, nil); err != nil {
			t.Fatal(err)
		}
		again, err := c.Sandboxes.FromID(ctx, sb.SandboxID)
		if err != nil {
			t.Fatal(err)
		}
		code, err := again.Wait(ctx)
		if err != nil || code != 137 {
			t.Fatalf("wait after terminate: %d %v", code, err)
		}
		if _, err := again.Terminate(ctx, nil); err != nil {
			t.Fatalf("terminate is idempotent: %v", err)
		}
		if ids := list(t, c, map[string]string{"sandboxio.tenant_id": "acme"}); len(ids) != 0 {
			t.Fatalf("a terminated sandbox is listed: %v", ids)
		}
		if r, _ := s.Sandbox(sb.SandboxID); r.DockerID == "" {
			t.Fatal("no docker sandbox recorded")
		}
	})
}

func list(t *testing.T, c *modal.Client, tags map[string]string) []string {
	t.Helper()
	it, err := c.Sandboxes.List(t.Context(), &modal.SandboxListParams{Tags: tags})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for sb, err := range it {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sb.SandboxID)
	}
	return ids
}

func TestRefereeLifetimeAndBlockedNetwork(t *testing.T) {
	s := modalserver.StartForTest(t)
	c, err := sdkClient(t, s, modalserver.TestTokenID, modalserver.TestTokenSecret)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	app, _ := c.Apps.FromName(ctx, modalserver.TestApp, nil)
	sb, err := c.Sandboxes.Create(ctx, app, c.Images.FromRegistry(modalserver.Image, nil), &modal.SandboxCreateParams{
		Timeout: 3 * time.Second, BlockNetwork: true})
	if err != nil {
		t.Fatal(err)
	}
	if rec, _ := s.Sandbox(sb.SandboxID); rec.Network != "BLOCKED" || rec.LocalNetwork != "none" {
		t.Fatalf("record %+v", rec)
	}
	start := time.Now()
	code, err := sb.Wait(ctx)
	if err != nil || code != 124 || time.Since(start) > 10*time.Second {
		t.Fatalf("lifetime: want exit 124 (timeout) after 3 s, got %d %v after %s", code, err, time.Since(start))
	}
	if _, err := sb.Exec(ctx, []string{"true"}, nil); err == nil {
		t.Fatal("exec after the lifetime succeeded")
	}
	_, err = c.Sandboxes.Create(ctx, app, c.Images.FromRegistry(modalserver.Image, nil), &modal.SandboxCreateParams{Timeout: 48 * time.Hour})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a lifetime above the limit: want InvalidArgument, got %v", err)
	}
	_, err = c.Sandboxes.Create(ctx, app, c.Images.FromRegistry(modalserver.Image, nil), &modal.SandboxCreateParams{CIDRAllowlist: []string{"10.1.2.3/8"}})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a CIDR with host bits: want InvalidArgument, got %v", err)
	}
	_, err = c.Sandboxes.Create(ctx, app, c.Images.FromRegistry("sandboxio/no-such-image:x", nil), nil)
	var re modal.RemoteError
	if !errors.As(err, &re) {
		t.Fatalf("an image the daemon lacks: want the SDK's build failure, got %v", err)
	}
}

// The SDK cannot ask for an allow list with no entries (its empty list
// means open); the adapter rewrites the request in a client interceptor,
// and so does this test, which checks that the server takes it as deny.
func TestRefereeEmptyAllowListDenies(t *testing.T) {
	s := modalserver.StartForTest(t)
	rewrite := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, inv grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if r, ok := req.(*pb.SandboxCreateRequest); ok {
			r.GetDefinition().SetNetworkAccess(pb.NetworkAccess_builder{NetworkAccessType: pb.NetworkAccess_ALLOWLIST}.Build())
		}
		return inv(ctx, method, req, reply, cc, opts...)
	}
	c, err := sdkClient(t, s, modalserver.TestTokenID, modalserver.TestTokenSecret, rewrite)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	app, _ := c.Apps.FromName(ctx, modalserver.TestApp, nil)
	sb, err := c.Sandboxes.Create(ctx, app, c.Images.FromRegistry(modalserver.Image, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Terminate(ctx, nil) //nolint:errcheck
	if rec, _ := s.Sandbox(sb.SandboxID); rec.Network != "ALLOWLIST" || len(rec.CIDRs) != 0 || rec.LocalNetwork != "none" || rec.LegacyBlock {
		t.Fatalf("record %+v", rec)
	}
}
