package kubernetes

import (
	"context"
	"fmt"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// The Kubernetes backend's one registration: kubernetes://CONTEXT/NAMESPACE,
// the kubeconfig context (or in-cluster) and the namespace its pods go in.
// Credentials come from the kubeconfig (KUBECONFIG) or the pod's service
// account, never from the DSN.
func init() {
	backends.Register(backends.Registration{
		Scheme: Name, Order: 60,
		DSN: backends.DSNSyntax{
			Form: "kubernetes://CONTEXT/NAMESPACE", Target: backends.TargetContextNamespace,
			Env:     []string{"KUBECONFIG"},
			EnvHelp: "KUBECONFIG (the kubeconfig holding CONTEXT; CONTEXT in-cluster uses the pod's service account)",
			Options: map[string]backends.DSNOption{
				"runtime_class": {Help: "a RuntimeClass name", Check: checkRuntimeClass},
				"pod_cidr":      {Help: "IPv4 CIDR blocks of the cluster's pod network, comma-separated, locked out of every sandbox besides those the nodes and the pod show", Check: checkCIDRList},
				"service_cidr":  {Help: "IPv4 CIDR blocks of the cluster's services, comma-separated, where no ServiceCIDR object can be read", Check: checkCIDRList},
				// pod (the default): one Pod per sandbox; agent-sandbox: one
				// agents.x-k8s.io/v1beta1 Sandbox per sandbox.
				"api": backends.OneOf(APIPod, APIAgentSandbox),
			},
		},
		// Every option is read by Open, so each selects its own backend:
		// the run-time client opens backends by Target, which keeps only
		// these.
		EndpointOptions: []string{"runtime_class", "pod_cidr", "service_cidr", "api"},
		Open:            func(d backends.DSN) (backends.Backend, error) { return Open(d) },
		LiveCheck:       liveCheck,
		Unreachable:     "make the cluster's API server reachable with the kubeconfig in KUBECONFIG (or run in a pod for in-cluster) before apply; plan needs no cluster, apply does",
		Lists:           true,
	})
}

// liveCheck runs Preflight on a client of its own: no sandbox is created,
// only the egress probe's pods when the mode's lock is not proven yet.
func liveCheck(ctx context.Context, spec model.Spec) (backends.Preflight, error) {
	d, err := backends.ParseDSN(spec.Backend)
	if err != nil {
		return backends.Preflight{}, err
	}
	b, err := Open(d)
	if err != nil {
		return backends.Preflight{}, fmt.Errorf("kubernetes client: %w", err)
	}
	defer b.Close()
	return b.Preflight(ctx, spec)
}
