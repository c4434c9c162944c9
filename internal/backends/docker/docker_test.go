package docker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/network"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Every claim below is shown from inside the sandbox where the sandbox can
// see it. Tests that measure time or fill the machine (fork bombs, memory
// hogs, timeouts) run one at a time; the rest run in parallel.

var runtimes = []string{"runc", "runsc"}

func TestDenyEgressLeavesOnlyLoopback(t *testing.T) {
	for _, rt := range runtimes {
		t.Run(rt, func(t *testing.T) {
			needRuntime(t, rt)
			t.Parallel()
			sb := open(t, newTestBackend(t), testSpec(t, withRuntime(rt)))
			// Under runc the egress observer's device holds the default
			// routes; it reaches nothing (egress_test.go).
			want := "egress0 lo"
			if rt == "runsc" {
				want = "lo"
			}
			if got := strings.Join(strings.Fields(sh(t, sb, "ls /sys/class/net")), " "); got != want {
				t.Fatalf("interfaces under egress=deny: %q, want %q", got, want)
			}
		})
	}
}

func TestOpenEgressOnlyWhenAskedFor(t *testing.T) {
	needDocker(t)
	t.Parallel()
	b := newTestBackend(t)
	var warned []model.Warning
	var mu sync.Mutex
	spec := testSpec(t, func(s *model.Spec) { s.Network = model.NetworkPolicy{Egress: model.EgressAllow} })
	sbi, err := b.Create(t.Context(), backends.CreateRequest{Spec: spec, OnWarning: func(w model.Warning) {
		mu.Lock()
		warned = append(warned, w)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	sb := sbi.(*sandbox)
	t.Cleanup(func() { _ = sb.Close(context.WithoutCancel(t.Context())) })
	if got := sh(t, sb, "ls /sys/class/net"); !strings.Contains(got, "eth0") {
		t.Fatalf("interfaces under egress=allow: %q, want eth0", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(warned) != 1 || warned[0].Class != model.OpenEgressWarning {
		t.Fatalf("want one OpenEgressWarning, got %v", warned)
	}

	// gVisor registered with --network=none can have no network: refused,
	// not silently degraded, and nothing is created.
	if dockerProbe.runtime["runsc"] {
		_, err := b.Create(t.Context(), backends.CreateRequest{Spec: testSpec(t, withRuntime("runsc"), func(s *model.Spec) {
			s.Network = model.NetworkPolicy{Egress: model.EgressAllow}
			s.Labels["case"] = "runsc-allow"
		})})
		wantClass(t, err, model.ErrCapabilityNotSupported, "")
		waitGone(t, b, map[string]string{"case": "runsc-allow"}, 0)
	}
}

// Two tenants' open-egress sandboxes each reach out of the host, but never
// each other: on Docker's default bridge they could (measured: a connection
// from one to a listener in the other succeeds there).
func TestOpenEgressSandboxesCannotReachEachOther(t *testing.T) {
	needDocker(t)
	t.Parallel()
	b := newTestBackend(t)
	open := func(tenant string) *sandbox {
		return open(t, b, testSpec(t, func(s *model.Spec) {
			s.Network = model.NetworkPolicy{Egress: model.EgressAllow}
			s.TenantID = tenant
		}))
	}
	a, other := open("acme"), open("globex")
	ctx := t.Context()

	// The network both joined keeps its containers apart.
	n, err := b.cli.NetworkInspect(ctx, EgressNetwork, network.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Options[optionICC] != "false" || n.Labels[model.LabelManaged] != "true" {
		t.Fatalf("network %s: options %v labels %v", EgressNetwork, n.Options, n.Labels)
	}
	addr := map[*sandbox]string{}
	for _, sb := range []*sandbox{a, other} {
		ins, err := b.cli.ContainerInspect(ctx, sb.id)
		if err != nil {
			t.Fatal(err)
		}
		ep := ins.NetworkSettings.Networks[EgressNetwork]
		if ep == nil || ep.IPAddress == "" || len(ins.NetworkSettings.Networks) != 1 {
			t.Fatalf("sandbox networks: %v, want only %s", ins.NetworkSettings.Networks, EgressNetwork)
		}
		addr[sb] = ep.IPAddress
	}
	if len(n.IPAM.Config) == 0 || n.IPAM.Config[0].Gateway == "" {
		t.Fatalf("network %s has no gateway: %+v", EgressNetwork, n.IPAM)
	}
	gateway := n.IPAM.Config[0].Gateway

	// A listener on the host, at the network's gateway: reachable, so egress
	// is really open.
	host, err := net.Listen("tcp", net.JoinHostPort(gateway, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	go func() {
		for {
			c, err := host.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("from-host\n"))
			_ = c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(host.Addr().String())

	// A listener in tenant acme's sandbox, shown to answer from inside it.
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		_, _ = a.Run(lctx, []string{"sh", "-c", "while :; do nc -l -p 8080 -e echo from-acme; done"}, backends.RunOptions{Timeout: 50 * time.Second})
	}()
	if got := sh(t, a, "for i in $(seq 50); do nc -w 1 127.0.0.1 8080 </dev/null && exit 0; sleep 0.1; done; exit 1"); got != "from-acme" {
		t.Fatalf("listener in acme's sandbox: %q", got)
	}

	if got := sh(t, other, fmt.Sprintf("nc -w 3 %s %s </dev/null", gateway, port)); got != "from-host" {
		t.Fatalf("globex's sandbox to the host: %q, want from-host", got)
	}
	res, err := other.Run(ctx, []string{"sh", "-c", fmt.Sprintf("nc -w 3 %s 8080 </dev/null", addr[a])}, backends.RunOptions{Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 || strings.Contains(string(res.Stdout), "from-acme") {
		t.Fatalf("globex's sandbox reached acme's at %s: exit %d, %q", addr[a], res.ExitCode, res.Stdout)
	}
}

func TestHardeningVisibleInside(t *testing.T) {
	for _, rt := range runtimes {
		t.Run(rt, func(t *testing.T) {
			needRuntime(t, rt)
			t.Parallel()
			sb := open(t, newTestBackend(t), testSpec(t, withRuntime(rt)))
			status := sh(t, sb, "cat /proc/self/status")
			if !strings.Contains(status, "CapEff:\t0000000000000000") {
				t.Errorf("effective capabilities not empty:\n%s", status)
			}
			if !strings.Contains(status, "CapBnd:\t0000000000000000") {
				t.Errorf("bounding set not empty:\n%s", status)
			}
			switch {
			case strings.Contains(status, "NoNewPrivs:"):
				if !strings.Contains(status, "NoNewPrivs:\t1") {
					t.Errorf("no_new_privs not set:\n%s", status)
				}
			case rt == "runsc":
				// gVisor's /proc/self/status has no NoNewPrivs line; the
				// flag is still in the OCI spec Docker hands to runsc.
				t.Log("gVisor does not show NoNewPrivs in /proc/self/status")
			default:
				t.Errorf("no NoNewPrivs line:\n%s", status)
			}
		})
	}
}

// readCgroup reads cgroup files from inside, v1 or v2.
func readCgroup(t *testing.T, sb *sandbox, v1, v2 string) string {
	t.Helper()
	return sh(t, sb, fmt.Sprintf("cat %s 2>/dev/null || cat %s", v1, v2))
}

func TestCapsVisibleInside(t *testing.T) {
	t.Run("runc", func(t *testing.T) {
		needRuntime(t, "runc")
		t.Parallel()
		caps := model.Caps{CPU: 0.5, MemoryMB: 96, DiskMB: 64, Pids: 77}
		sb := open(t, newTestBackend(t), testSpec(t, func(s *model.Spec) { s.Resources = caps }))
		mem := strconv.FormatInt(caps.MemoryMB<<20, 10)
		if sh(t, sb, "test -d /sys/fs/cgroup/memory && echo v1 || echo v2") == "v1" {
			if got := readCgroup(t, sb, "/sys/fs/cgroup/pids/pids.max", ""); got != "77" {
				t.Errorf("pids.max %q, want 77", got)
			}
			if got := readCgroup(t, sb, "/sys/fs/cgroup/memory/memory.limit_in_bytes", ""); got != mem {
				t.Errorf("memory.limit_in_bytes %q, want %s", got, mem)
			}
			if got := readCgroup(t, sb, "/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes", ""); got != mem {
				t.Errorf("memory.memsw.limit_in_bytes %q, want %s (memory+swap equal to memory)", got, mem)
			}
			quota := readCgroup(t, sb, "/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "")
			period := readCgroup(t, sb, "/sys/fs/cgroup/cpu/cpu.cfs_period_us", "")
			if q, _ := strconv.Atoi(quota); q == 0 || fmt.Sprint(q*2) != period {
				t.Errorf("cpu quota %s / period %s, want half", quota, period)
			}
		} else {
			if got := readCgroup(t, sb, "", "/sys/fs/cgroup/pids.max"); got != "77" {
				t.Errorf("pids.max %q, want 77", got)
			}
			if got := readCgroup(t, sb, "", "/sys/fs/cgroup/memory.max"); got != mem {
				t.Errorf("memory.max %q, want %s", got, mem)
			}
			// v2 limits swap on its own: memory+swap == memory means no swap.
			if got := readCgroup(t, sb, "", "/sys/fs/cgroup/memory.swap.max"); got != "0" {
				t.Errorf("memory.swap.max %q, want 0", got)
			}
		}
		if !strings.Contains(sb.Info().PidsCapStrategy, "pids.max=77") {
			t.Errorf("pids strategy %q", sb.Info().PidsCapStrategy)
		}
	})
	t.Run("runsc", func(t *testing.T) {
		needRuntime(t, "runsc")
		t.Parallel()
		caps := model.Caps{CPU: 1, MemoryMB: 96, DiskMB: 64, Pids: 77}
		sb := open(t, newTestBackend(t), testSpec(t, withRuntime("runsc"), func(s *model.Spec) { s.Resources = caps }))
		// gVisor shows no cgroup files inside; its kernel reports the
		// memory cap as the machine's memory and enforces RLIMIT_NPROC.
		if got := sh(t, sb, "ulimit -u"); got != "77" {
			t.Errorf("ulimit -u %q, want 77", got)
		}
		if got := sh(t, sb, "ulimit -Hu"); got != "77" {
			t.Errorf("hard ulimit -u %q, want 77", got)
		}
		if got := sh(t, sb, "sed -n 's/^MemTotal: *\\([0-9]*\\) kB/\\1/p' /proc/meminfo"); got != strconv.FormatInt(caps.MemoryMB*1024, 10) {
			t.Errorf("MemTotal %s kB, want %d", got, caps.MemoryMB*1024)
		}
		// The hard limit cannot be raised: CAP_SYS_RESOURCE is dropped.
		res, err := sb.Run(t.Context(), []string{"sh", "-c", "ulimit -Hu 1000"}, backends.RunOptions{})
		if err != nil || res.ExitCode == 0 {
			t.Errorf("raising the hard process limit: exit %d, %v", res.ExitCode, err)
		}
		// The host side, where the test can see it: memory+swap equals memory.
		ins, err := sb.b.cli.ContainerInspect(t.Context(), sb.id)
		if err != nil {
			t.Fatal(err)
		}
		if hc := ins.HostConfig; hc.Memory != caps.MemoryMB<<20 || hc.MemorySwap != hc.Memory || hc.PidsLimit == nil || *hc.PidsLimit != runscPidsBackstop(77) {
			t.Errorf("host config: memory %d swap %d pids %v", hc.Memory, hc.MemorySwap, hc.PidsLimit)
		}
	})
}

func TestRuntimeTiers(t *testing.T) {
	needDocker(t)
	t.Parallel()
	b := newTestBackend(t)
	if dockerProbe.runtime["runsc"] {
		sb := open(t, b, testSpec(t, withRuntime("runsc"), func(s *model.Spec) { s.RequireIsolation = model.TierGVisor }))
		if sb.Info().Tier != model.TierGVisor || sb.Info().Labels[labelTier] != "GVISOR" {
			t.Fatalf("runsc tier %s", sb.Info().Tier)
		}
		// gVisor's own kernel answers, not the host's.
		if out := sh(t, sb, "dmesg 2>/dev/null | head -1; cat /proc/version"); !strings.Contains(out, "gVisor") && !strings.Contains(out, "Starting") {
			t.Logf("kernel banner: %s", out)
		}
	}
	sb := open(t, b, testSpec(t, func(s *model.Spec) { s.RequireIsolation = model.TierContainer }))
	if sb.Info().Tier != model.TierContainer {
		t.Fatalf("runc tier %s", sb.Info().Tier)
	}
	// runc does not satisfy GVISOR: refused before anything is created.
	_, err := b.Create(t.Context(), backends.CreateRequest{Spec: testSpec(t, func(s *model.Spec) {
		s.RequireIsolation = model.TierGVisor
		s.Labels["case"] = "runc-gvisor"
	})})
	wantClass(t, err, model.ErrConfiguration, "")
	// A runtime the daemon does not have: refused before anything is created.
	if !dockerProbe.runtime["kata"] {
		_, err = b.Create(t.Context(), backends.CreateRequest{Spec: testSpec(t, withRuntime("kata"), func(s *model.Spec) {
			s.Labels["case"] = "kata-missing"
		})})
		me := classError(t, err, model.ErrConfiguration, "")
		if me.Attribute != "runtime" || !strings.Contains(me.Message, "not registered") {
			t.Fatalf("kata: %v", err)
		}
	}
	waitGone(t, b, map[string]string{"test": labelSafe(t.Name()), "case": "runc-gvisor"}, 0)
	waitGone(t, b, map[string]string{"test": labelSafe(t.Name()), "case": "kata-missing"}, 0)
}

func TestLabels(t *testing.T) {
	needDocker(t)
	t.Parallel()
	b := newTestBackend(t)
	spec := testSpec(t, func(s *model.Spec) {
		s.Labels["team"] = "agents"
		s.Labels[model.LabelTenantID] = "acme" // a rendered spec repeats it: accepted when equal
	})
	sb := open(t, b, spec)
	ins, err := b.cli.ContainerInspect(t.Context(), sb.id)
	if err != nil {
		t.Fatal(err)
	}
	l := ins.Config.Labels
	for k, want := range map[string]string{
		model.LabelManaged: "true", model.LabelTenantID: "acme", model.LabelSessionID: spec.SessionID, model.LabelTemplate: "test",
		"team": "agents", labelOwner: processOwner().ID, labelOwnerPID: strconv.Itoa(processOwner().PID),
	} {
		if l[k] != want {
			t.Errorf("label %s = %q, want %q", k, l[k], want)
		}
	}
	exp, err := time.Parse(time.RFC3339, l[labelExpires])
	if err != nil || exp.Sub(sb.created) < 179*time.Second || exp.Sub(sb.created) > 181*time.Second {
		t.Errorf("expiry label %q", l[labelExpires])
	}
	got, err := b.List(t.Context(), map[string]string{model.LabelTenantID: "acme", "team": "agents", "test": labelSafe(t.Name())})
	if err != nil || len(got) != 1 || got[0].ID != sb.id || got[0].Tier != model.TierContainer {
		t.Fatalf("list by labels: %v %v", got, err)
	}
}

func TestUploadRunCodeAndSecrets(t *testing.T) {
	needDocker(t)
	t.Parallel()
	b := newTestBackend(t)
	const secret = "s3cr3t-value-never-in-inspect"
	spec := testSpec(t, func(s *model.Spec) {
		s.Env = map[string]string{"LANG": "C.UTF-8"}
		s.SecretNames = []string{"API_TOKEN"}
	})
	sbi, err := b.Create(t.Context(), backends.CreateRequest{Spec: spec, Secrets: map[string]string{"API_TOKEN": secret}})
	if err != nil {
		t.Fatal(err)
	}
	sb := sbi.(*sandbox)
	t.Cleanup(func() { _ = sb.Close(context.WithoutCancel(t.Context())) })

	if err := sb.Upload(t.Context(), "/work/dir/data.txt", []byte("hello\x00world\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, sb, "od -c /work/dir/data.txt | head -1; stat -c %a /work/dir/data.txt"); !strings.Contains(got, `h   e   l   l   o  \0   w`) || !strings.HasSuffix(got, "640") {
		t.Fatalf("uploaded file: %s", got)
	}
	res, err := sb.RunCode(t.Context(), "sh", "echo code:$LANG:${API_TOKEN:+set}; exit 3", backends.RunOptions{})
	if err != nil || res.ExitCode != 3 || strings.TrimSpace(string(res.Stdout)) != "code:C.UTF-8:set" {
		t.Fatalf("run code: %+v %v", res, err)
	}
	res, err = sb.RunCode(t.Context(), "sh", "read l; echo got:$l", backends.RunOptions{Stdin: []byte("input\n")})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "got:input" {
		t.Fatalf("run code with stdin: %q %v", res.Stdout, err)
	}
	// The secret reaches commands but not the container's configuration.
	ins, err := b.cli.ContainerInspect(t.Context(), sb.id)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(fmt.Sprint(ins.Config.Env, ins.Config.Labels, ins.Args), secret) {
		t.Fatal("secret value in the container's configuration")
	}
	if s := fmt.Sprintf("%v %+v %#v", sb, sb, sb); strings.Contains(s, secret) {
		t.Fatal("secret value in the sandbox's formatted form")
	}
	if _, err := sb.RunCode(t.Context(), "cobol", "", backends.RunOptions{}); !errors.Is(err, model.ErrConfiguration) {
		t.Fatalf("unknown language: %v", err)
	}
}

func TestPreflight(t *testing.T) {
	needDocker(t)
	t.Parallel()
	b := newTestBackend(t)
	pf, err := b.Preflight(t.Context(), testSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(pf.ImageID, "sha256:") || pf.Tier != model.TierContainer || pf.DiskCapStrategy == "" {
		t.Fatalf("preflight: %+v", pf)
	}
	t.Logf("disk-cap strategy on this daemon: %s", pf.DiskCapStrategy)
	_, err = b.Preflight(t.Context(), testSpec(t, func(s *model.Spec) { s.Image = "sandboxio/not-there:never" }))
	me := classError(t, err, model.ErrConfiguration, "")
	if me.Attribute != "image" || !strings.Contains(me.Fix, "egress policy") {
		t.Fatalf("missing image: %v", err)
	}
	_, err = b.Create(t.Context(), backends.CreateRequest{Spec: testSpec(t, func(s *model.Spec) { s.Image = "sandboxio/not-there:never" })})
	wantClass(t, err, model.ErrConfiguration, "")
}

func TestDiskCap(t *testing.T) {
	for _, rt := range runtimes {
		t.Run(rt, func(t *testing.T) {
			needRuntime(t, rt)
			t.Parallel()
			sb := open(t, newTestBackend(t), testSpec(t, withRuntime(rt), func(s *model.Spec) { s.Resources.DiskMB = 16 }))
			strategy := sb.Info().DiskCapStrategy
			t.Logf("strategy: %s", strategy)
			// Within the cap: fine.
			sh(t, sb, "dd if=/dev/zero of=/tmp/small bs=1M count=4 2>/dev/null")
			// Past the cap: the write fails, reported as the disk limit.
			_, err := sb.Run(t.Context(), []string{"dd", "if=/dev/zero", "of=/tmp/big", "bs=1M", "count=32"}, backends.RunOptions{})
			wantClass(t, err, model.ErrResourceLimitExceeded, model.LimitDisk)
			if strings.HasPrefix(strategy, "tmpfs") {
				// The sum of every writable place is the cap: no writable
				// root filesystem to spill into.
				res, err := sb.Run(t.Context(), []string{"sh", "-c", "echo x > /escape"}, backends.RunOptions{})
				if err != nil || res.ExitCode == 0 || !strings.Contains(string(res.Stderr), "Read-only file system") {
					t.Fatalf("writing to the root filesystem: %+v %v", res, err)
				}
				total := sh(t, sb, "df -k /tmp /work /var/tmp /root /home /dev/shm | awk 'NR>1 {s+=$2} END {print s}'")
				if total != "16384" {
					t.Fatalf("writable space %s KiB, want 16384", total)
				}
			}
			// The sandbox is still usable after the failed write.
			sh(t, sb, "rm /tmp/big; true")
		})
	}
}

func TestKillIsIdempotent(t *testing.T) {
	needDocker(t)
	t.Parallel()
	b := newTestBackend(t)
	sbi, err := b.Create(t.Context(), backends.CreateRequest{Spec: testSpec(t)})
	if err != nil {
		t.Fatal(err)
	}
	sb := sbi.(*sandbox)
	for i := range 2 {
		if err := sb.Kill(t.Context()); err != nil {
			t.Fatalf("kill %d: %v", i+1, err)
		}
	}
	if err := sb.Close(t.Context()); err != nil {
		t.Fatalf("close after kill: %v", err)
	}
	if _, err := b.cli.ContainerInspect(t.Context(), sb.id); !cerrdefs.IsNotFound(err) {
		t.Fatalf("container after kill: %v", err)
	}
	_, err = sb.Run(t.Context(), []string{"true"}, backends.RunOptions{})
	wantClass(t, err, model.ErrSandboxGone, "")
}

func TestCloseIsShieldedFromCancellation(t *testing.T) {
	needDocker(t)
	t.Parallel()
	b := newTestBackend(t)
	sbi, err := b.Create(t.Context(), backends.CreateRequest{Spec: testSpec(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := sbi.Close(ctx); err != nil {
		t.Fatalf("close with a cancelled context: %v", err)
	}
	waitGone(t, b, map[string]string{"test": labelSafe(t.Name())}, 0)
}

func TestCloseGraceExpiryWarnsOrphan(t *testing.T) {
	needDocker(t)
	t.Parallel()
	b := newTestBackend(t)
	var got []model.Warning
	spec := testSpec(t)
	sbi, err := b.Create(t.Context(), backends.CreateRequest{Spec: spec, OnWarning: func(w model.Warning) { got = append(got, w) }})
	if err != nil {
		t.Fatal(err)
	}
	sb := sbi.(*sandbox)
	t.Cleanup(func() { _ = sb.Kill(context.WithoutCancel(t.Context())) })
	b.cfg.teardownGrace = time.Nanosecond // no daemon answers that fast
	err = sb.Close(t.Context())
	var oe *backends.OrphanedError
	if !errors.As(err, &oe) {
		t.Fatalf("want *OrphanedError, got %v", err)
	}
	if len(got) != 1 || got[0].Class != model.OrphanedSandboxWarning || got[0].SandboxID != sb.id ||
		got[0].Labels[model.LabelTenantID] != "acme" || got[0].Labels[model.LabelSessionID] != spec.SessionID {
		t.Fatalf("warning: %+v", got)
	}
	if oe.Warning.SandboxID != sb.id {
		t.Fatalf("error's warning: %+v", oe.Warning)
	}
	b.cfg.teardownGrace = model.TeardownGrace
}

func TestDaemonRefusalsAreConfigurationErrors(t *testing.T) {
	needDocker(t)
	t.Parallel()
	b := newTestBackend(t)
	for _, tc := range []struct {
		name string
		caps func(*model.Caps)
		attr string
	}{
		{"more CPUs than the daemon has", func(c *model.Caps) { c.CPU = 4096 }, "resources.cpu"},
		{"memory below the daemon's minimum", func(c *model.Caps) { c.MemoryMB = 1 }, "resources.memory_mb"},
	} {
		_, err := b.Create(t.Context(), backends.CreateRequest{Spec: testSpec(t, func(s *model.Spec) { tc.caps(&s.Resources) })})
		if me := classError(t, err, model.ErrConfiguration, ""); me.Attribute != tc.attr {
			t.Errorf("%s: attribute %q: %v", tc.name, me.Attribute, err)
		}
	}
	waitGone(t, b, map[string]string{"test": labelSafe(t.Name())}, 0)
}
