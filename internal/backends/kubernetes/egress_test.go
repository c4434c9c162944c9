package kubernetes

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// hostListener is a TCP listener on a host address that records the peers
// it accepted: the listener's side of "no connection arrived".
type hostListener struct {
	l    net.Listener
	mu   sync.Mutex
	seen []string
}

func listenHost(t *testing.T, ip string) *hostListener {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("listen on %s: %v", ip, err)
	}
	h := &hostListener{l: l}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			h.mu.Lock()
			h.seen = append(h.seen, c.RemoteAddr().(*net.TCPAddr).IP.String())
			h.mu.Unlock()
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = l.Close() })
	return h
}

func (h *hostListener) addr() (string, string) {
	host, port, _ := net.SplitHostPort(h.l.Addr().String())
	return host, port
}

func (h *hostListener) accepted() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.seen...)
}

// hostAddr is the host's IPv4 address on an interface; bridgeFor finds the
// host interface whose subnet holds a pod address: the node's address on
// the pod bridge, learned from the host's own interfaces (the CNI's).
func hostAddr(t *testing.T, match func(net.IP, *net.IPNet) bool) string {
	t.Helper()
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ifs {
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && match(n.IP, n) {
				return n.IP.String()
			}
		}
	}
	t.Fatal("no such host address")
	return ""
}

func bridgeFor(t *testing.T, podIP string) string {
	ip := net.ParseIP(podIP)
	return hostAddr(t, func(_ net.IP, n *net.IPNet) bool { return n.Contains(ip) })
}

// dockerAddr is an address of the host outside the pod network, the
// cluster's services and the node's own address: docker0's.
func dockerAddr(t *testing.T) string {
	t.Helper()
	i, err := net.InterfaceByName("docker0")
	if err != nil {
		t.Fatalf("no docker0 on the host to serve as an address outside the cluster: %v", err)
	}
	addrs, _ := i.Addrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	t.Fatal("docker0 has no IPv4 address")
	return ""
}

// listenerPod starts one of the probe's listener pods and returns its IP.
func listenerPod(t *testing.T, b *k8sBackend) (name, ip string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	name = "sandboxio-test-listen-" + randomHex(3)
	if err := b.createProbePod(ctx, name, []string{wrapBinInImage, "listen", probePort}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.discard(context.WithoutCancel(t.Context()), name) })
	ip, err := b.waitPodIP(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	return name, ip
}

func podAccepted(t *testing.T, b *k8sBackend, name string) []string {
	t.Helper()
	out, err := b.logs(t.Context(), name, "probe")
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, line := range strings.Split(out, "\n") {
		if i := strings.Index(line, netMarker+"accept="); i >= 0 {
			seen = append(seen, strings.TrimSpace(line[i+len(netMarker+"accept="):]))
		}
	}
	return seen
}

