package docker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker/disksplit"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker/egress"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Name is the backend's name, the scheme of its DSN.
const Name = "docker"

// Disk-cap strategies.
const (
	DiskAuto       = "auto"        // storage-opt where the daemon takes it, otherwise tmpfs
	DiskStorageOpt = "storage-opt" // per-container size of the writable layer
	DiskTmpfs      = "tmpfs"       // read-only root filesystem, size-bounded tmpfs for writable paths
)

// daemonInfoTTL bounds how long the daemon's runtimes are trusted without
// asking again: runtimes change only when the daemon is reconfigured and
// restarted, and asking on every create would cost a round trip.
const daemonInfoTTL = 30 * time.Second

type config struct {
	scope         string // of the one-sandbox-per-tenant-and-session rule (ScopeEnv)
	diskStrategy  string
	teardownGrace time.Duration
	watcher       bool
	// noObserver leaves deny sandboxes unobserved (blocked_egress null):
	// WithoutEgressObserver, and the benchmark's baseline.
	noObserver bool
}

// Option configures the backend.
type Option func(*config)

// WithDiskStrategy sets the default disk-cap strategy (DiskAuto, the default,
// DiskStorageOpt or DiskTmpfs). A spec's DSN option disk_strategy overrides
// it. Forcing storage-opt on a daemon that refuses it is a ConfigurationError,
// never a silently dropped cap.
func WithDiskStrategy(s string) Option { return func(c *config) { c.diskStrategy = s } }

// WithoutWatcher disables the detached reaper process. Leftovers of a crashed
// owner are then removed only at their lifetime or by Reap.
func WithoutWatcher() Option { return func(c *config) { c.watcher = false } }

// WithoutEgressObserver leaves deny sandboxes unobserved: network mode none
// alone, loopback only, blocked_egress null. It is for embedders that stand
// in for a backend which reports no blocked egress (the local conformance
// servers of E2B, Modal, Vercel and Daytona), whose sandboxes must look like
// that vendor's. Learn sandboxes are observed all the same.
func WithoutEgressObserver() Option { return func(c *config) { c.noObserver = true } }

type dockerBackend struct {
	cli    *client.Client
	cfg    config
	owner  backends.Owner
	events *eventWatch
	// writes bounds the creates, starts and removals this backend has in
	// flight at once (see maxDaemonWrites).
	writes chan struct{}

	mu         sync.Mutex
	info       *daemonFacts
	infoAt     time.Time
	storageOpt int // 0 not yet known, 1 the daemon takes storage-opt size, -1 it refuses it
	storageMsg string
	images     map[string]imageFacts

	netMu     sync.Mutex // serialises finding or creating EgressNetwork
	egressNet string     // its id once known

	backstop backstopState // the daemon's host backstop (backstop.go)
}

type daemonFacts struct {
	id            string // the daemon's ID: the gateway proof is cached by it
	runtimes      map[string]system.RuntimeWithStatus
	driver        string
	cgroupVersion string
	arch          string // the daemon host's architecture (x86_64, aarch64, ...)
}

// imageFacts is what the first sandbox of an image showed about it.
type imageFacts struct {
	shell bool // /bin/sh exists: the exec wrapper and Upload work
}

// New returns the Docker backend. The daemon address and TLS material come
// from the environment (DOCKER_HOST, DOCKER_TLS_VERIFY, DOCKER_CERT_PATH),
// never from a DSN. No API call is made until the backend is used.
func New(opts ...Option) (backends.Backend, error) {
	return newBackend(opts...)
}

func newBackend(opts ...Option) (*dockerBackend, error) {
	cfg := config{scope: scopeFromEnv(), diskStrategy: DiskAuto, teardownGrace: model.TeardownGrace, watcher: true}
	for _, o := range opts {
		o(&cfg)
	}
	switch cfg.diskStrategy {
	case DiskAuto, DiskStorageOpt, DiskTmpfs:
	default:
		return nil, &model.Error{Class: model.ErrConfiguration, Attribute: "disk_strategy",
			Message: fmt.Sprintf("%q is not a disk-cap strategy", cfg.diskStrategy), Fix: "use auto, storage-opt or tmpfs"}
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	b := &dockerBackend{cli: cli, cfg: cfg, owner: processOwner(), images: map[string]imageFacts{},
		writes: make(chan struct{}, maxDaemonWrites)}
	b.events = newEventWatch(cli)
	return b, nil
}

func (b *dockerBackend) Name() string { return Name }

func (b *dockerBackend) Capabilities(runtime string) (backends.Capabilities, bool) {
	return backends.Lookup(backends.CapabilityKey(Name, runtime))
}

// Close releases the client and stops the event subscription. Sandboxes
// still open are not touched: each is bounded by its lifetime, and the
// watcher removes them when this process exits.
func (b *dockerBackend) Close() error {
	b.events.stop()
	return b.cli.Close()
}

// daemon returns the daemon's facts, asking at most once per daemonInfoTTL.
func (b *dockerBackend) daemon(ctx context.Context) (*daemonFacts, error) {
	b.mu.Lock()
	if b.info != nil && time.Since(b.infoAt) < daemonInfoTTL {
		d := b.info
		b.mu.Unlock()
		return d, nil
	}
	b.mu.Unlock()
	in, err := b.cli.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("docker info: %w", err)
	}
	d := &daemonFacts{id: in.ID, runtimes: in.Runtimes, driver: in.Driver, cgroupVersion: in.CgroupVersion, arch: in.Architecture}
	b.mu.Lock()
	b.info, b.infoAt = d, time.Now()
	b.mu.Unlock()
	return d, nil
}

