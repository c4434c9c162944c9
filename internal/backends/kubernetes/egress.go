package kubernetes

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Egress is enforced by locking each sandbox pod's own network namespace
// from an init container that holds NET_ADMIN (wrap lock, netlock.go),
// before the sandbox container starts with no capability at all. A
// NetworkPolicy is not used: whether one is enforced depends on the CNI,
// and on the project's test cluster nothing enforces it. The lock needs
// only a namespace whose Pod Security admission lets an init container add
// NET_ADMIN, and every use of it is shown on the cluster first (proveLock).

// Lock modes, one per egress policy.
const (
	lockDeny  = "deny"  // only lo
	lockCIDR  = "cidr"  // the allow list's CIDRs through the gateway
	lockAllow = "allow" // open egress, but no other pod, service or node
)

const (
	lockCtr    = "sandboxio-net"
	labelProbe = model.ReservedLabelPrefix + "probe"
)

// egressPlan is the lock a sandbox gets.
type egressPlan struct {
	mode     string
	allow    []netip.Prefix
	lockouts []netip.Prefix // learned at create (lockouts)
}

// planEgress maps the network policy to a lock mode. Domain entries cannot
// be routed; the policy refuses them (SBX-NET-005), and so does this
// backstop. Learn needs blocked-egress reporting, which the lock lacks.
func (p *createPlan) planEgress() error {
	n := p.spec.Network.Normalized()
	switch n.Egress {
	case model.EgressAllow:
		if len(n.Allow) > 0 {
			return gap(rules.NetAllowWithOpen, "network.allow", "an allow list with open egress")
		}
		p.egress = egressPlan{mode: lockAllow}
		return nil
	case model.EgressLearn:
		return gap(rules.NetLearn, "network.egress", `egress "learn", with no blocked-egress reporting on this backend`)
	case model.EgressDeny:
	default:
		return gap(rules.NetEgressMode, "network.egress", fmt.Sprintf("egress %q", n.Egress))
	}
	if len(n.Allow) == 0 {
		p.egress = egressPlan{mode: lockDeny}
		return nil
	}
	e := egressPlan{mode: lockCIDR}
	for _, s := range n.Allow {
		pre, err := allowPrefix(s)
		if err != nil {
			return gap(rules.NetAllowKind, "network.allow", "an allow-list entry that is no CIDR block or IP address")
		}
		e.allow = append(e.allow, pre)
	}
	p.egress = e
	return nil
}

// allowPrefix reads a CIDR block or an IPv4 address (a /32). IPv6 is
// refused by every lock (unreachable ::/0), so an IPv6 entry is too.
func allowPrefix(s string) (netip.Prefix, error) {
	if pre, err := netip.ParsePrefix(s); err == nil && pre.Addr().Is4() {
		return pre.Masked(), nil
	}
	if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
		return netip.PrefixFrom(a, 32), nil
	}
	return netip.Prefix{}, fmt.Errorf("not an IPv4 CIDR block or address")
}

// netOptions are the DSN's pod_cidr and service_cidr options: ranges to
// lock out besides what the API and the pod itself show.
type netOptions struct {
	podCIDRs, serviceCIDRs []netip.Prefix
}

func parseCIDRList(v string) ([]netip.Prefix, bool) {
	var out []netip.Prefix
	for _, s := range strings.Split(v, ",") {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil || !p.Addr().Is4() {
			return nil, false
		}
		out = append(out, p.Masked())
	}
	return out, len(out) > 0
}

func checkCIDRList(v string) (string, bool) {
	_, ok := parseCIDRList(v)
	return v, ok
}

