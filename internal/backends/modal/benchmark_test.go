package modal_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	pb "github.com/modal-labs/libmodal/modal-go/proto/modal_proto"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	modalserver "github.com/sandboxio/terraform-provider-sandboxio/internal/fakes/modal"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/testing/medians"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// BenchmarkOpenRunClose compares open -> run -> close through the adapter
// with the raw gRPC calls that do the same against the same server in the
// same run (app lookup, image, create, tags, task id, router access, exec
// start, stdout, wait, terminate), and prints the medians and their ratio.
func BenchmarkOpenRunClose(b *testing.B) {
	s := modalserver.StartForTest(b)
	for k, v := range s.Env() {
		b.Setenv(k, v)
	}
	raw := newRaw(b, s)
	d, _ := backends.ParseDSN("modal://" + modalserver.TestApp)
	reg, _ := backends.Registered("modal")
	be, err := reg.Open(d)
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	ctx := b.Context()
	var adapter, direct []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		sb, err := be.Create(ctx, backends.CreateRequest{Spec: spec(func(s *model.Spec) { s.SessionID = fmt.Sprintf("bench-%d", i) })})
		if err != nil {
			b.Fatal(err)
		}
		if res, err := sb.Run(ctx, []string{"echo", "hi"}, backends.RunOptions{}); err != nil || string(res.Stdout) != "hi\n" {
			b.Fatalf("run: %v", err)
		}
		if err := sb.Close(ctx); err != nil {
			b.Fatal(err)
		}
		adapter = append(adapter, time.Since(t0))
		t0 = time.Now()
		raw.openRunClose(b, i)
		direct = append(direct, time.Since(t0))
	}
	b.StopTimer()
	ma, md := medians.Of(adapter), medians.Of(direct)
	fmt.Fprintf(os.Stdout, "modal open->run->close: adapter median %s, raw gRPC median %s, ratio %.3f (goal <= 1.10)\n", ma, md, float64(ma)/float64(md))
}

type rawClient struct {
	cp    pb.ModalClientClient
	tcr   pb.TaskCommandRouterClient
	ctx   context.Context
	appID string
}

func newRaw(b *testing.B, s *modalserver.Server) *rawClient {
	conn, err := grpc.NewClient(s.URL()[len("http://"):], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	r := &rawClient{cp: pb.NewModalClientClient(conn), tcr: pb.NewTaskCommandRouterClient(conn)}
	base := metadata.AppendToOutgoingContext(b.Context(), "x-modal-client-type", "9", "x-modal-client-version", "1.0.0",
		"x-modal-token-id", modalserver.TestTokenID, "x-modal-token-secret", modalserver.TestTokenSecret)
	tok, err := r.cp.AuthTokenGet(base, &pb.AuthTokenGetRequest{})
	if err != nil {
		b.Fatal(err)
	}
	r.ctx = metadata.AppendToOutgoingContext(base, "x-modal-auth-token", tok.GetToken())
	app, err := r.cp.AppGetOrCreate(r.ctx, pb.AppGetOrCreateRequest_builder{AppName: modalserver.TestApp}.Build())
	if err != nil {
		b.Fatal(err)
	}
	r.appID = app.GetAppId()
	return r
}

func (r *rawClient) openRunClose(b *testing.B, i int) {
	ctx := r.ctx
	app, err := r.cp.AppGetOrCreate(ctx, pb.AppGetOrCreateRequest_builder{AppName: modalserver.TestApp}.Build())
	if err != nil {
		b.Fatal(err)
	}
	img, err := r.cp.ImageGetOrCreate(ctx, pb.ImageGetOrCreateRequest_builder{AppId: app.GetAppId(),
		Image: pb.Image_builder{DockerfileCommands: []string{"FROM " + modalserver.Image}}.Build()}.Build())
	if err != nil {
		b.Fatal(err)
	}
	cr, err := r.cp.SandboxCreate(ctx, pb.SandboxCreateRequest_builder{AppId: app.GetAppId(), Definition: pb.Sandbox_builder{
		ImageId: img.GetImageId(), TimeoutSecs: 120,
		NetworkAccess: pb.NetworkAccess_builder{NetworkAccessType: pb.NetworkAccess_ALLOWLIST}.Build(),
		Resources:     pb.Resources_builder{MilliCpu: 1000, MilliCpuMax: 1000, MemoryMb: 512, MemoryMbMax: 512}.Build()}.Build()}.Build())
	if err != nil {
		b.Fatal(err)
	}
	id := cr.GetSandboxId()
	if _, err := r.cp.SandboxTagsSet(ctx, pb.SandboxTagsSetRequest_builder{SandboxId: id, Tags: []*pb.SandboxTag{
		pb.SandboxTag_builder{TagName: "sandboxio.session_id", TagValue: fmt.Sprintf("raw-%d", i)}.Build()}}.Build()); err != nil {
		b.Fatal(err)
	}
	task, err := r.cp.SandboxGetTaskId(ctx, pb.SandboxGetTaskIdRequest_builder{SandboxId: id}.Build())
	if err != nil {
		b.Fatal(err)
	}
	acc, err := r.cp.TaskGetCommandRouterAccess(ctx, pb.TaskGetCommandRouterAccessRequest_builder{TaskId: task.GetTaskId()}.Build())
	if err != nil {
		b.Fatal(err)
	}
	rctx := metadata.AppendToOutgoingContext(b.Context(), "authorization", "Bearer "+acc.GetJwt())
	execID := fmt.Sprintf("raw-exec-%d", i)
	if _, err := r.tcr.TaskExecStart(rctx, pb.TaskExecStartRequest_builder{TaskId: task.GetTaskId(), ExecId: execID, CommandArgs: []string{"echo", "hi"},
		StdoutConfig: pb.TaskExecStdoutConfig_TASK_EXEC_STDOUT_CONFIG_PIPE, StderrConfig: pb.TaskExecStderrConfig_TASK_EXEC_STDERR_CONFIG_PIPE}.Build()); err != nil {
		b.Fatal(err)
	}
	st, err := r.tcr.TaskExecStdioRead(rctx, pb.TaskExecStdioReadRequest_builder{TaskId: task.GetTaskId(), ExecId: execID}.Build())
	if err != nil {
		b.Fatal(err)
	}
	var out []byte
	for {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, m.GetData()...)
	}
	if _, err := r.tcr.TaskExecWait(rctx, pb.TaskExecWaitRequest_builder{TaskId: task.GetTaskId(), ExecId: execID}.Build()); err != nil || string(out) != "hi\n" {
		b.Fatalf("raw exec: %v %q", err, out)
	}
	if _, err := r.cp.SandboxTerminate(ctx, pb.SandboxTerminateRequest_builder{SandboxId: id}.Build()); err != nil {
		b.Fatal(err)
	}
}