// checkRuntime refuses, before anything is created, a runtime the daemon
// does not have, one whose binary contradicts the tier its name claims, and
// a network policy the runtime's registration cannot give.
func checkRuntime(d *daemonFacts, p createPlan) error {
	rt, ok := d.runtimes[p.runtime]
	if !ok {
		names := make([]string, 0, len(d.runtimes))
		for n := range d.runtimes {
			names = append(names, n)
		}
		sort.Strings(names)
		return &model.Error{Class: model.ErrConfiguration, Attribute: "runtime",
			Message: fmt.Sprintf("runtime %s is not registered on the Docker daemon (it has %s)", p.runtime, strings.Join(names, ", ")),
			Fix:     "register it under \"runtimes\" in /etc/docker/daemon.json and restart dockerd, or choose a registered runtime"}
	}
	// The tier is claimed by the runtime's name and must be confirmed by
	// what the daemon really runs for it: a runtime named kata that runs
	// crun must not satisfy require_isolation = "MICROVM".
	what := rt.Path
	if what == "" {
		what = rt.Type
	}
	switch t, ok := tierOfRegistration(rt.Runtime); {
	case !ok:
		return &model.Error{Class: model.ErrConfiguration, Attribute: "runtime",
			Message: fmt.Sprintf("runtime %s is registered to run %q, which sandboxio does not recognise, so its %s tier cannot be confirmed", p.runtime, what, p.tier),
			Fix:     "register the runtime with its own binary (runc, runsc, a kata runtime or shim) in /etc/docker/daemon.json"}
	case t != p.tier:
		return &model.Error{Class: model.ErrConfiguration, Attribute: "runtime",
			Message: fmt.Sprintf("runtime %s is registered to run %s, which gives %s, not %s", p.runtime, what, t, p.tier),
			Fix:     "fix the runtime's path in /etc/docker/daemon.json"}
	}
	if p.tier == model.TierGVisor {
		// gVisor under Docker's network mode none starts only when runsc
		// itself is told --network=none; with that argument it never has a
		// network, so open egress cannot be given.
		netNone := false
		for _, a := range rt.Args {
			if a == "--network=none" || a == "-network=none" {
				netNone = true
			}
		}
		switch {
		case p.networkMode == "none" && !netNone:
			return &model.Error{Class: model.ErrConfiguration, Attribute: "runtime",
				Message: "runsc is registered without --network=none; gVisor then fails to start under network mode none",
				Fix:     "register runsc with \"runtimeArgs\": [\"--network=none\"] in /etc/docker/daemon.json and restart dockerd"}
		case p.networkMode == "bridge" && netNone:
			return gap(rules.NetOpenUnsupported, "network.egress", "open egress, and runsc registered with --network=none")
		}
	}
	return nil
}

// diskStrategy resolves the strategy for one create: forced by the DSN or
// the backend option, or what the daemon is known to take. It returns
// DiskAuto when the daemon has not been asked yet: the create then tries
// storage-opt and falls back on a refusal.
func (b *dockerBackend) diskStrategy(p createPlan) string {
	s := p.diskStrategy
	if s == "" {
		s = b.cfg.diskStrategy
	}
	if s != DiskAuto {
		return s
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.storageOpt {
	case 1:
		return DiskStorageOpt
	case -1:
		return DiskTmpfs
	}
	return DiskAuto
}

func (b *dockerBackend) setStorageOpt(ok bool, msg string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ok {
		b.storageOpt = 1
	} else {
		b.storageOpt, b.storageMsg = -1, msg
	}
}

// isStorageOptRefusal recognizes the daemon refusing a per-container size,
// e.g. "--storage-opt is supported only for overlay over xfs with 'pquota'
// mount option" from overlay2 on ext4.
func isStorageOptRefusal(err error) bool {
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "storage-opt") || strings.Contains(s, "storage opt") || strings.Contains(s, "storageopt")
}

// shmPath is the one writable mount every strategy has besides the root
// filesystem or the tmpfs mounts: the IPC namespace's /dev/shm, sized by
// HostConfig.ShmSize (Docker's default would be 64 MB whatever disk_mb says).
const shmPath = disksplit.ShmPath

// writablePaths are the writable mounts of the tmpfs strategy and their
// share of the disk cap (disksplit.Shares, the one table of the split).
var writablePaths = disksplit.Shares

// readonlyPaths are made read-only inside a runc sandbox: Docker's default
// list, which setting the list replaces, and the writable places Docker
// mounts that disk_mb cannot size: /dev (a 64 MB tmpfs, writable by the
// sandbox's root), /dev/mqueue, and the host files Docker binds over
// /etc/hosts, /etc/hostname and /etc/resolv.conf, which are writable, and
// outside the layer's size, whenever the root filesystem is (storage-opt).
// The device nodes in /dev stay usable. runsc ignores the list: see devNote.
var readonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger", "/dev", "/dev/mqueue",
	"/etc/hosts", "/etc/hostname", "/etc/resolv.conf"}

// minTmpfsKiB keeps every mount a real size: a tmpfs with size=0 would be
// unbounded.
const minTmpfsKiB = 64

// pageKiB is the unit tmpfs sizes are rounded up to; sizes are whole pages
// so that the mounts add up to exactly the cap.
const pageKiB = 4

// tmpfsSizes splits the disk cap (in KiB per path) over the writable paths so
// that their sizes add up to the cap and none is zero.
func tmpfsSizes(diskMB int64) map[string]int64 {
	total := diskMB * 1024
	sizes := map[string]int64{}
	rest := total
	var restPaths []string
	for _, w := range writablePaths {
		if w.Percent == 0 {
			restPaths = append(restPaths, w.Path)
			continue
		}
		n := max(total*w.Percent/100/pageKiB*pageKiB, minTmpfsKiB)
		sizes[w.Path] = n
		rest -= n
	}
	// The paths without a fixed share split the rest equally; the last one
	// takes what rounding to pages leaves.
	n := int64(len(restPaths))
	rest = max(rest, n*minTmpfsKiB)
	part := rest / n / pageKiB * pageKiB
	for i, path := range restPaths {
		if i == len(restPaths)-1 {
			part = rest - part*(n-1)
		}
		sizes[path] = part
	}
	return sizes
}

// shmKiB is /dev/shm's share of the cap.
func shmKiB(diskMB int64) int64 { return tmpfsSizes(diskMB)[shmPath] }

