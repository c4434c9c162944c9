// Package docker is the Docker Engine backend: it provisions sandboxes as
// containers through the Engine API and enforces every accepted policy on the
// daemon side, or refuses before creating anything.
//
// # Network
//
// egress "deny" (the default) runs the container in network mode none, so
// it has no interface that reaches anything: loopback, and under runc the
// egress observer's device (below). Open egress is used only for an
// explicit egress "allow", and then the container joins the bridge network
// sandboxio-egress, created on first use with inter-container traffic
// disabled: on Docker's default bridge every container can reach every
// other, so two tenants' sandboxes could talk to each other. The host (the
// network's gateway) stays reachable, as on any bridge. Docker has no
// per-host egress filter, so a non-empty allow list is refused with
// CapabilityNotSupported before any API call; allow lists are an E2B, Modal
// and Vercel capability.
//
// # Observed deny (blocked_egress) and learn
//
// Network mode none drops what a sandbox sends without a trace, so nothing
// could be counted. Under runc a deny sandbox is therefore observed, and
// egress "learn" is the same sandbox with the record asked for:
//
//   - The container keeps network mode none. Once it runs, the backend (root,
//     beside a local daemon) creates a TUN device in its own namespace, moves
//     it into the container's network namespace (found through the
//     container's init process, after checking that the process's cgroup
//     names the container and that the namespace is not the backend's own),
//     and there names it egress0, gives it the IPv4 dummy address 192.0.0.8
//     (RFC 7600: an address of the host's own would be one the sandbox
//     reaches on its loopback, unobserved) and 2001:db8::2, and the IPv4 and
//     IPv6 default routes. Docker disables IPv6 in such a container; it is
//     enabled on this device alone, so IPv6 attempts are observed too. The
//     namespace must have held only lo, or nothing is attached.
//   - A goroutine in the backend's process reads that device. Each packet is
//     parsed (bounded, fuzzed: package egress), counted, and answered so the
//     sandboxed code fails at once instead of timing out: a DNS query gets a
//     REFUSED answer, a TCP SYN a reset (ECONNREFUSED). On the ports where
//     the client speaks first and names its host (80, 443, 8000, 8080,
//     8443) the SYN is answered with a SYN-ACK instead, keeping no state, so
//     that the client's first data arrives: its TLS server name or HTTP Host
//     is recorded (a tls or http entry naming the tcp attempt) and the
//     connection reset (ECONNRESET). There a bare connect succeeds, with
//     nothing behind it. Nothing is ever forwarded: the observer has no
//     socket and no route out, only the device's file, and it writes back
//     into the sandbox alone. The first 32 distinct destinations are kept
//     (DNS names, TLS and HTTP names, TCP and UDP addresses and ports, pings,
//     other protocols) with counts; past that only the total grows, so
//     memory is bounded whatever the sandbox sends. The kernel's own
//     neighbour discovery and multicast reports are not attempts.
//
// Why this shape. The sandboxed code gains nothing: it still has no
// capability (CAP_NET_ADMIN is dropped, so it cannot change the device,
// its address or its routes), and what it can reach is a file read by this
// process that answers with resets. Tenants share nothing: each sandbox has
// its own device, in its own namespace, read by its own goroutine. No
// interface reaches the host or another container: the device is a
// point-to-point TUN with the backend's process at the other end, not a
// veth, bridge or macvlan; listeners on the host and on the Docker bridge's
// gateway see nothing from a deny sandbox (egress_test.go). The device is
// created in the backend's namespace and moved, so its file holds no
// reference to the sandbox's namespace: when the container ends, by Close,
// its lifetime or a reaper, the namespace goes, the device with it, and the
// reader ends; Close and Kill also close it. The alternatives were worse: a
// Docker network with a sink container shares a network between tenants and
// adds a container per sandbox; a veth pair puts a host-side interface next
// to every sandbox; packet capture on a bridge requires the sandbox to have
// one.
//
// What the observer adds to opening a sandbox (an inspect of the container
// and a few netlink calls) is measured by BenchmarkOpenRunClose, which
// reports backend/no-observer: open, run and close with and without it,
// interleaved in one run. The budget is 15%. Measured here, 30 rounds each on
// 2 cores shared with other work (load average 11 to 12): medians 1.82 s
// against 1.78 s (1.023), and in a second run 2.28 s against 2.47 s (0.924);
// the observer's cost is below the noise of a loaded daemon.
//
// gVisor (runsc) is not observed: it answers the sandbox's packets in its own
// network stack, which under --network=none has loopback only, so nothing
// the sandbox sends reaches the namespace an observer would watch. There
// blocked_egress stays null and learn is refused (capability data:
// blocked_egress_reporting false for docker/runsc). Where the device cannot
// be attached under deny (no /dev/net/tun, say), deny still holds (network
// mode none) and that sandbox reports null; under learn the sandbox is
// removed and the open fails, since learn promises a record.
//
// # Runtimes and tiers
//
// A runtime's name claims its tier (runc CONTAINER, runsc GVISOR, kata
// MICROVM), and what the daemon really runs for it confirms the claim: the
// registered binary or containerd shim must be one sandboxio recognises and
// of the same tier. A runtime named kata that runs crun or runc is refused
// with a ConfigurationError before anything is created, so it can never
// satisfy require_isolation.
//
// # Hardening and caps
//
// Every container drops all capabilities, sets no-new-privileges, has its
// memory limit equal to its memory+swap limit (so swap cannot stretch the
// cap), a CPU quota and a process ceiling. The process ceiling depends on the
// runtime:
//
//   - runc: the pids cgroup (pids.max = pids).
//   - runsc (gVisor): the pids cgroup on the host counts gVisor's own threads,
//     not the sandboxed processes: gVisor needs about 55 host threads when
//     idle, refuses to start below ~32 and dies on the first exec at 64. So
//     the ceiling on sandboxed processes is RLIMIT_NPROC = pids, which the
//     gVisor kernel enforces per sandbox on processes and threads (root is not
//     exempt there, unlike on Linux, and CAP_SYS_RESOURCE is dropped so it
//     cannot be raised). A fork bomb gets EAGAIN at the ceiling. The host
//     pids cgroup is still set, to 128 + 16×pids, as a backstop: measured
//     here, a fork bomb held at 256 guest processes still drove gVisor's host
//     thread count past 5000 in six seconds, which on a host with pid_max
//     32768 is a denial of service; with the backstop the sandbox itself dies
//     instead (reported as ResourceLimitExceeded(pids), on the host cgroup's
//     own count of the forks it refused: hostpids.go) and the host is
//     unaffected. Ordinary work stays far below it: 1000 processes run one
//     after another kept gVisor at ~120 host threads, 100 concurrent ones at
//     ~850.
//
// The disk cap strategy is chosen per daemon: where the storage driver takes
// a per-container size (--storage-opt size, e.g. overlay2 on xfs with pquota)
// the writable layer is bounded; otherwise (overlay2 on ext4, this project's
// machines) the root filesystem is read-only and the writable paths /tmp,
// /work, /var/tmp, /root and /home are tmpfs mounts. Either way Docker adds
// writable places of its own, 64 MB tmpfs mounts at /dev and /dev/shm and
// the /dev/mqueue filesystem, which would let a sandbox write well past
// disk_mb. So /dev/shm is sized from the cap too (HostConfig.ShmSize), and
// on runc /dev and /dev/mqueue are read-only (HostConfig.ReadonlyPaths; the
// device nodes stay usable), as are the host files Docker binds over
// /etc/hosts, /etc/hostname and /etc/resolv.conf, which a writable root
// filesystem (storage-opt) would leave writable outside the layer's size.
// Each writable path has a fixed share of disk_mb (the table is
// disksplit.Shares); under storage-opt the layer gets all but /dev/shm's share.
// Every writable mount together holds at most disk_mb. So disk_mb is the
// total, not what one path holds: a file in /work can grow only to /work's
// share of it. tmpfs pages are also charged to the memory cap.
//
// gVisor is the exception for /dev: runsc mounts its own in-memory /dev,
// ignores a size, uid or mode for it and the read-only paths, and a
// read-only /dev refuses `>/dev/null`. Under runsc what is written into /dev
// (not /dev/shm, which is sized) is charged to memory_mb instead: past it
// the sandbox is killed, ResourceLimitExceeded(memory). The strategy in use,
// with each mount's size and what becomes of /dev, is reported in
// Info.DiskCapStrategy and by Preflight (the template's disk_cap_strategy);
// the cap is never dropped.
//
// # Commands, timeouts and caps exceeded
//
// Create and every exec are bounded (model.EffectiveTimeout: the call's
// timeout, else the sandbox's, else 300 s). Every exec runs under a one-line
// /bin/sh wrapper that reports its pid, which is also its session and process
// group id. On timeout that session is killed from inside the sandbox by a
// script made of shell builtins only (so it still runs when the sandbox is at
// its process ceiling) and ExecutionTimeout is returned, never partial output
// (output streamed to RunOptions.Stdout or Stderr has been written already).
// What a command prints is capped at 64 MiB per stream, buffered or
// streamed: past it the command is stopped, ResourceLimitExceeded(output).
// When the session cannot be killed that way (no shell in the image, no room
// to start the killer, processes that will not die) the whole sandbox is
// killed instead.
//
// A command that ends is checked for caps it hit: an OOM kill anywhere in the
// sandbox (the daemon's "oom" event, and under runc the memory cgroup's
// oom_kill count), a fork refused at the process ceiling (the pids cgroup's
// "max" event count under runc, the pids cgroup being full, the runtime
// refusing to start a process, or, under gVisor, which counts refused forks
// nowhere, the command reporting EAGAIN from fork, the sandbox found full
// before the killer ran, or the runtime's own process list of the sandbox
// full), and a write that found no space. A command stopped at its timeout
// is checked the same way: a sandbox held at its ceiling past the timeout is
// ResourceLimitExceeded(pids), not ExecutionTimeout, on either runtime. Each is ResourceLimitExceeded naming the limit, and what the command
// left running is stopped. A clean exit with no OOM event costs no extra API
// call.
//
// Secrets are passed to each exec's environment only, never to the
// container's configuration, where `docker inspect` would show them.
//
// # Lifetime
//
// The lifetime is enforced inside the sandbox by a process its code can
// neither signal nor outlive, and on the host by a backstop; neither needs
// the client. PID 1 of every sandbox is sandboxio's own init: this very
// binary, bind-mounted read-only at /.sandboxio-init (see sinit.go; Docker's
// init is off). It makes itself non-dumpable, reaps orphans, and at the
// deadline (boot-time clock from its start, and the wall-clock expiry the
// backend computed) exits: the kernel ends every process of the sandbox and
// AutoRemove deletes the container. Linux delivers no signal from inside a
// PID namespace to its init unless the init handles it, so SIGSTOP and
// SIGKILL from inside do nothing; the signals the Go runtime handles end
// the init, which ends the sandbox early (fail closed). gVisor delivers
// SIGSTOP and SIGKILL from inside to PID 1: a killed init ends the sandbox,
// a stopped one is what the host backstop is for (backstop.go): one
// container per daemon that removes every sandbox past its expiry label
// plus 5 s, checking every 2 s. A runsc sandbox is not created unless the
// backstop runs. A sandbox is gone within its lifetime plus about 1 s (the
// init, runc) or 7 s plus removal (the backstop). A command running at the
// end ends in SandboxGone, as does any later use.
//
// The binary must be a static Linux executable for the daemon's
// architecture (built with CGO_ENABLED=0, as make does), or InitEnv must
// name one; otherwise Create refuses before anything is created. The image
// needs no sleep or init of its own; /bin/sh only for the exec wrapper and
// Upload (Create checks once per image that a container stays up).
//
// # One sandbox per tenant and session
//
// A sandbox's container name is derived from its tenant and session (a
// hash, with the scope of ScopeEnv), so that the daemon refuses a second
// container for them whichever process or host asks: the create gets 409
// Conflict and is refused with ConfigurationError SBX-RUN-005, naming the
// holder (its owner's id, pid, host and PID namespace). A holder that is no
// sandbox any more (exited or dead, past its expiry, or its owner verifiably
// gone: see backends.Owner.Judge) is removed and the create tried again; an
// owner that cannot be judged from here (another PID namespace or machine)
// counts as alive; so is a name whose holder cannot be inspected
// yet (a create in flight), a few times. Clean-up of a create this process
// gave up on removes the container of that name only while it carries this
// process's owner label.
//
// # Reaper
//
// Each sandbox carries labels naming its owner (backends.Owner: a
// per-process id, pid, start time, boot id, PID and time namespaces, machine
// digest and hostname), its expiry, and a mark (see mark.go) that only this
// host's reap key makes. Two mechanisms remove
// leftovers, neither needing an image from a registry:
//
//   - A watcher process, in the spirit of testcontainers' Ryuk. On the first
//     Create a process re-executes its own binary in reaper mode (see
//     reaperEnv; the package's init hands control to the reaper before main
//     runs). The watcher holds the read end of a pipe whose write end only the
//     owner holds; when the owner exits for any reason, SIGKILL included, the
//     kernel closes the write end, the watcher reads EOF, waits a short grace
//     and removes every container carrying the owner's id. It runs in its own
//     session with its standard streams on /dev/null, so it survives the
//     owner's process group being killed and never holds a caller's pipes.
//     The owner also hands the watcher, over that pipe, the final audit
//     record of each sandbox (backends.Trailer), withdrawn when the sandbox
//     is closed; the watcher appends the records it still holds to the
//     owner's audit file after the sweep (see trail.go).
//   - Reap (the `sandboxio reap` command) sweeps containers whose expiry has
//     passed or whose owner is verifiably gone, and removes only those that
//     carry a valid mark; the others it lists as left.
package docker
