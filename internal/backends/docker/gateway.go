package docker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/docker/docker/api/types/network"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker/egress"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker/egress/broker"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// ErrGatewayDown is wrapped by the error of a call that needed the egress
// gateway when it could not be started or has ended. The sandbox then has
// no network at all: the gateway's device goes with it, and nothing falls
// back to a bridge.
var ErrGatewayDown = errors.New("egress gateway down")

// resolvConf is read for the gateway's DNS server when the DSN names none.
var resolvConf = "/etc/resolv.conf"

// attachGateway gives a started deny sandbox its egress gateway. A sandbox
// whose gateway cannot start is removed: it would be a deny sandbox that
// its template says can reach its allow list.
func (b *dockerBackend) attachGateway(ctx context.Context, s *sandbox, p createPlan) error {
	g, err := b.startGateway(ctx, s.id, p)
	if err != nil {
		b.discard(ctx, s.id, s.name)
		return fmt.Errorf("%w: %w", ErrGatewayDown, err)
	}
	s.gw = g
	return nil
}

// editGatewayConfig, set only by tests, edits each gateway's configuration:
// the proof's own test makes a gateway that forwards what it must not.
var editGatewayConfig func(*egress.GatewayConfig)

func (b *dockerBackend) startGateway(ctx context.Context, id string, p createPlan) (*egress.Gateway, error) {
	cfg := egress.GatewayConfig{Rules: p.gwRules, Broker: p.broker, BrokerRoots: p.brokerRoots}
	if p.broker != nil && p.onBrokered != nil {
		cfg.OnBrokered = func(r broker.Request) { p.onBrokered(brokeredRequest(r)) }
	}
	if p.gwProbe != nil {
		cfg.Resolver, cfg.Dialer = p.gwProbe.resolver, p.gwProbe.dial
	} else {
		r, err := gatewayResolver(p.resolver)
		if err != nil {
			return nil, err
		}
		cfg.Resolver = r
	}
	never, err := b.networkSubnets(ctx)
	if err != nil {
		return nil, err
	}
	cfg.Never = never
	if editGatewayConfig != nil {
		editGatewayConfig(&cfg)
	}
	ins, err := b.cli.ContainerInspect(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("container inspect: %w", err)
	}
	if ins.State == nil || !ins.State.Running || ins.HostConfig == nil || ins.HostConfig.NetworkMode != "none" {
		return nil, fmt.Errorf("the container is not running in network mode none")
	}
	return egress.AttachGateway(ins.State.Pid, id, cfg)
}

// checkGatewayEntries refuses, at apply, the allow-list entries the gateway
// on this host would never forward to (egress.CheckEntries): they would be
// accepted and then never work.
func (b *dockerBackend) checkGatewayEntries(ctx context.Context, p createPlan) error {
	res, err := gatewayResolver(p.resolver)
	if err != nil {
		return err
	}
	never, err := b.networkSubnets(ctx)
	if err != nil {
		return err
	}
	bad := egress.CheckEntries(ctx, egress.GatewayConfig{Rules: p.gwRules, Resolver: res, Never: never})
	if len(bad) == 0 {
		return nil
	}
	var each []string
	for _, u := range bad {
		each = append(each, fmt.Sprintf("%q: %s", u.Entry, u.Why))
	}
	return backends.RuleRefusal(rules.NetNever, "network.allow", "the egress gateway on this host would never forward to "+strings.Join(each, "; "))
}

// gatewayResolver is the DNS server the gateway asks: the DSN's resolver
// option, else the first nameserver of the host's resolv.conf that is not
// a loopback address (a stub resolver on the host's loopback answers the
// host's own names too).
func gatewayResolver(opt string) (netip.AddrPort, error) {
	if opt != "" {
		ap, err := netip.ParseAddrPort(opt)
		if err != nil {
			return ap, &model.Error{Class: model.ErrConfiguration, Attribute: "backend",
				Message: "the DSN's resolver option is not an IP address and port", Fix: "write it as resolver=IP:PORT, for example resolver=198.18.1.53:53"}
		}
		return ap, nil
	}
	f, err := os.Open(resolvConf)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("no resolver option and %s unreadable: %w", resolvConf, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || fields[0] != "nameserver" {
			continue
		}
		a, err := netip.ParseAddr(fields[1])
		if err != nil || a.IsLoopback() || a.Zone() != "" {
			continue
		}
		return netip.AddrPortFrom(a.Unmap(), 53), nil
	}
	return netip.AddrPort{}, &model.Error{Class: model.ErrConfiguration, Attribute: "backend",
		Message: fmt.Sprintf("the egress gateway has no DNS server: no resolver option, and %s names none off the loopback", resolvConf),
		Fix:     "add resolver=IP:PORT to the backend DSN (docker://?egress=gateway&resolver=IP:53)"}
}

// networkSubnets are the subnets of the daemon's networks: other sandboxes
// and containers live there, so the gateway never dials into them,
// whatever the allow list says.
func (b *dockerBackend) networkSubnets(ctx context.Context) ([]netip.Prefix, error) {
	list, err := b.cli.NetworkList(ctx, network.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("network list: %w", err)
	}
	var out []netip.Prefix
	for _, n := range list {
		for _, c := range n.IPAM.Config {
			if pf, err := netip.ParsePrefix(c.Subnet); err == nil {
				out = append(out, pf.Masked())
			}
		}
	}
	return out, nil
}

// gatewayUp refuses a call in a sandbox whose gateway has ended while the
// sandbox runs on: its allow list is no longer reachable, and the call
// would fail in ways that look like the network's fault.
func (s *sandbox) gatewayUp() error {
	if s.gw == nil {
		return nil
	}
	select {
	case <-s.gw.Done():
		return &model.Error{Class: model.ErrSandboxGone, Attribute: "network.allow",
			Message: fmt.Sprintf("sandbox %s lost its egress gateway: it has no network now", short(s.id)),
			Fix:     "open a new sandbox", Err: ErrGatewayDown}
	default:
		return nil
	}
}
