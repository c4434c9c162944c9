// Package kubernetes is the Kubernetes backend (kubernetes://CONTEXT/NAMESPACE):
// one hardened pod per sandbox, on the cluster of a kubeconfig context
// (KUBECONFIG) or in-cluster, in the DSN's namespace. The test cluster it
// is tested on is brought up by scripts/k8s-up.sh (see k8s/README.md);
// scripts/k8s-wrap-image.sh imports the wrapper's image into it, and
// `make test-k8s` runs the tests against it.
//
// # What is built, and what is not yet
//
// Built: the pod (all capabilities dropped, no privilege escalation,
// RuntimeDefault seccomp, no host namespaces, no service-account token or
// service links, read-only root with memory-backed emptyDir volumes sized
// from disk_mb, requests = limits), activeDeadlineSeconds as the lifetime,
// execs through the wrapper (package wrap, below), the limits and the tier
// shown from inside every pod before it is handed out, secrets over the
// exec's stdin, and reap by label and owner. Not built: the egress probes
// described below, so deny (the default), learn and allow lists are
// refused (SBX-NET-008, SBX-NET-003) and only egress = "allow" opens;
// isolation between tenants' pods under open egress (no NetworkPolicy
// enforcer on the test cluster). agent-sandbox Sandboxes (?api=agent-sandbox)
// and warm pools are built: see their sections below.
//
// # The wrapper
//
// The user's image may have no shell. An init container copies a small
// static Go binary (package wrap, built with CGO_ENABLED=0 into the image
// WrapImage, never pulled) into a memory-backed emptyDir that the sandbox
// container mounts read-only at /.sandboxio. The container's command is
// the wrapper holding it open (it reaps orphans as PID 1); every exec runs
// it: `run` reads the exec block (working directory and environment,
// secrets included) from stdin, starts a session, reports its id and
// replaces itself with the command, which gets the rest of stdin; `kill`
// kills a session after a timeout; `put` writes an upload; `probe` reports
// what the pod shows from inside; `stat` the OOM kill count. The probe
// runs before the sandbox is handed out, so nothing the user runs can have
// touched what it reads.
//
// # Limits and tier, shown from inside
//
// The probe reads /proc/self/status (CapEff 0, NoNewPrivs 1, Seccomp 2),
// the root filesystem's read-only flag, the memory cgroup (its limit equal
// to memory_mb, and memsw equal to it on cgroup v1, memory.swap.max 0 on
// v2, or no swap on the node) and measures the process ceiling: Kubernetes
// has no per-container limit, only the kubelet's podPidsLimit on the pod's
// cgroup, which the container cannot read on cgroup v1; a child creates
// threads until the kernel refuses one with EAGAIN, once per node and
// backend (cached ten minutes). resources.pids other than the default is
// refused. What cannot be shown is refused with the reason and the pod
// removed. A pod that sees the node's own kernel is CONTAINER whatever its
// RuntimeClass (the DSN's runtime_class option) is called; any other
// kernel is UNKNOWN (UnverifiedIsolationWarning), since this probe cannot
// tell a sandbox kernel from a VM.
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
// kubelet's request URL. So the values travel over each exec's standard
// input, in the wrapper's exec block ahead of the command's own input, and
// are never written anywhere in the pod. A test puts a canary in a secret and shows it is absent
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
//
// # agent-sandbox
//
// With ?api=agent-sandbox a sandbox is one agents.x-k8s.io/v1beta1 Sandbox
// (agentsandbox.go), written with client-go's dynamic client so that the
// project's module graph gains nothing. Its pod template is podFor's spec,
// the same function the plain path uses; the controller makes the pod
// under the Sandbox's name, with the template's spec as it is and its
// labels, and the create waits for that pod and probes it like any other.
// The lifetime is the pod's activeDeadlineSeconds (the kubelet) and the
// Sandbox's shutdownTime with shutdownPolicy Delete (the controller). A pod
// deleted from outside is replaced by the controller; the sandbox keeps
// the uid of the pod it probed, and a command that reached another pod is
// SandboxGone (and the Sandbox is deleted). Close, Kill and the reaper
// delete the Sandbox, then its pod. The reaper lists Sandboxes as well as
// pods whatever the DSN says, so `sandboxio reap` finds both.
//
// # Warm pools
//
// pool.go: the backend's own warm pods (or Sandboxes), created and probed
// like a cold open from the template spec, with no tenant, no session and
// no secret, and activeDeadlineSeconds of idle time plus lifetime. A claim
// reads the pod back, refuses one that is not the pod probed or was
// changed, and in one compare-and-swap patch binds the tenant and session
// labels and lowers activeDeadlineSeconds to one lifetime from the claim
// (the API lets it fall, never rise). With agent-sandbox the Sandbox's
// shutdownTime is the end of the idle time until the claim moves it.
package kubernetes
