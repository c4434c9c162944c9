package kubernetes

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Each broken part of a probe report fails the verdict; the report of a
// lock that held passes.
func TestJudge(t *testing.T) {
	const target = "10.244.0.9:" + probePort
	ctl := map[string]string{"self": "10.244.0.7", "connect:" + target: "ok"}
	good := func(mode string) map[string]string {
		m := map[string]string{"self": "10.244.0.8", "lock": wantLock(mode), "links_up": "lo,eth0",
			"connect:" + target: "network_is_unreachable", "connect:gw:" + probePort: "network_is_unreachable",
			"route:" + probeAllowed: "unreachable", "route:" + probeOutside: "unreachable", "undo": "ruledel:eperm,linkup_eth0:eperm,routeadd:eperm"}
		switch mode {
		case lockDeny:
			m["links_up"] = "lo"
		case lockCIDR:
			m["route:"+probeAllowed] = "via_10.244.0.1"
		case lockAllow:
			m["route:"+probeAllowed], m["route:"+probeOutside] = "via_10.244.0.1", "via_10.244.0.1"
		}
		return m
	}
	accepted := []string{"10.244.0.7"}
	for _, mode := range []string{lockDeny, lockCIDR, lockAllow} {
		if why := judge(mode, target, ctl, good(mode), accepted); why != "" {
			t.Errorf("%s: a lock that held was judged broken: %s", mode, why)
		}
		breaks := map[string]func(m map[string]string){
			"lock none":      func(m map[string]string) { m["lock"] = "none" },
			"pod reached":    func(m map[string]string) { m["connect:"+target] = "ok" },
			"pod timed out":  func(m map[string]string) { m["connect:"+target] = "timeout" },
			"bridge refused": func(m map[string]string) { m["connect:gw:"+probePort] = "connection_refused" },
			"no gateway":     func(m map[string]string) { m["connect:gw:"+probePort] = "no-gateway" },
			"undo done":      func(m map[string]string) { m["undo"] = "ruledel:done,routeadd:eperm" },
			"outside wrong": func(m map[string]string) {
				m["route:"+probeOutside] = map[bool]string{true: "unreachable", false: "via_x"}[mode == lockAllow]
			},
			"listener saw it":    func(m map[string]string) { m["self"] = "10.244.0.7" },
			"links up (deny)":    func(m map[string]string) { m["links_up"] = "eth0,lo" },
			"allowed unroutable": func(m map[string]string) { m["route:"+probeAllowed] = "unreachable" },
		}
		for name, brk := range breaks {
			if (name == "links up (deny)" && mode != lockDeny) || (name == "allowed unroutable" && mode != lockCIDR) {
				continue
			}
			m := good(mode)
			brk(m)
			if why := judge(mode, target, ctl, m, accepted); why == "" {
				t.Errorf("%s: %s was judged a held lock", mode, name)
			}
		}
		// A control that reached nothing proves nothing.
		if why := judge(mode, target, map[string]string{"self": "10.244.0.7", "connect:" + target: "timeout"}, good(mode), nil); !strings.Contains(why, "control") {
			t.Errorf("%s: a broken control: %q", mode, why)
		}
	}
}

func TestPlanEgress(t *testing.T) {
	cases := []struct {
		n    model.NetworkPolicy
		mode string
		rule string
	}{
		{model.NetworkPolicy{}, lockDeny, ""},
		{model.NetworkPolicy{Egress: model.EgressAllow}, lockAllow, ""},
		{model.NetworkPolicy{Egress: model.EgressDeny, Allow: []string{"10.0.0.0/8", "192.0.2.7"}}, lockCIDR, ""},
		{model.NetworkPolicy{Egress: model.EgressDeny, Allow: []string{"example.com"}}, "", rules.NetAllowKind},
		{model.NetworkPolicy{Egress: model.EgressDeny, Allow: []string{"2001:db8::/32"}}, "", rules.NetAllowKind},
		{model.NetworkPolicy{Egress: model.EgressAllow, Allow: []string{"10.0.0.0/8"}}, "", rules.NetAllowWithOpen},
		{model.NetworkPolicy{Egress: model.EgressLearn}, "", rules.NetLearn},
		{model.NetworkPolicy{Egress: "open"}, "", rules.NetEgressMode},
	}
	for _, c := range cases {
		p := createPlan{spec: model.Spec{Network: c.n}}
		err := p.planEgress()
		var me *model.Error
		switch {
		case c.rule == "" && (err != nil || p.egress.mode != c.mode):
			t.Errorf("%+v: %v, mode %q", c.n, err, p.egress.mode)
		case c.rule != "" && (!errorsAs(err, &me) || me.Rule != c.rule || me.Class != model.ErrCapabilityNotSupported && me.Class != model.ErrConfiguration):
			t.Errorf("%+v: %v, want rule %s", c.n, err, c.rule)
		}
	}
	p := createPlan{spec: model.Spec{Network: model.NetworkPolicy{Egress: model.EgressDeny, Allow: []string{"10.1.2.3/8", "192.0.2.7"}}}}
	if err := p.planEgress(); err != nil || len(p.egress.allow) != 2 || p.egress.allow[0].String() != "10.0.0.0/8" || p.egress.allow[1].String() != "192.0.2.7/32" {
		t.Errorf("allow %v: %v", p.egress.allow, err)
	}
	args := strings.Join(lockArgs(lockCIDR, nil, p.egress.allow), " ")
	if args != "/wrap lock cidr --allow 10.0.0.0/8 --allow 192.0.2.7/32" {
		t.Errorf("lock args %q", args)
	}
}

