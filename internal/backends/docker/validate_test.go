package docker

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// unreachableBackend talks to a socket that does not exist: any API call
// fails with a connection error, so a refusal of the right class proves the
// request was refused before the first API call.
func unreachableBackend(t *testing.T) *dockerBackend {
	cli, err := client.NewClientWithOpts(client.WithHost("unix:///nonexistent/sandboxio-test.sock"), client.WithVersion("1.41"))
	if err != nil {
		t.Fatal(err)
	}
	b := &dockerBackend{cli: cli, cfg: config{diskStrategy: DiskAuto, teardownGrace: model.TeardownGrace}, owner: processOwner(), images: map[string]imageFacts{}}
	b.events = newEventWatch(cli)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func TestRefusedBeforeAnyAPICall(t *testing.T) {
	b := unreachableBackend(t)
	cases := []struct {
		name  string
		mod   func(*model.Spec)
		req   func(*backends.CreateRequest)
		class model.ErrorClass
		attr  string
	}{
		{"allow list on docker", func(s *model.Spec) { s.Network.Allow = []string{"151.101.0.0/16"} }, nil, model.ErrCapabilityNotSupported, "network.allow"},
		{"allow list with open egress", func(s *model.Spec) { s.Network = model.NetworkPolicy{Egress: "allow", Allow: []string{"10.0.0.0/8"}} }, nil, model.ErrCapabilityNotSupported, "network.allow"},
		{"learn mode on runsc", func(s *model.Spec) { s.Network.Egress, s.Runtime = model.EgressLearn, "runsc" }, nil, model.ErrCapabilityNotSupported, "network.egress"},
		{"unknown egress", func(s *model.Spec) { s.Network.Egress = "block" }, nil, model.ErrConfiguration, "network.egress"},
		{"zero memory", func(s *model.Spec) { s.Resources.MemoryMB = 0 }, nil, model.ErrConfiguration, "resources.memory_mb"},
		{"negative pids", func(s *model.Spec) { s.Resources.Pids = -1 }, nil, model.ErrConfiguration, "resources.pids"},
		{"zero disk", func(s *model.Spec) { s.Resources.DiskMB = 0 }, nil, model.ErrConfiguration, "resources.disk_mb"},
		{"zero cpu", func(s *model.Spec) { s.Resources.CPU = 0 }, nil, model.ErrConfiguration, "resources.cpu"},
		{"pids above ceiling", func(s *model.Spec) { s.Resources.Pids = 1 << 20 }, nil, model.ErrCapabilityNotSupported, "resources.pids"},
		{"negative timeout", func(s *model.Spec) { s.TimeoutSeconds = -1 }, nil, model.ErrConfiguration, "timeout_seconds"},
		{"negative lifetime", func(s *model.Spec) { s.LifetimeSeconds = -5 }, nil, model.ErrConfiguration, "lifetime_seconds"},
		{"zero timeout", func(s *model.Spec) { s.TimeoutSeconds = 0 }, nil, model.ErrConfiguration, "timeout_seconds"},
		{"zero lifetime", func(s *model.Spec) { s.LifetimeSeconds = 0 }, nil, model.ErrConfiguration, "lifetime_seconds"},
		// Positive, yet "no limit" once converted: NanoCPUs 0, 0 bytes.
		{"cpu 1e-10", func(s *model.Spec) { s.Resources.CPU = 1e-10 }, nil, model.ErrConfiguration, "resources.cpu"},
		{"cpu NaN", func(s *model.Spec) { s.Resources.CPU = math.NaN() }, nil, model.ErrConfiguration, "resources.cpu"},
		{"memory 2^44 MiB", func(s *model.Spec) { s.Resources.MemoryMB = 1 << 44 }, nil, model.ErrConfiguration, "resources.memory_mb"},
		{"memory below Docker's minimum", func(s *model.Spec) { s.Resources.MemoryMB = 5 }, nil, model.ErrConfiguration, "resources.memory_mb"},
		{"disk huge", func(s *model.Spec) { s.Resources.DiskMB = 1 << 54 }, nil, model.ErrConfiguration, "resources.disk_mb"},
		{"pids huge", func(s *model.Spec) { s.Resources.Pids = 1 << 62 }, nil, model.ErrConfiguration, "resources.pids"},
		// Overflowing durations: 1e10 s, and 18446744074 s (2^64 ns and a
		// little), which would wrap to 290 ms.
		{"timeout 1e10", func(s *model.Spec) { s.TimeoutSeconds = 1e10; s.LifetimeSeconds = 1e10 }, nil, model.ErrConfiguration, "timeout_seconds"},
		{"lifetime 18446744074", func(s *model.Spec) { s.LifetimeSeconds = 18446744074 }, nil, model.ErrConfiguration, "lifetime_seconds"},
		{"require UNKNOWN", func(s *model.Spec) { s.RequireIsolation = model.TierUnknown }, nil, model.ErrConfiguration, "require_isolation"},
		{"require GVISOR on runc", func(s *model.Spec) { s.RequireIsolation = model.TierGVisor }, nil, model.ErrConfiguration, "require_isolation"},
		{"require MICROVM on runsc", func(s *model.Spec) { s.Runtime = "runsc"; s.RequireIsolation = model.TierMicroVM }, nil, model.ErrConfiguration, "require_isolation"},
		{"not a tier", func(s *model.Spec) { s.RequireIsolation = "VM" }, nil, model.ErrConfiguration, "require_isolation"},
		{"unknown runtime", func(s *model.Spec) { s.Runtime = "youki" }, nil, model.ErrConfiguration, "runtime"},
		{"reserved label", func(s *model.Spec) { s.Labels["sandboxio.owner"] = "me" }, nil, model.ErrConfiguration, "labels"},
		{"contradicting tenant label", func(s *model.Spec) { s.Labels[model.LabelTenantID] = "other" }, nil, model.ErrConfiguration, "labels"},
		{"missing secret", func(s *model.Spec) { s.SecretNames = []string{"OPENAI_API_KEY"} }, nil, model.ErrConfiguration, "secret_names"},
		{"other backend", func(s *model.Spec) { s.Backend = "e2b://" }, nil, model.ErrConfiguration, "backend"},
		{"no image", func(s *model.Spec) { s.Image = "" }, nil, model.ErrConfiguration, "image"},
		{"brokered secret without the gateway", brokeredOn("docker://"), nil, model.ErrCapabilityNotSupported, "brokered_secrets"},
		{"brokered secret on the gateway under runsc", brokeredOn("docker://?egress=gateway&runtime=runsc"), nil, model.ErrCapabilityNotSupported, "brokered_secrets"},
		// validate takes it on the gateway, with its value.
		{"brokered secret on the gateway without its value", brokeredOn("docker://?egress=gateway"), nil, model.ErrConfiguration, "brokered_secrets"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := backends.CreateRequest{Spec: testSpec(t, tc.mod)}
			if tc.req != nil {
				tc.req(&req)
			}
			_, err := b.Create(t.Context(), req)
			me := classError(t, err, tc.class, "")
			if me.Attribute != tc.attr {
				t.Errorf("attribute %q, want %q (%v)", me.Attribute, tc.attr, err)
			}
			if strings.Contains(err.Error(), "nonexistent") {
				t.Errorf("an API call was made: %v", err)
			}
		})
	}
}