// layerKiB is the writable layer's size under the storage-opt strategy: the
// cap less /dev/shm.
func layerKiB(diskMB int64) int64 { return max(diskMB*1024-shmKiB(diskMB), minTmpfsKiB) }

func kib(n int64) string {
	if n%1024 == 0 {
		return strconv.FormatInt(n/1024, 10) + "M"
	}
	return strconv.FormatInt(n, 10) + "k"
}

// devNote says what becomes of /dev under a tier.
func devNote(tier model.Tier) string {
	if tier == model.TierGVisor {
		return "; /dev is gVisor's own in-memory filesystem, which takes no size: what is written there is charged to memory_mb, not disk_mb"
	}
	return "; /dev and /dev/mqueue read-only"
}

// diskDescription says how the disk cap is enforced, for Info and Preflight.
func diskDescription(strategy string, tier model.Tier, diskMB int64) string {
	if strategy == DiskStorageOpt {
		return fmt.Sprintf("storage-opt: writable layer size=%s, %s=%s (total %dM)", kib(layerKiB(diskMB)), shmPath, kib(shmKiB(diskMB)), diskMB) + devNote(tier)
	}
	sizes := tmpfsSizes(diskMB)
	parts := make([]string, 0, len(writablePaths))
	for _, w := range writablePaths {
		parts = append(parts, w.Path+"="+kib(sizes[w.Path]))
	}
	return "tmpfs: read-only root filesystem, writable tmpfs " + strings.Join(parts, ",") +
		fmt.Sprintf(" (total %dM, also charged to memory)", diskMB) + devNote(tier)
}

// runscPidsBackstop is the host pids cgroup limit of a gVisor sandbox. gVisor
// needs ~55 host threads idle and grows its host threads with the sandboxed
// processes (docs/design/gvisor-pids-backstop.md).
func runscPidsBackstop(pids int64) int64 { return 128 + 16*pids }

func pidsDescription(tier model.Tier, pids int64) string {
	if tier == model.TierGVisor {
		return fmt.Sprintf("gVisor RLIMIT_NPROC=%d on sandboxed processes and threads; host pids cgroup backstop %d", pids, runscPidsBackstop(pids))
	}
	return fmt.Sprintf("cgroup pids.max=%d", pids)
}

// containerConfig builds the container for a plan. Everything the policy
// promises is here: network mode, dropped capabilities, no-new-privileges,
// memory equal to memory+swap, CPU quota, process ceiling, disk cap and the
// daemon-side lifetime.
//
// network is the network mode: "none" for denied egress, the id of
// EgressNetwork for open egress.
func containerConfig(p createPlan, strategy, network string, labels map[string]string) (*container.Config, *container.HostConfig) {
	cfg := &container.Config{
		Image: p.spec.Image,
		// The lifetime is kept by PID 1, sandboxio's own init (sinit.go):
		// at the deadline it exits, the kernel ends every process of the
		// sandbox and AutoRemove deletes the container, whether or not a
		// client is still around, whatever the sandbox's code does.
		Entrypoint: initCommand(p),
		Cmd:        nil,
		Env:        p.env,
		Labels:     labels,
	}
	if p.warmIdle > 0 {
		// The claim line arrives on the input (see pool.go).
		cfg.OpenStdin, cfg.StdinOnce = true, true
	}
	no := false
	mem := p.caps.MemoryMB * 1024 * 1024
	hc := &container.HostConfig{
		NetworkMode: container.NetworkMode(network),
		AutoRemove:  true,
		// No Docker init: sandboxio's init is PID 1 and reaps the orphans of
		// exec'd commands as Docker's would.
		Init:        &no,
		Runtime:     p.runtime,
		CapDrop:     []string{"ALL"},
		SecurityOpt: []string{"no-new-privileges:true"},
		// PID 1 prints nothing; a log driver would only keep files on the host.
		LogConfig: container.LogConfig{Type: "none"},
		Resources: container.Resources{
			Memory:     mem,
			MemorySwap: mem, // equal: no swap beyond the memory cap
			NanoCPUs:   int64(math.Round(p.caps.CPU * 1e9)),
		},
	}
	pids := p.caps.Pids
	if p.tier == model.TierGVisor {
		backstop := runscPidsBackstop(pids)
		hc.PidsLimit = &backstop
		hc.Ulimits = []*container.Ulimit{{Name: "nproc", Soft: pids, Hard: pids}}
	} else {
		hc.PidsLimit = &pids
	}
	// Every writable place is sized from disk_mb: /dev/shm here, the layer
	// or the tmpfs mounts below; /dev and /dev/mqueue are read-only (runc).
	hc.ShmSize = shmKiB(p.caps.DiskMB) * 1024
	if p.tier != model.TierGVisor {
		hc.ReadonlyPaths = slices.Clone(readonlyPaths)
	}
	switch strategy {
	case DiskStorageOpt, DiskAuto:
		hc.StorageOpt = map[string]string{"size": fmt.Sprintf("%dk", layerKiB(p.caps.DiskMB))}
	default:
		hc.ReadonlyRootfs = true
		hc.Tmpfs = map[string]string{}
		for path, size := range tmpfsSizes(p.caps.DiskMB) {
			if path == shmPath {
				continue
			}
			mode := "1777"
			if path == "/root" {
				mode = "0700"
			}
			hc.Tmpfs[path] = fmt.Sprintf("rw,nosuid,nodev,size=%dk,mode=%s", size, mode)
		}
	}
	if p.initPath != "" {
		hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: p.initPath, Target: initTarget, ReadOnly: true,
			BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate}})
	}
	for _, b := range p.binds {
		hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: b.Source, Target: b.Target,
			BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate}})
	}
	if f := p.brokerFiles; f != nil {
		for src, target := range map[string]string{f.bundle: caBundleTarget, f.caOnly: brokerCATarget} {
			hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: src, Target: target, ReadOnly: true,
				BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate}})
		}
	}
	return cfg, hc
}