func podIP(t *testing.T, b *k8sBackend, s backends.Sandbox) string {
	t.Helper()
	pod, err := b.cs.CoreV1().Pods(b.namespace).Get(t.Context(), s.Info().ID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod.Status.PodIP
}

// connect runs nc in the sandbox; true when it connected.
func connect(t *testing.T, s backends.Sandbox, host, port string) (bool, string) {
	t.Helper()
	res := run(t, s, "sh", "-c", `nc -w 3 "$0" "$1" </dev/null && echo CONNECTED`, host, port)
	return strings.Contains(string(res.Stdout), "CONNECTED"), strings.TrimSpace(string(res.Stderr))
}

func denySpec(tn string, allow ...string) model.Spec {
	s := testSpec(tn)
	s.Network = model.NetworkPolicy{Egress: model.EgressDeny, Allow: allow}
	return s
}

// Under deny only lo is up, the routes are gone, and connects to another
// pod's listener and to a listener on the node's bridge address fail; the
// listeners, which an unlocked pod does reach, see nothing from the sandbox.
func TestAccEgressDenyFromInside(t *testing.T) {
	b := needCluster(t)
	lis, lisIP := listenerPod(t, b)
	bridge := listenHost(t, bridgeFor(t, lisIP))
	bHost, bPort := bridge.addr()
	s := open(t, b, backends.CreateRequest{Spec: denySpec(tenant())})
	ip := podIP(t, b, s)
	links := sh(t, s, `for d in /sys/class/net/*; do echo "$(basename $d)=$(cat $d/operstate)"; done`)
	for _, l := range strings.Fields(links) {
		if name, state, _ := strings.Cut(l, "="); name != "lo" && state != "down" {
			t.Errorf("link %s is %s under deny", name, state)
		}
	}
	if routes := sh(t, s, "ip route show table main; ip route show table 146"); strings.Contains(routes, "eth0") || !strings.Contains(routes, "unreachable default") {
		t.Errorf("routes under deny:\n%s", routes)
	}
	t.Logf("links %s; rules:\n%s", strings.Fields(links), sh(t, s, "ip rule"))
	for _, target := range [][2]string{{lisIP, probePort}, {bHost, bPort}} {
		if ok, msg := connect(t, s, target[0], target[1]); ok {
			t.Errorf("under deny the sandbox connected to %s:%s", target[0], target[1])
		} else {
			t.Logf("%s:%s from the sandbox: %s", target[0], target[1], msg)
		}
	}
	// The control: an unlocked pod reaches both listeners.
	ctl := "sandboxio-test-control-" + randomHex(3)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	if err := b.createProbePod(ctx, ctl, []string{wrapBinInImage, "netprobe", lisIP + ":" + probePort, bHost + ":" + bPort}, nil); err != nil {
		t.Fatal(err)
	}
	defer b.discard(t.Context(), ctl)
	rep, err := b.probeResult(ctx, ctl, "")
	if err != nil {
		t.Fatal(err)
	}
	if rep["connect:"+lisIP+":"+probePort] != "ok" || rep["connect:"+bHost+":"+bPort] != "ok" {
		t.Fatalf("the unlocked control pod did not reach the listeners: %v", rep)
	}
	time.Sleep(time.Second)
	if seen := podAccepted(t, b, lis); !sharesAddr(seen, rep["self"]) || sharesAddr(seen, ip) {
		t.Errorf("the listener pod saw %v: want the control %s and not the sandbox %s", seen, rep["self"], ip)
	}
	if seen := bridge.accepted(); !sharesAddr(seen, rep["self"]) || sharesAddr(seen, ip) {
		t.Errorf("the bridge listener saw %v: want the control %s and not the sandbox %s", seen, rep["self"], ip)
	}
}

// An allowed CIDR is reachable, everything else is not; an allow entry
// covering the pod network does not reopen it (the lockouts come first).
func TestAccEgressAllowList(t *testing.T) {
	b := needCluster(t)
	_, lisIP := listenerPod(t, b)
	outside := listenHost(t, dockerAddr(t))
	oHost, oPort := outside.addr()
	bridge := listenHost(t, bridgeFor(t, lisIP))
	bHost, bPort := bridge.addr()
	podNet := netip.PrefixFrom(netip.MustParseAddr(lisIP), 16).Masked().String()
	tn := tenant()
	in := open(t, b, backends.CreateRequest{Spec: denySpec(tn, oHost, podNet)})
	out := open(t, b, backends.CreateRequest{Spec: denySpec(tn, "198.18.0.0/15")})
	inIP, outIP := podIP(t, b, in), podIP(t, b, out)
	if ok, msg := connect(t, in, oHost, oPort); !ok {
		t.Errorf("the allowed address %s was not reached: %s", oHost, msg)
	}
	for _, target := range [][2]string{{lisIP, probePort}, {bHost, bPort}} {
		if ok, _ := connect(t, in, target[0], target[1]); ok {
			t.Errorf("allow %s reopened %s:%s", podNet, target[0], target[1])
		}
	}
	if ok, _ := connect(t, out, oHost, oPort); ok {
		t.Errorf("%s was reached though not in the allow list", oHost)
	}
	t.Logf("route to %s with it allowed: %s", oHost, sh(t, in, "ip route get "+oHost))
	if seen := outside.accepted(); !sharesAddr(seen, inIP) || sharesAddr(seen, outIP) {
		t.Errorf("the outside listener saw %v: want %s (allowed) and not %s", seen, inIP, outIP)
	}
	if seen := bridge.accepted(); len(seen) != 0 {
		t.Errorf("the bridge listener saw %v", seen)
	}
}

// Under open egress two tenants' pods cannot reach each other or the
// node's bridge address, yet an address outside the cluster is reachable.
func TestAccEgressTenantsOpen(t *testing.T) {
	b := needCluster(t)
	a := open(t, b, backends.CreateRequest{Spec: testSpec(tenant())})
	c := open(t, b, backends.CreateRequest{Spec: testSpec(tenant())})
	aIP, cIP := podIP(t, b, a), podIP(t, b, c)
	outside := listenHost(t, dockerAddr(t))
	oHost, oPort := outside.addr()
	bridge := listenHost(t, bridgeFor(t, aIP))
	bHost, bPort := bridge.addr()
	for _, s := range []backends.Sandbox{a, c} {
		sh(t, s, wrapBin+" listen "+probePort+" >/tmp/acc 2>&1 &")
	}
	time.Sleep(500 * time.Millisecond)
	// Each listener works: it is reached from its own sandbox.
	for _, s := range []backends.Sandbox{a, c} {
		if ok, msg := connect(t, s, "127.0.0.1", probePort); !ok {
			t.Fatalf("a sandbox's own listener is not reachable on lo: %s", msg)
		}
	}
	for _, p := range [][3]any{{a, cIP, "a to c"}, {c, aIP, "c to a"}} {
		if ok, msg := connect(t, p[0].(backends.Sandbox), p[1].(string), probePort); ok {
			t.Errorf("%s: one tenant's sandbox reached the other's under open egress", p[2])
		} else {
			t.Logf("%s: %s", p[2], msg)
		}
		if ok, _ := connect(t, p[0].(backends.Sandbox), bHost, bPort); ok {
			t.Errorf("%s: a sandbox reached the node's bridge address under open egress", p[2])
		}
		if ok, msg := connect(t, p[0].(backends.Sandbox), oHost, oPort); !ok {
			t.Errorf("%s: the outside address %s is not reachable under open egress: %s", p[2], oHost, msg)
		}
	}
	for _, p := range [][2]any{{a, cIP}, {c, aIP}} {
		if acc := sh(t, p[0].(backends.Sandbox), "cat /tmp/acc"); strings.Contains(acc, "accept="+p[1].(string)) || !strings.Contains(acc, "accept=127.0.0.1") {
			t.Errorf("a sandbox's listener saw:\n%s", acc)
		}
	}
	if seen := bridge.accepted(); len(seen) != 0 {
		t.Errorf("the bridge listener saw %v", seen)
	}
	if seen := outside.accepted(); !sharesAddr(seen, aIP) || !sharesAddr(seen, cIP) {
		t.Errorf("the outside listener saw %v, want both sandboxes", seen)
	}
}

// The sandboxed process cannot undo the lock: busybox ip and the wrapper's
// netlink calls are refused with EPERM, and the lock is still there after.
func TestAccEgressCannotUndo(t *testing.T) {
	b := needCluster(t)
	s := open(t, b, backends.CreateRequest{Spec: denySpec(tenant())})
	for _, cmd := range []string{"ip link set eth0 up", "ip rule del pref 100", "ip route add default dev eth0", "ip route flush table 145"} {
		res := run(t, s, "sh", "-c", cmd)
		if res.ExitCode == 0 || !strings.Contains(string(res.Stderr), "not permitted") {
			t.Errorf("%s: exit %d, %s", cmd, res.ExitCode, res.Stderr)
		}
	}
	rep := parseNet(sh(t, s, wrapBin+" netprobe"))
	for _, u := range strings.Split(rep["undo"], ",") {
		if !strings.HasSuffix(u, ":eperm") {
			t.Errorf("netlink from the sandbox: %s", rep["undo"])
		}
	}
	if rep["lock"] != lockDeny || rep["links_up"] != "lo" {
		t.Errorf("after the attempts: lock %s, links up %s", rep["lock"], rep["links_up"])
	}
}

// A namespace whose Pod Security admission forbids NET_ADMIN cannot be
// locked: the probe (at apply: Preflight, the live check) and the open say
// so with CapabilityNotSupported, for deny and for open egress alike, and
// nothing is left behind.
func TestAccEgressForbiddenByAdmission(t *testing.T) {
	b := needCluster(t)
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	ns := testNSPrefix() + "psa-" + randomHex(3)
	_, err := b.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "baseline"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = b.cs.CoreV1().Namespaces().Delete(context.WithoutCancel(t.Context()), ns, metav1.DeleteOptions{})
	})
	waitSA(ctx, b, ns)
	pb, err := openTest()
	if err != nil {
		t.Fatal(err)
	}
	pb.namespace = ns
	tn := tenant()
	for _, n := range []model.NetworkPolicy{{Egress: model.EgressDeny}, {Egress: model.EgressAllow}} {
		spec := testSpec(tn)
		spec.Network, spec.Backend = n, "kubernetes://sandboxio/"+ns
		_, err := pb.Preflight(ctx, spec)
		var me *model.Error
		if !asModel(err, &me) || me.Class != model.ErrCapabilityNotSupported || !strings.Contains(me.Message, "egress probe") ||
			!strings.Contains(me.Message, "NET_ADMIN") || !strings.Contains(me.Fix, "pod-security.kubernetes.io/enforce") {
			t.Errorf("%s: preflight: %v", n.Egress, err)
		}
		if _, err := pb.Create(ctx, backends.CreateRequest{Spec: spec}); class(err) != model.ErrCapabilityNotSupported {
			t.Errorf("%s: create: %v", n.Egress, err)
		}
	}
	pods, err := b.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			t.Errorf("pod %s left in %s", p.Name, ns)
		}
	}
}