// brokeredOn puts the spec on backend with one brokered secret.
func brokeredOn(backend string) func(*model.Spec) {
	return func(s *model.Spec) {
		s.Backend = backend
		s.BrokeredSecrets = map[string]model.BrokeredSecret{"GITHUB_TOKEN": {Hosts: []string{"api.github.com"}, Header: "Authorization", Format: "%s"}}
	}
}

// Only the gateway that forwards a runc sandbox's traffic takes brokered
// secrets in validate, each with its value, which goes nowhere but the
// plan's broker secrets; everything else is a Backstop of SBX-SEC-005.
func TestBrokeredSecretsValidatedOnlyOnTheGateway(t *testing.T) {
	const canary = "canary-brokered-1f0c9e7d"
	p, err := validate(backends.CreateRequest{Spec: testSpec(t, brokeredOn("docker://?egress=gateway")),
		Brokered: map[string]string{"GITHUB_TOKEN": canary}}, true)
	if err != nil || !p.forward {
		t.Fatalf("validate on the gateway: forward %v, %v", p.forward, err)
	}
	if len(p.brokered) != 1 || string(p.brokered[0].Value) != canary || p.brokered[0].Header != "Authorization" {
		t.Fatalf("brokered secrets of the plan: %+v", p.brokered)
	}
	if strings.Contains(strings.Join(append(p.env, p.secrets...), " "), canary) {
		t.Fatal("the value reached the sandbox's environment")
	}
	_, err = validate(backends.CreateRequest{Spec: testSpec(t, brokeredOn("docker://?egress=gateway"))}, true)
	if me := classError(t, err, model.ErrConfiguration, ""); me.Rule != rules.SecretValues || me.Attribute != "brokered_secrets" {
		t.Fatalf("no value: %v", err)
	}
	// Apply's live check takes it: what it asks next is the daemon.
	_, err = unreachableBackend(t).Preflight(t.Context(), testSpec(t, brokeredOn("docker://?egress=gateway")))
	if me := (*model.Error)(nil); errors.As(err, &me) && me.Class == model.ErrCapabilityNotSupported {
		t.Fatalf("preflight refused a brokered secret on the gateway: %v", err)
	}
	_, err = validate(backends.CreateRequest{Spec: testSpec(t, brokeredOn("docker://"))}, true)
	if !backends.IsPolicyGap(err) {
		t.Fatalf("plain docker: %v, want a Backstop", err)
	}
}