// Bind is a host directory bound read-write into one sandbox at Target. It
// is no user-facing feature: the local conformance servers of the cloud
// backends use it to back a vendor's volume (one tenant's directory of it)
// with a directory on the host. Nothing in a spec can ask for it.
type Bind struct {
	Source string // absolute host path, an existing directory
	Target string // absolute path inside the sandbox
}

// CreateWithBinds is Create with host directories bound in. The binds are
// checked (absolute, existing directories, no target twice, none on a
// path sandboxio mounts itself) before anything is created.
func CreateWithBinds(ctx context.Context, b backends.Backend, req backends.CreateRequest, binds []Bind) (backends.Sandbox, error) {
	db, ok := b.(*dockerBackend)
	if !ok {
		return nil, fmt.Errorf("docker: CreateWithBinds needs a backend from docker.New")
	}
	if err := checkBinds(binds); err != nil {
		return nil, err
	}
	return db.createWith(ctx, req, binds)
}

func checkBinds(binds []Bind) error {
	seen := map[string]bool{}
	for _, b := range binds {
		if !filepath.IsAbs(b.Source) || !path.IsAbs(b.Target) || path.Clean(b.Target) == "/" {
			return fmt.Errorf("docker: bind %q -> %q: both paths must be absolute, and the target not /", b.Source, b.Target)
		}
		if fi, err := os.Stat(b.Source); err != nil || !fi.IsDir() {
			return fmt.Errorf("docker: bind source %q is not a directory", b.Source)
		}
		t := path.Clean(b.Target)
		if _, mounted := tmpfsSizes(model.MinDiskMB)[t]; mounted || seen[t] || t == initTarget {
			return fmt.Errorf("docker: bind target %q is already mounted", b.Target)
		}
		seen[t] = true
	}
	return nil
}

// Create provisions one sandbox. Everything that can be refused is refused
// before the first API call or, for what needs the daemon (the runtime), before
// the container is created. The whole create is bounded by the create timeout.
func (b *dockerBackend) Create(ctx context.Context, req backends.CreateRequest) (backends.Sandbox, error) {
	return b.createWith(ctx, req, nil)
}

func (b *dockerBackend) createWith(ctx context.Context, req backends.CreateRequest, binds []Bind) (backends.Sandbox, error) {
	p, err := validate(req, true)
	if err != nil {
		return nil, err
	}
	p.binds = binds
	cctx, cancel := context.WithTimeout(ctx, p.createTimeout)
	defer cancel()
	sb, err := b.create(cctx, p)
	if err == nil {
		return sb, nil
	}
	if ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
		return nil, &model.Error{Class: model.ErrCreateTimeout,
			Message: fmt.Sprintf("the sandbox was not ready within %s; anything half-created is being removed", p.createTimeout),
			Fix:     "raise timeout_seconds (or the create timeout), or check the daemon's load", Err: err}
	}
	return nil, err
}

