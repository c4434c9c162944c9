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
// exec's stdin, reap by label and owner, and egress enforced by a lock on
// each pod's own network namespace, proven on the cluster before it is
// relied on (below). agent-sandbox Sandboxes (?api=agent-sandbox) and warm
// pools: see their sections below.
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
// outcome is cached per cluster, namespace and egress mode with a time to
// live; a failed or unfinished probe is CapabilityNotSupported naming the
// probe and what it saw, never a pass.
//
// # Egress: the network lock, and its proof
//
// No NetworkPolicy is relied on: whether one is enforced depends on the
// CNI, and on the project's test cluster nothing enforces it (a plain
// bridge; kube-network-policies needs an nftables expression this kernel
// lacks). Instead every sandbox pod gets a second init container,
// sandboxio-net, which holds NET_ADMIN and nothing else and runs `wrap
// lock` in the pod's network namespace before the sandbox container starts
// with no capability (the traffic-capture pattern of service meshes). The
// lock is policy routing over netlink (wrap/netlock.go), so it needs no
// CNI support, no iptables or nftables binary and no kernel module:
//
//   - rule 100 looks up table 145, which makes unreachable the pod network
//     (the pod's on-link subnet, every node's spec.podCIDRs, the pod_cidr
//     option; a cluster of several nodes that shows no podCIDRs needs the
//     option), the service ranges (the ServiceCIDR objects, or the
//     service_cidr option; without either the lock is refused), every
//     node's addresses and the pod's gateway (the node's bridge address),
//     and all of IPv6. It comes first in every mode, open egress included,
//     so pods of different tenants cannot reach each other and no allow
//     entry can reopen a pod, a service or a node whatever its prefix.
//   - deny and allow lists add rule 101 to table 146: each allowed IPv4
//     block via the gateway (onlink, so the gateway needs no route of its
//     own), then unreachable 0.0.0.0/0, so the main table is never used.
//     Under deny every link but lo is also set down.
//
// Routes were chosen over packet filters because they need nothing of the
// node, and because a route lookup fails inside the sandbox's own kernel
// (ENETUNREACH) before any packet leaves. The sandbox process cannot undo
// the lock: netlink changes need CAP_NET_ADMIN, and it has no capability,
// no privilege escalation and a seccomp filter. Domain entries cannot be
// routed and are refused (SBX-NET-005), as are IPv6 entries.
//
// The lock needs a namespace whose Pod Security admission admits an init
// container adding NET_ADMIN (enforce=privileged; baseline and restricted
// refuse it). Whether it does, and whether the lock holds, is not assumed:
// a probe shows it (egressprobe.go) at apply (the registration's
// LiveCheck, through Preflight) and before the first open in a process,
// cached per cluster, namespace and mode for ten minutes (a failure for
// one). The probe runs three pods of the wrapper's image, labelled as this
// backend's own and removed like sandboxes: a listener; a control client
// with no lock, which must reach it (so that "blocked" cannot come from a
// broken pod network); and a client under exactly the mode's lock, which
// must fail to reach the listener and the node's bridge address with its
// own kernel refusing the route, must read the lock back, must find an
// address outside the cluster routed or not as the mode says (a
// documentation range stands for the allow list), and must be refused
// (EPERM) when it tries to undo the lock. The listener's log is the other
// witness: it must show the control and never the locked client. Anything
// else is CapabilityNotSupported naming the probe and what it saw, never a
// pass. Each sandbox reads the lock back from inside too (the wrapper's
// probe): a pod whose lock is missing is removed and refused.
//
// Under open egress cluster DNS, a service, is locked out too, so names do
// not resolve unless the image brings its own resolver configuration.
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