func TestSecretValueNeverInError(t *testing.T) {
	b := unreachableBackend(t)
	const secret = "sk-live-abcdef0123456789"
	spec := testSpec(t, func(s *model.Spec) {
		s.SecretNames = []string{"API_KEY", "MISSING"}
	})
	_, err := b.Create(t.Context(), backends.CreateRequest{Spec: spec, Secrets: map[string]string{"API_KEY": secret}})
	wantClass(t, err, model.ErrConfiguration, "")
	if strings.Contains(err.Error(), secret) {
		t.Fatalf("secret value in error: %v", err)
	}
}

func TestTmpfsSizesAddUpToTheCap(t *testing.T) {
	for _, mb := range []int64{1, 2, 7, 16, 100, 1024, 10240, model.MaxDiskMB} {
		sizes := tmpfsSizes(mb)
		var sum int64
		for _, w := range writablePaths {
			n, ok := sizes[w.Path]
			if !ok || n < minTmpfsKiB {
				t.Fatalf("disk %dM: %s has size %dk", mb, w.Path, n)
			}
			sum += n
		}
		if mb >= 1 && sum > mb*1024 && sum > int64(len(writablePaths))*minTmpfsKiB+minTmpfsKiB {
			t.Fatalf("disk %dM: sizes add up to %dk", mb, sum)
		}
		if mb >= 2 && sum != mb*1024 {
			t.Fatalf("disk %dM: sizes add up to %dk, want %dk", mb, sum, mb*1024)
		}
	}
}

func TestMarkerWriterStripsThePid(t *testing.T) {
	for _, chunks := range [][]string{
		{"\x1esandboxio-pid:42\x1ehello"},
		{"\x1esand", "boxio-pid:4", "2\x1e", "hello"},
		{"\x1esandboxio-pid:42\x1e", "hello"},
	} {
		buf := &capWriter{max: 1 << 10}
		m := &backends.MarkerWriter{Next: buf}
		for _, c := range chunks {
			if _, err := m.Write([]byte(c)); err != nil {
				t.Fatal(err)
			}
		}
		if m.PID() != 42 || string(buf.bytes()) != "hello" {
			t.Fatalf("%q: pid %d, rest %q", chunks, m.PID(), string(buf.bytes()))
		}
	}
	buf := &capWriter{max: 1 << 10}
	m := &backends.MarkerWriter{Next: buf}
	_, _ = m.Write([]byte("OCI runtime exec failed"))
	if m.PID() != 0 || string(buf.bytes()) != "OCI runtime exec failed" {
		t.Fatalf("no marker: pid %d, rest %q", m.PID(), string(buf.bytes()))
	}
}