func waitSA(ctx context.Context, b *k8sBackend, ns string) {
	for i := 0; i < 100; i++ {
		if _, err := b.cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A lock that silently does nothing (the test hook stands for a runtime or
// webhook that drops it) fails the probe: CapabilityNotSupported naming it,
// never a pass, and no deny sandbox opens.
func TestAccEgressBrokenLockRefused(t *testing.T) {
	b := needCluster(t)
	forgetProofs()
	lockBroken = true
	t.Cleanup(func() { lockBroken = false; forgetProofs() })
	for _, mode := range []string{lockDeny, lockAllow} {
		err := b.proven(t.Context(), mode)
		var me *model.Error
		if !asModel(err, &me) || me.Class != model.ErrCapabilityNotSupported || !strings.Contains(me.Message, "egress probe egress/"+mode) {
			t.Errorf("%s with a broken lock: %v", mode, err)
		} else {
			t.Logf("%s: %s", mode, me.Message)
		}
	}
	tn := tenant()
	if _, err := b.Create(t.Context(), backends.CreateRequest{Spec: denySpec(tn)}); class(err) != model.ErrCapabilityNotSupported {
		t.Errorf("create under deny with a broken lock: %v", err)
	}
	if n := podsLeft(t, b, map[string]string{model.LabelTenantID: tn}); n != 0 {
		t.Errorf("%d pods left", n)
	}
}

// Each sandbox reads its lock back from inside: with the proof cached as
// passed but the lock broken after it, the open is refused and the pod
// removed.
func TestAccEgressLockReadBackPerSandbox(t *testing.T) {
	b := needCluster(t)
	forgetProofs()
	t.Cleanup(func() { lockBroken = false; forgetProofs() })
	proofMu.Lock()
	proofs[b.proofKey(lockDeny)] = proof{at: time.Now()}
	proofMu.Unlock()
	lockBroken = true
	tn := tenant()
	_, err := b.Create(t.Context(), backends.CreateRequest{Spec: denySpec(tn)})
	var me *model.Error
	if !asModel(err, &me) || me.Class != model.ErrCapabilityNotSupported || !strings.Contains(me.Message, "network lock is not in place inside the pod") {
		t.Errorf("create with the lock broken after its proof: %v", err)
	}
	if n := podsLeft(t, b, map[string]string{model.LabelTenantID: tn}); n != 0 {
		t.Errorf("%d pods left", n)
	}
}

// The verdict is cached per cluster, namespace and mode for its time to
// live, failures for a shorter one.
func TestAccEgressProofCache(t *testing.T) {
	b := needCluster(t)
	forgetProofs()
	oldTTL, oldFail := proofTTL, failureTTL
	t.Cleanup(func() { proofTTL, failureTTL, lockBroken = oldTTL, oldFail, false; forgetProofs() })
	runs := probeRuns.Load
	ctx := t.Context()
	n0 := runs()
	for i := 0; i < 2; i++ {
		if err := b.proven(ctx, lockAllow); err != nil {
			t.Fatal(err)
		}
	}
	if got := runs() - n0; got != 1 {
		t.Errorf("two checks within the TTL ran %d probes, want 1", got)
	}
	proofTTL = time.Millisecond
	time.Sleep(2 * time.Millisecond)
	if err := b.proven(ctx, lockAllow); err != nil {
		t.Fatal(err)
	}
	if got := runs() - n0; got != 2 {
		t.Errorf("a check after the TTL ran %d probes in all, want 2", got)
	}
	// Failures are cached too, for failureTTL.
	lockBroken = true
	proofTTL = time.Millisecond
	time.Sleep(2 * time.Millisecond)
	for i := 0; i < 2; i++ {
		if err := b.proven(ctx, lockAllow); err == nil {
			t.Fatal("a broken lock was proven")
		}
	}
	if got := runs() - n0; got != 3 {
		t.Errorf("two checks of a failing cluster ran %d probes in all, want 3", got)
	}
}