func (b *dockerBackend) create(ctx context.Context, p createPlan) (*sandbox, error) {
	d, err := b.daemon(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkRuntime(d, p); err != nil {
		return nil, err
	}
	if p.initPath, err = initBinary(d.arch); err != nil {
		return nil, err
	}
	if p.forward && p.gwProbe == nil {
		if err := b.gatewayProven(ctx, p.spec, d); err != nil {
			return nil, err
		}
	}
	if err := b.ensureBackstop(ctx, d.arch); err != nil {
		// Under gVisor the init can be stopped from inside (the sandbox's
		// kernel delivers SIGSTOP to its PID 1): the backstop is what
		// keeps the lifetime there. Under runc the kernel shields the
		// init, and the backstop is a second line.
		if p.tier == model.TierGVisor {
			return nil, backstopError(p.tier, err)
		}
		tracef("the host backstop is not running: %v", err)
	}
	strategy := b.diskStrategy(p)
	b.events.start()
	if b.cfg.watcher {
		// Before the first container exists, so that a crash right after it
		// is created is already covered.
		ensureWatcher()
	}

	// One sandbox per tenant and session: the name is theirs, and the
	// daemon refuses a second container of the same name.
	name := sessionName(b.cfg.scope, p.spec.TenantID, p.spec.SessionID)
	if name == "" {
		name = "sandboxio-" + randomHex(8)
	}
	created := time.Now()
	expires := created.Add(p.lifetime)
	if p.warmIdle > 0 {
		// A warm sandbox has no tenant yet: a name of its own, renamed at
		// claim. Its expiry label is the latest it can live, claimed at
		// the last moment of its idle time: the reaper's bound.
		name = warmPrefix + randomHex(8)
		expires = created.Add(p.warmIdle + p.lifetime)
		p.idleUntil = created.Add(p.warmIdle)
	}
	p.expires = expires
	labels := b.sandboxLabels(p, expires)
	if p.warmIdle > 0 {
		labels[labelPool] = poolWarm
		labels[labelSpecHash] = p.warmSpecHash
		labels[labelIdleUntil] = p.idleUntil.UTC().Format(time.RFC3339)
	}
	setMark(labels)

	netMode := "none"
	if p.networkMode == "bridge" {
		if netMode, err = b.egressNetwork(ctx); err != nil {
			return nil, err
		}
	}
	// The broker exists before the container, whose environment holds its
	// placeholders and whose trust store its CA; its files are needed
	// only until the start has bound them.
	if err := p.openBroker(); err != nil {
		return nil, err
	}
	defer p.brokerFiles.remove()
	c := &containerCreate{b: b, p: p, name: name, labels: labels, netMode: netMode, strategy: strategy}
	resp, err := c.create(ctx)
	if err != nil {
		return nil, err
	}
	id := resp.ID
	b.events.track(id)

	facts, err := b.startContainer(ctx, id, name, p)
	if err != nil {
		return nil, err
	}

	s := &sandbox{
		b:           b,
		id:          id,
		name:        name,
		runtime:     p.runtime,
		tier:        p.tier,
		caps:        p.caps,
		callTimeout: p.callTimeout,
		created:     created,
		expires:     expires,
		labels:      labels,
		secrets:     p.secrets,
		shell:       facts.shell,
		onWarning:   p.onWarning,
		diskCap:     diskDescription(c.strategy, p.tier, p.caps.DiskMB),
		pidsCap:     pidsDescription(p.tier, p.caps.Pids),
	}
	if err := b.attachObserver(ctx, s, p); err != nil {
		return nil, err
	}
	b.attachHostPids(ctx, s)
	if p.networkMode == "bridge" && p.onWarning != nil {
		w := backends.RuleWarning(model.OpenEgressWarning, rules.NetOpenEgress, "network.egress")
		w.SandboxID, w.Labels = id, s.Info().Labels
		p.onWarning(w)
	}
	return s, nil
}

// attachObserver gives a deny or learn sandbox under runc its egress
// observer. Deny holds without one (network mode none): that sandbox then
// just reports no count (blocked_egress null). Learn promises a record, so a
// learn sandbox without its observer is removed and the create fails.
func (b *dockerBackend) attachObserver(ctx context.Context, s *sandbox, p createPlan) error {
	if p.forward {
		return b.attachGateway(ctx, s, p)
	}
	if !p.observe || (!p.learn && b.cfg.noObserver) {
		return nil
	}
	o, err := b.observe(ctx, s.id)
	if err == nil {
		s.egress = o
		return nil
	}
	if p.learn {
		b.discard(ctx, s.id, s.name)
		return fmt.Errorf("egress learn: %w", err)
	}
	tracef("egress observer of %s not attached: %v", short(s.id), err)
	return nil
}

// observe attaches the egress observer to a started container, in its
// network namespace (that of its init process).
func (b *dockerBackend) observe(ctx context.Context, id string) (*egress.Observer, error) {
	ins, err := b.cli.ContainerInspect(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("container inspect: %w", err)
	}
	if ins.State == nil || !ins.State.Running || ins.HostConfig == nil || ins.HostConfig.NetworkMode != "none" {
		return nil, fmt.Errorf("egress observer: the container is not running in network mode none")
	}
	return egress.Attach(ins.State.Pid, id)
}

// sandboxLabels are the container's labels: the plan's, the owner's, and
// what reap and Info read back (expiry, runtime, tier, pids cap).
func (b *dockerBackend) sandboxLabels(p createPlan, expires time.Time) map[string]string {
	labels := map[string]string{}
	for k, v := range p.labels {
		labels[k] = v
	}
	for k, v := range b.owner.Labels() {
		labels[k] = v
	}
	labels[labelExpires] = expires.UTC().Format(time.RFC3339)
	labels[labelLifetime] = strconv.FormatInt(int64(math.Ceil(p.lifetime.Seconds())), 10)
	labels[labelRuntime] = p.runtime
	labels[labelTier] = string(p.tier)
	labels[labelPidsCap] = strconv.FormatInt(p.caps.Pids, 10)
	return labels
}

// containerCreate is one sandbox's container create. Its disk strategy and
// network can change on the way: a daemon that refuses a per-container size
// falls back to tmpfs, and an egress network removed by hand is made again.
type containerCreate struct {
	b        *dockerBackend
	p        createPlan
	name     string
	labels   map[string]string
	netMode  string
	strategy string
}

// create creates the container under its name, freeing the name or waiting
// for it where that is safe, and maps a failure to the error the caller gets.
func (c *containerCreate) create(ctx context.Context) (container.CreateResponse, error) {
	b, p, name := c.b, c.p, c.name
	resp, err := c.createAny(ctx)
	for try := 0; err != nil && cerrdefs.IsConflict(err); try++ {
		// The name is taken. By a live sandbox: refused, naming it. By a
		// container that is no sandbox any more (exited, or what reap
		// removes): it is removed and the create tried again. By a create
		// still in flight on the daemon (the name is reserved before the
		// container can be inspected): looked at again shortly.
		herr := b.freeName(ctx, name, p)
		if herr != nil && !errors.Is(herr, errNameInFlight) {
			return resp, herr
		}
		if try == 8 {
			return resp, busyError(p, "", nil, time.Time{}, backends.Verdict{})
		}
		if herr != nil {
			select {
			case <-ctx.Done():
				return resp, ctx.Err()
			case <-time.After(time.Duration(10<<min(try, 5)) * time.Millisecond):
			}
		}
		resp, err = c.createAny(ctx)
	}
	var me *model.Error
	if errors.As(err, &me) {
		return resp, err
	}
	if err != nil {
		if ctx.Err() != nil {
			// The daemon may still finish a create the client gave up on.
			b.discard(ctx, "", name)
		}
		return resp, createError(err, p)
	}
	return resp, nil
}

// createAny creates with the disk strategy, falling back from storage-opt to
// tmpfs on a daemon that refuses a per-container size.
func (c *containerCreate) createAny(ctx context.Context) (container.CreateResponse, error) {
	resp, err := c.createWith(ctx, c.strategy)
	if err != nil && c.strategy != DiskTmpfs && isStorageOptRefusal(err) {
		if c.strategy == DiskStorageOpt {
			return resp, &model.Error{Class: model.ErrConfiguration, Attribute: "backend",
				Message: "the Docker daemon refuses a per-container disk size (--storage-opt size), so disk_strategy=storage-opt cannot be enforced",
				Fix:     "use disk_strategy=auto or tmpfs, or run the daemon on overlay2 over xfs mounted with pquota", Err: err}
		}
		c.b.setStorageOpt(false, err.Error())
		c.strategy = DiskTmpfs
		resp, err = c.createWith(ctx, c.strategy)
	} else if err == nil && c.strategy == DiskAuto {
		c.b.setStorageOpt(true, "")
		c.strategy = DiskStorageOpt
	}
	return resp, err
}

// createWith makes one ContainerCreate call with a disk strategy.
func (c *containerCreate) createWith(ctx context.Context, strategy string) (container.CreateResponse, error) {
	b, p := c.b, c.p
	if strategy == DiskAuto || strategy == DiskStorageOpt {
		c.labels[labelDiskCap] = diskDescription(DiskStorageOpt, p.tier, p.caps.DiskMB)
	} else {
		c.labels[labelDiskCap] = diskDescription(DiskTmpfs, p.tier, p.caps.DiskMB)
	}
	cfg, hc := containerConfig(p, strategy, c.netMode, c.labels)
	release, err := daemonSlot(ctx, b.writes)
	if err != nil {
		return container.CreateResponse{}, fmt.Errorf("container create: %w", err)
	}
	defer release()
	resp, err := b.cli.ContainerCreate(ctx, cfg, hc, nil, nil, c.name)
	if err != nil && c.netMode != "none" && cerrdefs.IsNotFound(err) && strings.Contains(err.Error(), "network") {
		// The egress network was removed by hand since it was looked
		// up: make it again, once.
		b.forgetEgressNetwork()
		if c.netMode, err = b.egressNetwork(ctx); err != nil {
			return container.CreateResponse{}, err
		}
		cfg, hc = containerConfig(p, strategy, c.netMode, c.labels)
		resp, err = b.cli.ContainerCreate(ctx, cfg, hc, nil, nil, c.name)
	}
	return resp, err
}

// startContainer starts the created container and returns what is known of its
// image. The first sandbox of an image also shows whether the image can hold
// a sandbox open; a container that cannot is discarded.
func (b *dockerBackend) startContainer(ctx context.Context, id, name string, p createPlan) (imageFacts, error) {
	b.mu.Lock()
	facts, known := b.images[p.spec.Image]
	b.mu.Unlock()
	if !known {
		_, err := b.cli.ContainerStatPath(ctx, id, "/bin/sh")
		facts.shell = err == nil
	}

	if err := b.start(ctx, id); err != nil {
		b.discard(ctx, id, name)
		return facts, fmt.Errorf("container start: %w", err)
	}
	if !known {
		if err := b.holdsOpen(ctx, id, name, p); err != nil {
			return facts, err
		}
		b.mu.Lock()
		b.images[p.spec.Image] = facts
		b.mu.Unlock()
	}
	return facts, nil
}

// holdsOpen checks, on the first sandbox of an image, that the container is
// still running. Its PID 1 is sandboxio's static init, which needs nothing
// of the image, so a container that ended at once says the init could not
// run there (a root filesystem that cannot take its mount point, a mount
// the daemon could not make). A container that is not running is
// discarded.
func (b *dockerBackend) holdsOpen(ctx context.Context, id, name string, p createPlan) error {
	select {
	case <-ctx.Done():
	case <-time.After(50 * time.Millisecond):
	}
	ins, err := b.cli.ContainerInspect(ctx, id)
	if err == nil && ins.State.Running {
		return nil
	}
	b.discard(ctx, id, name)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	// Only a container that ended by itself for want of its command
	// (126 not executable, 127 not found, or gone already under
	// AutoRemove) says something about the image. One stopped from
	// outside (a daemon shutting down) or a daemon that does not
	// answer is a failure of the backend, not of the configuration.
	if err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("container inspect: %w", err)
	}
	if err != nil {
		// Gone already (AutoRemove): its die event says how it ended. A
		// daemon shutting down removes what it stops, so "gone" alone
		// says nothing about the image.
		code, ok := exitCode(context.WithoutCancel(ctx), b.cli, id, time.Now().Add(-2*time.Minute)) // ids are unique: a wide window costs nothing
		if !ok {
			return fmt.Errorf("the container ended right after it started and the daemon's event log does not say how; the daemon may be shutting down")
		}
		if code != 126 && code != 127 {
			return fmt.Errorf("the container stopped right after it started (exit code %d); the daemon may be shutting down", code)
		}
	}
	if err == nil && ins.State != nil && ins.State.ExitCode != 126 && ins.State.ExitCode != 127 {
		return fmt.Errorf("the container stopped right after it started (status %s, exit code %d%s); the daemon may be shutting down",
			ins.State.Status, ins.State.ExitCode, prefixed(": ", ins.State.Error))
	}
	return &model.Error{Class: model.ErrConfiguration, Attribute: "image",
		Message: fmt.Sprintf("image %s cannot hold a sandbox open: its container ended at once, so sandboxio's init (%s, which keeps the lifetime) could not run in it", p.spec.Image, initTarget),
		Fix:     fmt.Sprintf("use an image with an ordinary root filesystem; sandboxio mounts its own static binary at %s, so the image needs no init or sleep of its own (/bin/sh only for the exec wrapper and Upload)", initTarget)}
}

