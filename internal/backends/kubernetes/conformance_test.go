package kubernetes

import (
	"context"
	"fmt"
	"maps"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	backendtest "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/conformance"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// The backend conformance suite against plain pods and agent-sandbox
// Sandboxes: the same harness, every behaviour, faults from a proxy in front of
// the API server (faultproxy_test.go), network behaviours under the lock
// (egress.go). The two run beside each other, after the other tests: each
// mostly waits for pods.
func TestAccConformance(t *testing.T) {
	b := needCluster(t)
	t.Parallel()
	conformance(t, b)
}

func TestAccConformanceAgentSandbox(t *testing.T) {
	b := needAgentSandbox(t)
	t.Parallel()
	conformance(t, b)
}

func conformance(t *testing.T, b *k8sBackend) {
	target := listenHost(t, dockerAddr(t))
	tHost, tPort := target.addr()
	caps := model.DefaultCaps()
	// The node has 2 CPUs: a quarter each, one behaviour at a time. The
	// caps behaviour fills a sandbox to the node's process ceiling with
	// sleeping shells, which memory must hold.
	caps.CPU, caps.MemoryMB, caps.DiskMB = 0.25, 384, 64
	// The backend under test reaches the API server through a proxy that
	// injects the faults; the harness observes through the direct client.
	pb, proxy, token := proxied(t, b)
	h := backendtest.Harness{
		Name:       "kubernetes/" + b.api,
		Backend:    pb,
		Faults:     proxy,
		Credential: token,
		// The kubelet counts activeDeadlineSeconds from the pod's start
		// time, which the API server keeps in whole seconds: a pod can
		// end up to a second before the lifetime counted from the
		// create's start.
		LifetimeEarly: time.Second,
		// The kubelet ends the pod at activeDeadlineSeconds: a node agent
		// outside the pod's namespaces, which nothing in the pod can
		// signal, and which acts with no client process alive.
		LifetimeKeeper: "the kubelet (activeDeadlineSeconds)",
		Spec: func() model.Spec {
			s := testSpec("")
			s.Backend = b.dsn()
			s.Name, s.SessionID, s.Resources = "conformance", "", caps
			return s
		},
		Observe: func(ctx context.Context, id string) (backendtest.Observed, error) {
			pod, err := b.cs.CoreV1().Pods(b.namespace).Get(ctx, id, metav1.GetOptions{})
			if err != nil {
				return backendtest.Observed{}, err
			}
			lbls := pod.Labels
			if b.api == APIAgentSandbox {
				// The labels the reaper and List select on must be on
				// the Sandbox too: only what both carry counts.
				u, err := b.dyn.Resource(sandboxGVR).Namespace(b.namespace).Get(ctx, id, metav1.GetOptions{})
				if err != nil {
					return backendtest.Observed{}, err
				}
				lbls = map[string]string{}
				for k, v := range u.GetLabels() {
					if pod.Labels[k] == v {
						lbls[k] = v
					}
				}
			}
			// The pod's env holds nothing: secrets and env travel in each
			// exec's stdin block.
			env := map[string]string{}
			for _, c := range pod.Spec.Containers {
				for _, e := range c.Env {
					env[e.Name] = e.Value
				}
			}
			return backendtest.Observed{Labels: maps.Clone(lbls), PlainEnv: env, Network: observedLock(pod)}, nil
		},
		Caps:         caps,
		Serial:       true,
		EgressTarget: net.JoinHostPort(tHost, tPort),
		AllowList:    []string{"198.18.0.0/15"},
		// A pod takes seconds to start and be probed on a loaded node, and
		// its lifetime counts from its start.
		Lifetime: 20 * time.Second,
		// No process limit per container: the ceiling is the node's
		// podPidsLimit, which the backend measures at create and reports.
		PidsCeiling: reportedCeiling,
	}
	backendtest.Run(t, h)
}

// observedLock reads the lock the pod was given from its lock container's
// command: deny with no allow list, or the allow list's CIDRs.
func observedLock(pod *corev1.Pod) *backendtest.ObservedNetwork {
	for _, c := range pod.Spec.InitContainers {
		if c.Name != lockCtr || len(c.Command) < 3 {
			continue
		}
		n := &backendtest.ObservedNetwork{Denied: c.Command[2] == lockDeny}
		for i, a := range c.Command {
			if a == "--allow" && i+1 < len(c.Command) {
				n.Allow = append(n.Allow, c.Command[i+1])
			}
		}
		if c.Command[2] == lockAllow {
			return nil
		}
		return n
	}
	return nil
}

// reportedCeiling reads the process ceiling the backend measured for a
// sandbox from its Info ("... refused with EAGAIN at N tasks ...").
func reportedCeiling(sb backends.Sandbox) (int64, error) {
	s := sb.Info().PidsCapStrategy
	var n int64
	if i := strings.Index(s, " at "); i >= 0 {
		if _, err := fmt.Sscanf(s[i:], " at %d tasks", &n); err == nil && n > 0 {
			return n, nil
		}
	}
	return 0, fmt.Errorf("no ceiling in the sandbox's pids strategy %q", s)
}