func TestTierOfBinary(t *testing.T) {
	for p, want := range map[string]model.Tier{
		"runc": model.TierContainer, "/usr/bin/runsc": model.TierGVisor, "/opt/kata/bin/kata-runtime": model.TierMicroVM,
	} {
		if got, ok := tierOfBinary(p); !ok || got != want {
			t.Errorf("%s: %s, want %s", p, got, want)
		}
	}
	if _, ok := tierOfBinary("/usr/bin/youki"); ok {
		t.Error("youki has no tier")
	}
}

// A runtime's tier is claimed by its name and confirmed by what the daemon
// runs for it; what sandboxio cannot recognise confirms nothing.
func TestRuntimeTierConfirmedByRegistration(t *testing.T) {
	plan := func(runtime string, tier model.Tier) createPlan {
		return createPlan{runtime: runtime, tier: tier, networkMode: "none"}
	}
	reg := func(rt system.Runtime) *daemonFacts {
		return &daemonFacts{runtimes: map[string]system.RuntimeWithStatus{"kata": {Runtime: rt}, "runsc": {Runtime: rt}}}
	}
	for _, tc := range []struct {
		name    string
		rt      system.Runtime
		p       createPlan
		refused string // "" when accepted
	}{
		{"kata shim", system.Runtime{Type: "io.containerd.kata.v2"}, plan("kata", model.TierMicroVM), ""},
		{"kata shim by path", system.Runtime{Type: "/usr/local/bin/containerd-shim-kata-v2"}, plan("kata", model.TierMicroVM), ""},
		{"kata runtime binary", system.Runtime{Path: "/opt/kata/bin/kata-runtime"}, plan("kata", model.TierMicroVM), ""},
		{"kata name running crun", system.Runtime{Path: "/usr/bin/crun"}, plan("kata", model.TierMicroVM), "does not recognise"},
		{"kata name running runc", system.Runtime{Path: "/usr/sbin/runc"}, plan("kata", model.TierMicroVM), "gives CONTAINER, not MICROVM"},
		{"kata name with runc shim", system.Runtime{Type: "io.containerd.runc.v2"}, plan("kata", model.TierMicroVM), "gives CONTAINER, not MICROVM"},
		{"kata name with unknown shim", system.Runtime{Type: "io.containerd.youki.v1"}, plan("kata", model.TierMicroVM), "does not recognise"},
		{"nothing registered", system.Runtime{}, plan("kata", model.TierMicroVM), "does not recognise"},
		{"runsc binary", system.Runtime{Path: "/usr/bin/runsc", Args: []string{"--network=none"}}, plan("runsc", model.TierGVisor), ""},
		{"runsc name running runc", system.Runtime{Path: "runc", Args: []string{"--network=none"}}, plan("runsc", model.TierGVisor), "gives CONTAINER, not GVISOR"},
	} {
		err := checkRuntime(reg(tc.rt), tc.p)
		if tc.refused == "" {
			if err != nil {
				t.Errorf("%s: refused: %v", tc.name, err)
			}
			continue
		}
		me := classError(t, err, model.ErrConfiguration, "")
		if me.Attribute != "runtime" || !strings.Contains(me.Message, tc.refused) || me.Fix == "" {
			t.Errorf("%s: %+v, want a runtime refusal saying %q", tc.name, me, tc.refused)
		}
	}
}

// A network named sandboxio-egress that lets containers talk to each other
// (made by hand, or by another tool) is refused, not joined.
func TestEgressNetworkMustKeepSandboxesApart(t *testing.T) {
	ok := network.Summary{Name: EgressNetwork, Driver: "bridge", Options: map[string]string{optionICC: "false"}}
	if err := checkEgressNetwork(ok); err != nil {
		t.Fatal(err)
	}
	for name, n := range map[string]network.Summary{
		"icc allowed":   {Name: EgressNetwork, Driver: "bridge", Options: map[string]string{optionICC: "true"}},
		"icc unset":     {Name: EgressNetwork, Driver: "bridge"},
		"not a bridge":  {Name: EgressNetwork, Driver: "macvlan", Options: map[string]string{optionICC: "false"}},
		"internal only": {Name: EgressNetwork, Driver: "bridge", Internal: true, Options: map[string]string{optionICC: "false"}},
	} {
		err := checkEgressNetwork(n)
		me := classError(t, err, model.ErrConfiguration, "")
		if me.Attribute != "network.egress" || !strings.Contains(me.Fix, "docker network rm "+EgressNetwork) {
			t.Errorf("%s: %+v", name, me)
		}
	}
}