func prefixed(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}

// createError turns a daemon refusal of the container into an error class
// where the cause is the configuration.
func createError(err error, p createPlan) error {
	msg := err.Error()
	switch {
	case cerrdefs.IsNotFound(err) || strings.Contains(msg, "No such image"):
		return &model.Error{Class: model.ErrConfiguration, Attribute: "image",
			Message: fmt.Sprintf("image %s is not on the Docker daemon", p.spec.Image),
			Fix: "prepare the image on the daemon host first (docker pull, docker load or docker import; `sandboxio image prepare` or sandbox/docker.PrepareImage builds the local image " + LocalImage + "); " +
				"the pull runs on the host daemon, outside any sandbox, so the sandbox's egress policy does not govern it"}
	case strings.Contains(msg, "Range of CPUs") || strings.Contains(msg, "NanoCPUs"):
		return &model.Error{Class: model.ErrConfiguration, Attribute: "resources.cpu",
			Message: "the daemon refuses the CPU cap: " + msg, Fix: "set cpu to at most the daemon's CPU count"}
	case strings.Contains(msg, "Minimum memory limit"):
		return &model.Error{Class: model.ErrConfiguration, Attribute: "resources.memory_mb",
			Message: "the daemon refuses the memory cap: " + msg, Fix: "set memory_mb to at least 6"}
	case strings.Contains(msg, "runtime"):
		return &model.Error{Class: model.ErrConfiguration, Attribute: "runtime",
			Message: "the daemon refuses the runtime: " + msg, Fix: "choose a runtime registered on the daemon"}
	}
	return fmt.Errorf("container create: %w", err)
}