func TestCIDROptions(t *testing.T) {
	for v, ok := range map[string]bool{"10.96.0.0/12": true, "10.96.0.0/12,10.244.0.0/16": true, "": false, "10.0.0.1": false, "::/0": false, "10.0.0.0/8,x": false} {
		if _, got := checkCIDRList(v); got != ok {
			t.Errorf("%q: %t", v, got)
		}
	}
}

// The run-time client opens a backend by the DSN's Target: the options
// Open reads must survive it, or a sandbox would get a lock without them.
func TestTargetKeepsNetworkOptions(t *testing.T) {
	d, err := backends.ParseDSN("kubernetes://ctx/ns?pod_cidr=10.0.0.0/8,10.1.0.0/16&service_cidr=10.96.0.0/12&runtime_class=gvisor")
	if err != nil {
		t.Fatal(err)
	}
	o := d.Target().Options
	if o["pod_cidr"] != "10.0.0.0/8,10.1.0.0/16" || o["service_cidr"] != "10.96.0.0/12" || o["runtime_class"] != "gvisor" {
		t.Errorf("target options %v", o)
	}
	if _, err := backends.ParseDSN("kubernetes://ctx/ns?pod_cidr=example.com"); err == nil {
		t.Error("a pod_cidr that is no CIDR was accepted")
	}
}

// The lockouts come from the nodes and the ServiceCIDR objects; a cluster
// whose pod ranges or service range cannot be learned is refused unless the
// DSN gives them. (client-go's own fake clientset serves the objects.)
func TestLockoutsLearned(t *testing.T) {
	node := func(name string, cidrs ...string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{PodCIDRs: cidrs},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2." + name[1:]}, {Type: corev1.NodeHostName, Address: name}}}}
	}
	svc := &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.96.0.0/16", "fd00::/108"}}}
	ctx := t.Context()
	b := &k8sBackend{cs: fake.NewClientset(node("n1", "10.244.0.0/24"), node("n2", "10.244.1.0/24"), svc)}
	lo, err := b.lockouts(ctx)
	if got := fmt.Sprint(lo); err != nil || got != "[10.244.0.0/24 10.244.1.0/24 10.96.0.0/16 192.0.2.1/32 192.0.2.2/32]" {
		t.Errorf("lockouts %s, %v", got, err)
	}
	b = &k8sBackend{cs: fake.NewClientset(node("n1", "10.244.0.0/24"), node("n2"), svc)}
	if _, err := b.lockouts(ctx); class(err) != model.ErrCapabilityNotSupported || !strings.Contains(err.Error(), "pod_cidr") {
		t.Errorf("a node without podCIDRs: %v", err)
	}
	b.netOpts.podCIDRs = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}
	if lo, err := b.lockouts(ctx); err != nil || !strings.Contains(fmt.Sprint(lo), "10.244.0.0/16") {
		t.Errorf("with pod_cidr: %v %v", lo, err)
	}
	b = &k8sBackend{cs: fake.NewClientset(node("n1"))}
	if _, err := b.lockouts(ctx); class(err) != model.ErrCapabilityNotSupported || !strings.Contains(err.Error(), "service_cidr") {
		t.Errorf("no ServiceCIDR: %v", err)
	}
	b.netOpts.serviceCIDRs = []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")}
	if _, err := b.lockouts(ctx); err != nil {
		t.Errorf("one node, service_cidr given: %v", err)
	}
}