// The bounds Docker applies are those of the policy bundle (cap_bounds and
// max_timeout_seconds in the capability data): exactly at a bound is
// accepted and what the container gets; just beyond is refused with the
// rule the policy names, before any API call.
func TestCapAndTimeoutBounds(t *testing.T) {
	b, ceiling := backends.CapBounds(), backends.MaxTimeoutSeconds()
	for _, tc := range []struct {
		name string
		mod  func(*model.Spec)
		rule string // "" when accepted
		attr string
	}{
		{"min caps", func(s *model.Spec) {
			s.Resources = model.Caps{CPU: b.CPU.Min, MemoryMB: int64(b.MemoryMB.Min), DiskMB: int64(b.DiskMB.Min), Pids: int64(b.Pids.Min)}
		}, "", ""},
		{"max caps", func(s *model.Spec) {
			s.Resources = model.Caps{CPU: b.CPU.Max, MemoryMB: int64(b.MemoryMB.Max), DiskMB: int64(b.DiskMB.Max), Pids: 256}
		}, "", ""},
		{"timeout and lifetime at the ceiling", func(s *model.Spec) { s.TimeoutSeconds, s.LifetimeSeconds = ceiling, ceiling }, "", ""},
		{"cpu below min", func(s *model.Spec) { s.Resources.CPU = b.CPU.Min / 2 }, "SBX-RES-001", "resources.cpu"},
		{"cpu above max", func(s *model.Spec) { s.Resources.CPU = b.CPU.Max + 0.5 }, "SBX-RES-001", "resources.cpu"},
		{"memory below min", func(s *model.Spec) { s.Resources.MemoryMB = int64(b.MemoryMB.Min) - 1 }, "SBX-RES-001", "resources.memory_mb"},
		{"memory above max", func(s *model.Spec) { s.Resources.MemoryMB = int64(b.MemoryMB.Max) + 1 }, "SBX-RES-001", "resources.memory_mb"},
		{"disk above max", func(s *model.Spec) { s.Resources.DiskMB = int64(b.DiskMB.Max) + 1 }, "SBX-RES-001", "resources.disk_mb"},
		{"pids above max", func(s *model.Spec) { s.Resources.Pids = int64(b.Pids.Max) + 1 }, "SBX-RES-001", "resources.pids"},
		{"pids above docker ceiling", func(s *model.Spec) { s.Resources.Pids = 32769 }, "SBX-RES-005", "resources.pids"},
		{"zero cpu", func(s *model.Spec) { s.Resources.CPU = 0 }, "SBX-RES-001", "resources.cpu"},
		{"timeout above ceiling", func(s *model.Spec) { s.TimeoutSeconds, s.LifetimeSeconds = ceiling+1, ceiling }, "SBX-TMO-001", "timeout_seconds"},
		{"lifetime above ceiling", func(s *model.Spec) { s.LifetimeSeconds = ceiling + 1 }, "SBX-TMO-002", "lifetime_seconds"},
		{"zero timeout", func(s *model.Spec) { s.TimeoutSeconds = 0 }, "SBX-TMO-001", "timeout_seconds"},
		{"zero lifetime", func(s *model.Spec) { s.LifetimeSeconds = 0 }, "SBX-TMO-002", "lifetime_seconds"},
	} {
		p, err := validate(backends.CreateRequest{Spec: testSpec(t, tc.mod)}, true)
		if tc.rule == "" {
			if err != nil {
				t.Errorf("%s: refused: %v", tc.name, err)
				continue
			}
			// what Docker gets is what was declared, never "no limit"
			_, hc := containerConfig(p, DiskTmpfs, "none", nil)
			if hc.NanoCPUs != int64(math.Round(p.caps.CPU*1e9)) || hc.NanoCPUs < 1e7 ||
				hc.Memory != p.caps.MemoryMB<<20 || hc.MemorySwap != hc.Memory || hc.Memory < 6<<20 {
				t.Errorf("%s: NanoCPUs %d, memory %d, swap %d for caps %+v", tc.name, hc.NanoCPUs, hc.Memory, hc.MemorySwap, p.caps)
			}
			if got, want := p.lifetime, time.Duration(testSpec(t, tc.mod).LifetimeSeconds)*time.Second; got != want || got <= 0 {
				t.Errorf("%s: lifetime %s, want %s", tc.name, got, want)
			}
			continue
		}
		class := model.ErrConfiguration
		if tc.rule == "SBX-RES-005" {
			class = model.ErrCapabilityNotSupported
		}
		me := classError(t, err, class, "")
		if me.Rule != tc.rule || me.Attribute != tc.attr || me.Fix == "" {
			t.Errorf("%s: %+v, want rule %s on %s", tc.name, me, tc.rule, tc.attr)
		}
	}
}

