package docker

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	backendtest "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/conformance"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// The backend conformance suite against the Docker backend: every behaviour
// under runc, and the isolation-relevant ones again under runsc (gVisor).
func TestConformance(t *testing.T) {
	for _, rt := range runtimes {
		t.Run(rt, func(t *testing.T) {
			needRuntime(t, rt)
			t.Parallel()
			h := conformanceHarness(t, newTestBackend(t), rt)
			if rt == "runsc" {
				h.Only = []backendtest.Behaviour{backendtest.ExecTimeoutB, backendtest.NetworkDeny, backendtest.CapsB, backendtest.Secrets,
					backendtest.LifetimeB, backendtest.LifetimeLockedB}
				// gVisor's execs are slow to start on a loaded host; one
				// sandbox at a time keeps the timing behaviours honest.
				h.Serial = true
			}
			backendtest.Run(t, h)
		})
	}
}

// conformanceHarness is the Docker harness of the suite for a runtime. Its
// lifetime-locked sandboxes are opened by a child process that is killed
// outright with its watcher; PID 1 is sandboxio's init; the bound is the
// init's (it exits at the expiry) plus AutoRemove's removal.
func conformanceHarness(t *testing.T, b *dockerBackend, rt string) backendtest.Harness {
	h := backendtest.Harness{
		Name:    "docker/" + rt,
		Backend: b,
		Spec: func() model.Spec {
			return model.Spec{
				SpecVersion: model.SpecVersion, Name: "conformance", Backend: "docker://", Image: LocalImage, Runtime: rt,
				Network: model.NetworkPolicy{}.Normalized(), Resources: model.DefaultCaps(),
				TimeoutSeconds: 60, LifetimeSeconds: 180,
			}
		},
		Observe: func(ctx context.Context, id string) (backendtest.Observed, error) {
			return observeContainer(ctx, b, id, rt)
		},
	}
	// Under runc the egress observer's device is in the sandbox
	// beside lo: the suite then connects to a listener on the host
	// (at the Docker bridge's gateway), which must get nothing.
	l := listenTCP(t, "0.0.0.0")
	_, port, _ := net.SplitHostPort(l.addr)
	h.EgressTarget = net.JoinHostPort(bridgeGateway(t, b), port)
	// What the capability data claims is what the suite checks.
	c, ok := backends.Lookup("docker/" + rt)
	if !ok {
		t.Fatalf("no capability data for docker/%s", rt)
	}
	h.ObservesEgress = c.BlockedEgressReporting
	t.Cleanup(func() {
		if n := l.got.Load(); n != 0 {
			t.Errorf("the host's listener got %d connections from deny sandboxes", n)
		}
	})
	h.Orphan = orphanSandbox
	h.Init = initComm
	return h
}

// observeContainer is what the daemon recorded for a sandbox's container.
func observeContainer(ctx context.Context, b *dockerBackend, id, rt string) (backendtest.Observed, error) {
	ins, err := b.cli.ContainerInspect(ctx, id)
	if err != nil {
		return backendtest.Observed{}, err
	}
	env := map[string]string{}
	for _, kv := range ins.Config.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	caps := model.Caps{CPU: float64(ins.HostConfig.NanoCPUs) / 1e9, MemoryMB: ins.HostConfig.Memory >> 20}
	if rt == "runc" && ins.HostConfig.PidsLimit != nil {
		// Under runsc the host's pids cgroup is only a backstop (docs/design/gvisor-pids-backstop.md).
		caps.Pids = *ins.HostConfig.PidsLimit
	}
	return backendtest.Observed{
		Labels:   ins.Config.Labels,
		PlainEnv: env,
		Network:  &backendtest.ObservedNetwork{Denied: ins.HostConfig.NetworkMode == "none"},
		Caps:     &caps,
	}, nil
}