// discard removes a container that failed half-way through create, in a scope
// that survives the caller's cancellation and is bounded by the grace.
func (b *dockerBackend) discard(ctx context.Context, id, name string) {
	// Remove now, even when the caller was cancelled: a process that exits
	// right after a cancelled create (Ctrl-C in the CLI) would otherwise
	// never run the background retries.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.cfg.teardownGrace)
	defer cancel()
	var err error
	if id != "" {
		err = b.removeContainer(rctx, id)
	} else {
		err = b.removeOwn(rctx, name)
	}
	if err != nil || ctx.Err() != nil {
		// A create the client abandoned may still complete on the daemon
		// after this removal.
		b.removeLater(name)
	}
}

// removeLater removes this process's container of a name in the background,
// a few times (never another process's: see removeOwn):
// a create the client abandoned may still complete on the daemon after the
// first attempt. What escapes this is bounded by the lifetime label and the
// watcher.
func (b *dockerBackend) removeLater(name string) {
	go func() {
		for _, wait := range []time.Duration{0, time.Second, 3 * time.Second} {
			time.Sleep(wait)
			ctx, cancel := context.WithTimeout(context.Background(), model.TeardownGrace)
			_ = b.removeOwn(ctx, name)
			cancel()
		}
	}()
}

// stopContainer kills a container and returns once the daemon reports it
// stopped or gone: from then on no process of the sandbox runs. The daemon
// says so in two ways: its "die" event, which it emits after it has
// recorded the container stopped, and its state (inspect). On a busy daemon
// both the kill call and inspect can be held up long after the container
// died (inspect waits for the container's lock while the daemon's
// AutoRemove holds it), so the event is taken as soon as it arrives. A
// container already stopped or gone is success.
func (b *dockerBackend) stopContainer(ctx context.Context, id string) error {
	var died <-chan struct{}
	if b.events != nil {
		died = b.events.died(id)
	}
	kill := make(chan error, 1)
	go func() { kill <- b.cli.ContainerKill(ctx, id, "KILL") }()
	select {
	case <-died:
		return nil
	case err := <-kill:
		switch {
		case err == nil, cerrdefs.IsNotFound(err), isContainerGone(err), cerrdefs.IsConflict(err):
			// Killed, gone, or not running (a conflict): the state says.
		default:
			return fmt.Errorf("container kill: %w", err)
		}
	case <-ctx.Done():
		return fmt.Errorf("container kill not confirmed: %w", ctx.Err())
	}
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		ins, err := b.inspectOrDied(ctx, id, died)
		switch {
		case errors.Is(err, errDied), cerrdefs.IsNotFound(err):
			return nil
		case err == nil && ins.State != nil && !ins.State.Running && !ins.State.Paused && !ins.State.Restarting:
			return nil
		}
		select {
		case <-died:
			return nil
		case <-ctx.Done():
			if err == nil {
				err = errors.New("still running")
			}
			return fmt.Errorf("container kill not confirmed: %w (%w)", ctx.Err(), err)
		case <-time.After(wait):
		}
	}
}

// maxDaemonWrites bounds the creates, starts and removals in flight per
// backend: dockerd 20.10 stopped answering when 50 tenants opened and closed
// at once. The rest wait here, bounded by their context. Kills are not
// bounded, so that a close's grace is not spent waiting for a slot.
const maxDaemonWrites = 6

// daemonSlot takes a slot of pool, or fails when ctx ends first.
func daemonSlot(ctx context.Context, pool chan struct{}) (release func(), err error) {
	if pool == nil { // a backend built without New (tests)
		return func() {}, nil
	}
	select {
	case pool <- struct{}{}:
		return func() { <-pool }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the daemon: %w", ctx.Err())
	}
}

// start starts a container within a write slot.
func (b *dockerBackend) start(ctx context.Context, id string) error {
	release, err := daemonSlot(ctx, b.writes)
	if err != nil {
		return err
	}
	defer release()
	return b.cli.ContainerStart(ctx, id, container.StartOptions{})
}

// errDied is inspectOrDied's answer when the die event came first.
var errDied = errors.New("the daemon reported the container dead")

// inspectOrDied inspects a container, unless its die event arrives first.
func (b *dockerBackend) inspectOrDied(ctx context.Context, id string, died <-chan struct{}) (container.InspectResponse, error) {
	type answer struct {
		ins container.InspectResponse
		err error
	}
	ictx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan answer, 1)
	go func() {
		ins, err := b.cli.ContainerInspect(ictx, id)
		ch <- answer{ins, err}
	}()
	select {
	case a := <-ch:
		return a.ins, a.err
	case <-died:
		return container.InspectResponse{}, errDied
	}
}

// removeStopped finishes, in the background, the removal of a container
// already confirmed stopped, for as long as the lifetime of this process
// allows; the daemon's AutoRemove removes it as well, and the watcher and
// `sandboxio reap` catch what both miss.
func (b *dockerBackend) removeStopped(id string) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = b.removeContainer(ctx, id)
	}()
}

