//go:build linux

package main

// The network lock: the init container holding NET_ADMIN runs `wrap lock` in
// the pod's network namespace before the capability-less sandbox starts. It is
// policy routing over netlink alone (no NetworkPolicy enforcer, iptables or
// kernel module): rule 100 makes the pod network, services, nodes, gateway and
// all of IPv6 unreachable (lockTable), before rule 101's allowed CIDRs and
// unreachable default (allowTable, deny and cidr), so no allow entry reopens
// them. See docs/design/kubernetes-backend.md.

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

const (
	lockTable  = 145
	allowTable = 146
	lockPref   = 100
	allowPref  = 101
	gwMetric   = 1456
)

// lockArgs is `lock MODE [--lockout CIDR]... [--allow CIDR]... [--noop]`.
type lockArgs struct {
	mode     string // deny, cidr or allow
	lockouts []netip.Prefix
	allow    []netip.Prefix
	noop     bool // a test hook: report, change nothing
}

func parseLockArgs(args []string) (lockArgs, error) {
	var a lockArgs
	if len(args) == 0 {
		return a, errors.New("no mode")
	}
	a.mode = args[0]
	if a.mode != "deny" && a.mode != "cidr" && a.mode != "allow" {
		return a, fmt.Errorf("mode %q", a.mode)
	}
	for i := 1; i < len(args); i++ {
		switch args[i] {
		case "--noop":
			a.noop = true
			continue
		case "--lockout", "--allow":
		default:
			return a, fmt.Errorf("argument %q", args[i])
		}
		if i+1 >= len(args) {
			return a, fmt.Errorf("%s needs a CIDR", args[i])
		}
		p, err := netip.ParsePrefix(args[i+1])
		if err != nil {
			return a, err
		}
		if args[i] == "--allow" {
			a.allow = append(a.allow, p.Masked())
		} else {
			a.lockouts = append(a.lockouts, p.Masked())
		}
		i++
	}
	if a.mode != "cidr" && len(a.allow) > 0 {
		return a, errors.New("--allow is for mode cidr only")
	}
	return a, nil
}

// lock applies the lock and prints what it did; any failure exits non-zero,
// so the pod never starts its sandbox container unlocked.
func lock(args []string) int {
	a, err := parseLockArgs(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "wrap lock:", err)
		return 2
	}
	gw, link, err := gateway()
	if err != nil {
		fmt.Fprintln(os.Stderr, "wrap lock:", err)
		return 1
	}
	lockouts := dedupe(append(onLink(), a.lockouts...))
	fmt.Printf("\x1esandboxio-lock\x1e mode=%s gateway=%s lockouts=%s allow=%s noop=%t\n", a.mode, gw, joinPrefixes(lockouts), joinPrefixes(a.allow), a.noop)
	if a.noop {
		return 0
	}
	if err := applyLock(a, gw, link, lockouts); err != nil {
		fmt.Fprintln(os.Stderr, "wrap lock:", err)
		return 1
	}
	return 0
}

func applyLock(a lockArgs, gw netip.Addr, link int, lockouts []netip.Prefix) error {
	if gw.IsValid() {
		// The gateway's own route carries a metric of its own, so that the
		// probe finds the node's bridge address once the links are down.
		r := &netlink.Route{Table: lockTable, Dst: ipNet(netip.PrefixFrom(gw, 32)), Type: unix.RTN_UNREACHABLE, Priority: gwMetric}
		if err := netlink.RouteAdd(r); err != nil {
			return fmt.Errorf("unreachable gateway %s: %w", gw, err)
		}
	}
	for _, p := range lockouts {
		if err := unreachable(lockTable, p); err != nil {
			return err
		}
	}
	if err := unreachable(lockTable, netip.MustParsePrefix("::/0")); err != nil {
		return err
	}
	if err := addRule(lockPref, lockTable, netlink.FAMILY_V4); err != nil {
		return err
	}
	if err := addRule(lockPref, lockTable, netlink.FAMILY_V6); err != nil {
		return err
	}
	if a.mode == "allow" {
		return nil
	}
	for _, p := range a.allow {
		if !gw.IsValid() {
			return errors.New("no default gateway to route the allow list through")
		}
		r := &netlink.Route{Table: allowTable, Dst: ipNet(p), Gw: net.IP(gw.AsSlice()), LinkIndex: link, Flags: int(netlink.FLAG_ONLINK)}
		if err := netlink.RouteAdd(r); err != nil {
			return fmt.Errorf("route %s via %s onlink: %w", p, gw, err)
		}
	}
	if err := unreachable(allowTable, netip.MustParsePrefix("0.0.0.0/0")); err != nil {
		return err
	}
	if err := addRule(allowPref, allowTable, netlink.FAMILY_V4); err != nil {
		return err
	}
	if a.mode == "deny" {
		return linksDown()
	}
	return nil
}