// lockouts are the ranges no sandbox may reach in any mode, learned from
// the API: every node's spec.podCIDRs and addresses, and the ServiceCIDR
// objects (networking.k8s.io/v1); plus the DSN's options. The lock adds
// what the pod sees itself: its on-link subnet and its gateway. A cluster
// whose service range cannot be learned needs the service_cidr option.
func (b *k8sBackend) lockouts(ctx context.Context) ([]netip.Prefix, error) {
	out := append(append([]netip.Prefix{}, b.netOpts.podCIDRs...), b.netOpts.serviceCIDRs...)
	nodes, err := b.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, apiError("node list", err)
	}
	unknown := 0 // nodes whose pod range the API does not show
	for _, n := range nodes.Items {
		if len(n.Spec.PodCIDRs) == 0 {
			unknown++
		}
		for _, c := range n.Spec.PodCIDRs {
			if p, err := netip.ParsePrefix(c); err == nil && p.Addr().Is4() {
				out = append(out, p.Masked())
			}
		}
		for _, a := range n.Status.Addresses {
			if ip, err := netip.ParseAddr(a.Address); err == nil && ip.Is4() {
				out = append(out, netip.PrefixFrom(ip, 32))
			}
		}
	}
	// On one node the pod's own subnet, which the lock adds, is the pod
	// network the probe tests; pods on other nodes are not probed, so
	// their ranges must be known.
	if len(nodes.Items) > 1 && unknown > 0 && len(b.netOpts.podCIDRs) == 0 {
		return nil, refuse("network.egress", fmt.Sprintf("%d of the cluster's %d nodes show no spec.podCIDRs (the CNI assigns pod addresses itself), so the lock could not keep sandboxes from pods on other nodes", unknown, len(nodes.Items)),
			"set the pod_cidr option of the DSN to the cluster's pod network (kubernetes://CONTEXT/NAMESPACE?pod_cidr=10.244.0.0/16)")
	}
	services := len(b.netOpts.serviceCIDRs) > 0
	if sc, err := b.cs.NetworkingV1().ServiceCIDRs().List(ctx, metav1.ListOptions{}); err == nil {
		for _, s := range sc.Items {
			for _, c := range s.Spec.CIDRs {
				if p, err := netip.ParsePrefix(c); err == nil && p.Addr().Is4() {
					out = append(out, p.Masked())
					services = true
				}
			}
		}
	}
	if !services {
		return nil, refuse("network.egress", "the cluster's service range is unknown (no ServiceCIDR object could be read), so the lock could not keep sandboxes from the cluster's services",
			"set the service_cidr option of the DSN (kubernetes://CONTEXT/NAMESPACE?service_cidr=10.96.0.0/12), or let the kubeconfig's user list servicecidrs")
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

// lockArgs is the lock's command line: no secret ever goes in it.
func lockArgs(mode string, lockouts, allow []netip.Prefix) []string {
	args := []string{wrapBinInImage, "lock", mode}
	for _, p := range lockouts {
		args = append(args, "--lockout", p.String())
	}
	for _, p := range allow {
		args = append(args, "--allow", p.String())
	}
	if lockBroken {
		args = append(args, "--noop")
	}
	return args
}

// wrapBinInImage is the wrapper's path in its own image.
const wrapBinInImage = "/wrap"

// lockBroken is a test hook: the lock container reports and locks nothing,
// as a runtime that silently ignored it would; the probe must catch it.
var lockBroken bool

// lockContainer is the init container that locks the pod's network
// namespace: every capability dropped but NET_ADMIN, which it holds only
// until it exits, before the sandbox container starts.
func lockContainer(args []string) corev1.Container {
	no, yes := false, true
	res := corev1.ResourceList{corev1.ResourceCPU: qty("100m"), corev1.ResourceMemory: qty("32Mi"), corev1.ResourceEphemeralStorage: qty("16Mi")}
	return corev1.Container{
		Name: lockCtr, Image: WrapImage, ImagePullPolicy: corev1.PullNever, Command: args,
		SecurityContext: &corev1.SecurityContext{
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"NET_ADMIN"}},
			AllowPrivilegeEscalation: &no,
			Privileged:               &no,
			ReadOnlyRootFilesystem:   &yes,
			RunAsUser:                ptr(int64(0)),
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Resources: corev1.ResourceRequirements{Requests: res, Limits: res},
	}
}

// withLock adds the lock to a sandbox's pod, after the wrapper's install.
func withLock(pod *corev1.Pod, p createPlan) {
	pod.Spec.InitContainers = append(pod.Spec.InitContainers, lockContainer(lockArgs(p.egress.mode, p.egress.lockouts, p.egress.allow)))
}