// Under either strategy the writable places Docker adds are sized from or
// closed to disk_mb: /dev/shm gets its share (the writable layer the rest),
// and on runc /dev and /dev/mqueue are read-only; Docker's own read-only
// paths stay in the list that replaces its default.
func TestContainerConfigBoundsEveryWritableMount(t *testing.T) {
	for _, tier := range []model.Tier{model.TierContainer, model.TierGVisor} {
		for _, strategy := range []string{DiskStorageOpt, DiskTmpfs} {
			p := createPlan{runtime: "runc", tier: tier, networkMode: "none", lifetime: time.Minute,
				caps: model.Caps{CPU: 1, MemoryMB: 256, DiskMB: 64, Pids: 64}}
			_, hc := containerConfig(p, strategy, "none", nil)
			shm := hc.ShmSize / 1024
			if shm <= 0 || shm >= 64*1024 {
				t.Fatalf("%s %s: ShmSize %d", tier, strategy, hc.ShmSize)
			}
			var rest int64
			if strategy == DiskStorageOpt {
				k, err := strconv.ParseInt(strings.TrimSuffix(hc.StorageOpt["size"], "k"), 10, 64)
				if err != nil {
					t.Fatalf("storage-opt size %q", hc.StorageOpt["size"])
				}
				rest = k
			} else {
				if _, ok := hc.Tmpfs[shmPath]; ok {
					t.Fatal("/dev/shm is sized by ShmSize, not mounted twice")
				}
				for _, opts := range hc.Tmpfs {
					var k int64
					for _, o := range strings.Split(opts, ",") {
						if v, ok := strings.CutPrefix(o, "size="); ok {
							k, _ = strconv.ParseInt(strings.TrimSuffix(v, "k"), 10, 64)
						}
					}
					rest += k
				}
			}
			if rest+shm != 64*1024 {
				t.Fatalf("%s %s: %dk + /dev/shm %dk, want 64M in all", tier, strategy, rest, shm)
			}
			if tier == model.TierContainer {
				for _, want := range []string{"/dev", "/dev/mqueue", "/proc/sys", "/proc/sysrq-trigger"} {
					if !slices.Contains(hc.ReadonlyPaths, want) {
						t.Fatalf("%s read-only paths %v lack %s", strategy, hc.ReadonlyPaths, want)
					}
				}
			}
		}
	}
}

// Learn is deny (network mode none) with the observer required; deny is
// observed under runc only.
func TestLearnIsObservedDeny(t *testing.T) {
	for _, c := range []struct {
		egress, runtime string
		observe, learn  bool
	}{
		{model.EgressLearn, "runc", true, true},
		{model.EgressDeny, "runc", true, false},
		{model.EgressDeny, "runsc", false, false},
	} {
		p, err := validate(backends.CreateRequest{Spec: testSpec(t, func(s *model.Spec) { s.Network.Egress, s.Runtime = c.egress, c.runtime })}, true)
		if err != nil || p.networkMode != "none" || p.observe != c.observe || p.learn != c.learn {
			t.Errorf("%s on %s: network mode %q, observe %v, learn %v, err %v", c.egress, c.runtime, p.networkMode, p.observe, p.learn, err)
		}
	}
}
