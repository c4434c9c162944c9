// Package kubernetes is the Kubernetes backend (kubernetes://CONTEXT/NAMESPACE):
// one hardened pod per sandbox (or an agent-sandbox Sandbox, ?api=agent-sandbox),
// on a kubeconfig context's cluster or in-cluster. Execs go through a static
// wrapper (cmd/sandboxio-k8s-wrap) that shows the limits and tier from inside
// before a pod is handed out; egress is a routing lock in the pod's network
// namespace, proven on the cluster by a probe before it is relied on; secrets
// travel over each exec's stdin, never in an API object.
//
// See docs/design/kubernetes-backend.md; the test cluster: k8s/README.md.
package kubernetes