func unreachable(table int, p netip.Prefix) error {
	r := &netlink.Route{Table: table, Dst: ipNet(p), Type: unix.RTN_UNREACHABLE}
	if err := netlink.RouteAdd(r); err != nil {
		return fmt.Errorf("unreachable %s table %d: %w", p, table, err)
	}
	return nil
}

func addRule(pref, table, family int) error {
	r := netlink.NewRule()
	r.Priority, r.Table, r.Family = pref, table, family
	if err := netlink.RuleAdd(r); err != nil {
		return fmt.Errorf("rule %d lookup %d: %w", pref, table, err)
	}
	return nil
}

// linksDown sets every link but loopback down; their routes go with them.
func linksDown() error {
	links, err := netlink.LinkList()
	if err != nil {
		return err
	}
	for _, l := range links {
		if l.Attrs().Flags&net.FlagLoopback != 0 {
			continue
		}
		if err := netlink.LinkSetDown(l); err != nil {
			return fmt.Errorf("link %s down: %w", l.Attrs().Name, err)
		}
	}
	return nil
}

// gateway is the IPv4 default route's next hop and link (invalid if none).
func gateway() (netip.Addr, int, error) {
	routes, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return netip.Addr{}, 0, fmt.Errorf("routes: %w", err)
	}
	for _, r := range routes {
		if (r.Dst == nil || r.Dst.IP.IsUnspecified()) && r.Gw != nil {
			if a, ok := netip.AddrFromSlice(r.Gw.To4()); ok {
				return a, r.LinkIndex, nil
			}
		}
	}
	return netip.Addr{}, 0, nil
}

// lockedGateway is the gateway the lock recorded (its unreachable route
// with gwMetric), for a pod whose links are down.
func lockedGateway() netip.Addr {
	routes, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: lockTable}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return netip.Addr{}
	}
	for _, r := range routes {
		if r.Priority == gwMetric && r.Dst != nil {
			if a, ok := netip.AddrFromSlice(r.Dst.IP.To4()); ok {
				return a
			}
		}
	}
	return netip.Addr{}
}

// onLink is the IPv4 subnets of the pod's non-loopback addresses: the pod
// network as this pod sees it.
func onLink() []netip.Prefix {
	var out []netip.Prefix
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if a.IP.IsLoopback() {
			continue
		}
		ip, ok := netip.AddrFromSlice(a.IP.To4())
		ones, _ := a.Mask.Size()
		if ok {
			out = append(out, netip.PrefixFrom(ip, ones).Masked())
		}
	}
	return out
}

func ipNet(p netip.Prefix) *net.IPNet {
	bits := p.Addr().BitLen()
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), bits)}
}

func dedupe(ps []netip.Prefix) []netip.Prefix {
	seen := map[netip.Prefix]bool{}
	var out []netip.Prefix
	for _, p := range ps {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

func joinPrefixes(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ",")
}

// lockState reads the lock back without privilege (netlink dumps need
// none): "deny", "cidr:N" (N allowed routes), "allow", or "none" with why.
func lockState() string {
	has := func(family, pref, table int) bool {
		rules, err := netlink.RuleList(family)
		if err != nil {
			return false
		}
		for _, r := range rules {
			if r.Priority == pref && r.Table == table {
				return true
			}
		}
		return false
	}
	if !has(netlink.FAMILY_V4, lockPref, lockTable) || !has(netlink.FAMILY_V6, lockPref, lockTable) {
		return "none"
	}
	if !has(netlink.FAMILY_V4, allowPref, allowTable) {
		return "allow"
	}
	routes, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: allowTable}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return "none:" + err.Error()
	}
	n, def := 0, false
	for _, r := range routes {
		switch {
		case r.Type == unix.RTN_UNREACHABLE && (r.Dst == nil || r.Dst.IP.IsUnspecified()):
			def = true
		case r.Type == unix.RTN_UNICAST:
			n++
		}
	}
	if !def {
		return "none:no-default-unreachable"
	}
	if n == 0 && linksUp() == "lo" {
		return "deny"
	}
	return "cidr:" + strconv.Itoa(n)
}

// linksUp lists the links that are administratively up.
func linksUp() string {
	links, err := netlink.LinkList()
	if err != nil {
		return "-"
	}
	var up []string
	for _, l := range links {
		if l.Attrs().Flags&net.FlagUp != 0 {
			up = append(up, l.Attrs().Name)
		}
	}
	sort.Strings(up)
	return strings.Join(up, ",")
}