// removeContainer force-removes a container and returns once it is gone. A
// container that is already gone is success: removal is idempotent.
func (b *dockerBackend) removeContainer(ctx context.Context, id string) error {
	release, err := daemonSlot(ctx, b.writes)
	if err != nil {
		return fmt.Errorf("container remove: %w", err)
	}
	err = b.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true})
	release()
	if err == nil || cerrdefs.IsNotFound(err) {
		return nil
	}
	if !cerrdefs.IsConflict(err) && !strings.Contains(err.Error(), "in progress") {
		return fmt.Errorf("container remove: %w", err)
	}
	// AutoRemove (or another caller) is already removing it: wait for that.
	for {
		if _, err := b.cli.ContainerInspect(ctx, id); cerrdefs.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("container remove: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// List returns the sandboxio containers carrying every one of the labels.
func (b *dockerBackend) List(ctx context.Context, labels map[string]string) ([]backends.Info, error) {
	cs, err := b.list(ctx, labels)
	if err != nil {
		return nil, err
	}
	out := make([]backends.Info, 0, len(cs))
	for _, c := range cs {
		out = append(out, infoFromSummary(c))
	}
	return out, nil
}

// list lists the sandboxio containers carrying every one of the labels. A
// list by tenant also finds the warm sandboxes claimed for the tenant, which
// carry it in their name (see pool.go).
func (b *dockerBackend) list(ctx context.Context, labels map[string]string) ([]container.Summary, error) {
	cs, err := b.listLabelled(ctx, labels, "")
	if _, byTenant := labels[model.LabelTenantID]; err != nil || !byTenant {
		return cs, err
	}
	claimed, err := b.listClaimed(ctx, labels)
	return append(cs, claimed...), err
}

// listLabelled lists by labels and, when name is set, by name (a substring
// match on the daemon's side).
func (b *dockerBackend) listLabelled(ctx context.Context, labels map[string]string, name string) ([]container.Summary, error) {
	f := filters.NewArgs(filters.Arg("label", model.LabelManaged+"=true"))
	for k, v := range labels {
		f.Add("label", k+"="+v)
	}
	if name != "" {
		f.Add("name", name)
	}
	cs, err := b.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("container list: %w", err)
	}
	return cs, nil
}

func infoFromSummary(c container.Summary) backends.Info {
	in := backends.Info{
		ID:      c.ID,
		Backend: Name,
		Tier:    model.Tier(c.Labels[labelTier]),
		Labels:  c.Labels,
		Created: time.Unix(c.Created, 0),
		Running: c.State == container.StateRunning,
	}
	if t, err := time.Parse(time.RFC3339, c.Labels[labelExpires]); err == nil {
		in.Expires = t
	}
	if pids, err := strconv.ParseInt(c.Labels[labelPidsCap], 10, 64); err == nil {
		in.PidsCapStrategy = pidsDescription(in.Tier, pids)
	}
	in.DiskCapStrategy = c.Labels[labelDiskCap]
	if claimedByName(c) && in.Labels[labelBinding] == "" {
		// A claimed warm sandbox listed without its tenant: its binding
		// is its name, which only a list by tenant can read.
		in.Labels = maps.Clone(c.Labels)
		in.Labels[labelBinding] = bindingName
	}
	return in
}

// Preflight checks a spec against the daemon without creating a sandbox: the
// runtime is registered and consistent with its tier, the image is present
// (its ID and digests are returned), and which disk-cap strategy applies.
func (b *dockerBackend) Preflight(ctx context.Context, spec model.Spec) (backends.Preflight, error) {
	p, err := validate(backends.CreateRequest{Spec: spec}, false)
	if err != nil {
		return backends.Preflight{}, err
	}
	d, err := b.daemon(ctx)
	if err != nil {
		return backends.Preflight{}, err
	}
	if err := checkRuntime(d, p); err != nil {
		return backends.Preflight{}, err
	}
	img, err := b.cli.ImageInspect(ctx, spec.Image)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return backends.Preflight{}, createError(err, p)
		}
		return backends.Preflight{}, fmt.Errorf("image inspect: %w", err)
	}
	if p.forward {
		if err := b.gatewayProven(ctx, spec, d); err != nil {
			return backends.Preflight{}, err
		}
		if err := b.checkGatewayEntries(ctx, p); err != nil {
			return backends.Preflight{}, err
		}
	}
	strategy := b.diskStrategy(p)
	if strategy == DiskAuto || strategy == DiskStorageOpt {
		ok, msg, err := b.probeStorageOpt(ctx, spec.Image)
		if err != nil {
			return backends.Preflight{}, err
		}
		switch {
		case ok:
			strategy = DiskStorageOpt
		case strategy == DiskStorageOpt:
			return backends.Preflight{}, &model.Error{Class: model.ErrConfiguration, Attribute: "backend",
				Message: "the Docker daemon refuses a per-container disk size (--storage-opt size): " + msg,
				Fix:     "use disk_strategy=auto or tmpfs, or run the daemon on overlay2 over xfs mounted with pquota"}
		default:
			strategy = DiskTmpfs
		}
	}
	return backends.Preflight{
		Tier:            p.tier,
		Image:           spec.Image,
		ImageID:         img.ID,
		ImageDigests:    img.RepoDigests,
		DiskCapStrategy: diskDescription(strategy, p.tier, p.caps.DiskMB),
		PidsCapStrategy: pidsDescription(p.tier, p.caps.Pids),
	}, nil
}

// probeStorageOpt asks the daemon whether it takes a per-container size by
// creating (never starting) a labelled container with one, then removing it.
func (b *dockerBackend) probeStorageOpt(ctx context.Context, image string) (bool, string, error) {
	b.mu.Lock()
	known, msg := b.storageOpt, b.storageMsg
	b.mu.Unlock()
	if known != 0 {
		return known > 0, msg, nil
	}
	labels := map[string]string{model.LabelManaged: "true", labelProbe: "storage-opt",
		labelExpires: time.Now().Add(time.Minute).UTC().Format(time.RFC3339)}
	for k, v := range b.owner.Labels() {
		labels[k] = v
	}
	setMark(labels)
	resp, err := b.cli.ContainerCreate(ctx,
		&container.Config{Image: image, Entrypoint: []string{"true"}, Labels: labels},
		&container.HostConfig{NetworkMode: "none", StorageOpt: map[string]string{"size": "64M"}},
		nil, nil, "sandboxio-probe-"+randomHex(6))
	if err != nil {
		if isStorageOptRefusal(err) {
			b.setStorageOpt(false, err.Error())
			return false, err.Error(), nil
		}
		return false, "", fmt.Errorf("storage-opt probe: %w", err)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.cfg.teardownGrace)
	defer cancel()
	if err := b.removeContainer(rctx, resp.ID); err != nil {
		return false, "", err
	}
	b.setStorageOpt(true, "")
	return true, "", nil
}