// checkLock reads the lock back from inside the sandbox (the wrapper's
// probe): the rules and tables are there, and under deny only lo is up.
func checkLock(f map[string]string, e egressPlan) error {
	want := e.mode
	if e.mode == lockCIDR {
		want = fmt.Sprintf("cidr:%d", len(e.allow))
	}
	got := f["net_lock"]
	if got != want || (e.mode == lockDeny && f["links_up"] != "lo") {
		return refuse("network.egress", fmt.Sprintf("the network lock is not in place inside the pod (found %s, links up %s; want %s)", got, f["links_up"], want),
			"check that nothing on the cluster (a mutating webhook, the runtime) alters the pod's init containers")
	}
	return nil
}

// The proof cache: per cluster, namespace and mode, for the process (the
// provider at apply, the run-time helper before its first open).
var (
	proofMu    sync.Mutex
	proofs     = map[string]proof{}
	proofTTL   = 10 * time.Minute
	failureTTL = time.Minute
)

type proof struct {
	err error
	at  time.Time
}

func (b *k8sBackend) proofKey(mode string) string {
	return strings.Join([]string{b.rc.Host, b.context, b.namespace, mode}, "|")
}

// ensureLock proves the mode's lock on this namespace (cached), then
// learns the lockouts the sandbox's lock gets (cached for lockoutsTTL: a
// node added since is covered on its own pods by their on-link subnet).
func (b *k8sBackend) ensureLock(ctx context.Context, p *createPlan) error {
	if err := b.proven(ctx, p.egress.mode); err != nil {
		return err
	}
	lockoutMu.Lock()
	c, ok := lockoutCache[b.proofKey("")]
	lockoutMu.Unlock()
	if !ok || time.Since(c.at) >= lockoutsTTL {
		lo, err := b.lockouts(ctx)
		if err != nil {
			return err
		}
		c = cachedLockouts{lockouts: lo, at: time.Now()}
		lockoutMu.Lock()
		lockoutCache[b.proofKey("")] = c
		lockoutMu.Unlock()
	}
	p.egress.lockouts = c.lockouts
	return nil
}

const lockoutsTTL = 30 * time.Second

type cachedLockouts struct {
	lockouts []netip.Prefix
	at       time.Time
}

var (
	lockoutMu    sync.Mutex
	lockoutCache = map[string]cachedLockouts{}
)

// proven returns the cached verdict for a mode, probing when there is none
// or it is older than its time to live. Probes of one key do not overlap.
func (b *k8sBackend) proven(ctx context.Context, mode string) error {
	key := b.proofKey(mode)
	l := keyLock(key)
	l.Lock()
	defer l.Unlock()
	proofMu.Lock()
	pr, ok := proofs[key]
	proofMu.Unlock()
	ttl := proofTTL
	if pr.err != nil {
		ttl = failureTTL
	}
	if ok && time.Since(pr.at) < ttl {
		return pr.err
	}
	err := b.proveLock(ctx, mode)
	if ctx.Err() != nil {
		return err // cut short: nothing learned about the cluster
	}
	proofMu.Lock()
	proofs[key] = proof{err: err, at: time.Now()}
	proofMu.Unlock()
	return err
}

var keyLocks sync.Map

func keyLock(key string) *sync.Mutex {
	m, _ := keyLocks.LoadOrStore(key, &sync.Mutex{})
	return m.(*sync.Mutex)
}

// forgetProofs empties the cache (tests).
func forgetProofs() {
	proofMu.Lock()
	defer proofMu.Unlock()
	proofs = map[string]proof{}
}

// lockForbidden is the refusal when admission will not have the lock's
// init container.
func (b *k8sBackend) lockForbidden(probe string, err error) error {
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
		return nil
	}
	return &model.Error{Class: model.ErrCapabilityNotSupported, Attribute: "network.egress",
		Message: fmt.Sprintf("egress probe %s: the cluster refused the network lock's init container, which needs NET_ADMIN, in namespace %s: %v", probe, b.namespace, err),
		Fix: fmt.Sprintf("let init containers add NET_ADMIN in namespace %s (kubectl label namespace %s pod-security.kubernetes.io/enforce=privileged, in a namespace kept for sandboxes; the sandbox container itself still drops every capability), or name such a namespace in the DSN",
			b.namespace, b.namespace), Err: err}
}
