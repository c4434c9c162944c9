// Package kubernetes will hold the Kubernetes backend
// (kubernetes://CONTEXT/NAMESPACE). For now it holds only its design notes:
// nothing here is registered, so no DSN reaches it and the policy bundle
// still has no capability data for it. The test cluster it will be tested
// on is brought up by scripts/k8s-up.sh (see k8s/README.md).
//
// # What a cluster is trusted with
//
// Nothing a cluster claims is taken on trust. Whether a deny or an allow
// list is enforced depends on the CNI and on admission settings that the
// API does not describe, so each enforcement this backend relies on is
// shown on the live cluster by a probe before a template that needs it is
// accepted (at apply) and again before the first open in a process. The
// outcome is cached per cluster, namespace and mechanism with a time to
// live; a failed or unfinished probe is CapabilityNotSupported naming the
// probe and what it saw, never a pass.
//
// # Proving egress
//
// A probe has three pods, all labelled as the backend's own and removed by
// the reaper like sandboxes:
//
//   - a listener that accepts TCP connections on a port and counts them;
//   - a control client with open egress, which must reach the listener:
//     this shows the probe can see a connection at all, so that a "blocked"
//     verdict cannot come from a broken pod network;
//   - a client under exactly the mechanism a sandbox would get, which tries
//     the listener's pod address and the node's address on the pod bridge
//     (the pod's gateway), and must fail both.
//
// The verdict needs both sides: the client sees its connections fail, and
// the listener counts none from the client's address. A CIDR allow list is
// proven the same way, with one listener inside an allowed range (must
// connect) and one outside (must not). Domain entries are refused: neither
// mechanism below can follow names.
//
// Two mechanisms can carry the policy; each is used only where its own
// probe passed, and the plan says which one a template gets:
//
//   - A NetworkPolicy selecting the sandbox pod (egress: none for deny,
//     ipBlock rules for CIDRs). Only clusters whose CNI enforces policy pass
//     its probe. The project's test cluster does not (its CNI is a plain
//     bridge, and kube-network-policies needs an nftables feature this
//     kernel lacks), so there it must be refused: a test asserts exactly
//     that refusal.
//   - Locking the pod's own network namespace from an init container that
//     holds NET_ADMIN and exits before the sandbox container starts without
//     it (the traffic-capture pattern of service meshes): for deny, only
//     the loopback device stays up; for CIDRs, filter rules in the pod's
//     namespace. The sandbox container cannot undo it: it has no
//     capabilities and no privilege escalation. Pod Security admission at
//     baseline or above forbids NET_ADMIN, so this is possible only in a
//     namespace that permits it, and the probe finds out by trying.
//
// Deny is also shown from inside each sandbox, as on Docker: only lo can
// reach anything.
//
// # Secrets
//
// A secret value is never part of an API object and never part of a
// command line. Pod environment variables and Secret objects are stored in
// etcd; an exec's argv appears in the API server's audit log and in the
// kubelet's request URL. So the values travel over an exec's standard
// input: the command (fixed, naming no value) writes them to a file on a
// memory-backed emptyDir readable only inside the pod, and each later exec
// runs under a fixed wrapper that loads that file into the command's
// environment. A test puts a canary in a secret and shows it is absent
// from `etcdctl get --prefix /` and from the API server's logs, audit log
// included (the test cluster logs every request body), yet present inside
// the sandbox.
//
// # Tier
//
// A RuntimeClass's name claims a tier; what its handler really runs on the
// node confirms it, from inside the pod, as the Docker backend does for
// Docker runtimes. A RuntimeClass named gvisor whose handler runs runc is
// CONTAINER, and a GVISOR requirement on it is refused.
package kubernetes
