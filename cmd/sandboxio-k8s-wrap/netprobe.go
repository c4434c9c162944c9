//go:build linux

package main

// The egress probe's two sides (see the kubernetes package's egress.go):
// `listen PORT` accepts TCP connections and prints each peer's address;
// `netprobe TARGET...` runs in a pod under the lock, without capabilities,
// and prints, one line each, what it saw: a connect to ADDR:PORT (gw:PORT
// is the pod's gateway, the node's bridge address), a route lookup
// (route:IP), and the lock read back. It also tries to undo the lock, as
// code in a sandbox might, and prints the errors.

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
)

const netMarker = "\x1esandboxio-net\x1e "

func listen(args []string) int {
	if len(args) != 1 {
		return 2
	}
	l, err := net.Listen("tcp", ":"+args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "wrap listen:", err)
		return 1
	}
	fmt.Printf("%slistening=%s\n", netMarker, l.Addr())
	for {
		c, err := l.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, "wrap listen:", err)
			return 1
		}
		if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
			fmt.Printf("%saccept=%s\n", netMarker, a.IP)
		}
		_ = c.Close()
	}
}

func netprobe(args []string) int {
	gw, _, _ := gateway()
	if !gw.IsValid() {
		gw = lockedGateway()
	}
	fmt.Printf("%sgateway=%s\n", netMarker, gw)
	fmt.Printf("%sself=%s\n", netMarker, selfAddrs())
	fmt.Printf("%slock=%s\n", netMarker, lockState())
	fmt.Printf("%slinks_up=%s\n", netMarker, linksUp())
	for _, t := range args {
		if ip, ok := strings.CutPrefix(t, "route:"); ok {
			fmt.Printf("%sroute:%s=%s\n", netMarker, ip, routeTo(ip))
			continue
		}
		addr := t
		if port, ok := strings.CutPrefix(t, "gw:"); ok {
			if !gw.IsValid() {
				fmt.Printf("%sconnect:%s=no-gateway\n", netMarker, t)
				continue
			}
			addr = net.JoinHostPort(gw.String(), port)
		}
		fmt.Printf("%sconnect:%s=%s\n", netMarker, t, connect(addr))
	}
	fmt.Printf("%sundo=%s\n", netMarker, undo())
	return 0
}

// connect reports "ok" or why the connection failed.
func connect(addr string) string {
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err == nil {
		_ = c.Close()
		return "ok"
	}
	for _, e := range []syscall.Errno{syscall.ENETUNREACH, syscall.EHOSTUNREACH, syscall.ECONNREFUSED, syscall.EPERM, syscall.EACCES} {
		if errors.Is(err, e) {
			return strings.ReplaceAll(e.Error(), " ", "_")
		}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	return "error"
}

// routeTo is the kernel's route for ip: "via GW", "dev NAME" or the error
// (an unreachable route is ENETUNREACH or EHOSTUNREACH).
func routeTo(ip string) string {
	dst := net.ParseIP(ip)
	if dst == nil {
		return "bad-address"
	}
	rs, err := netlink.RouteGet(dst)
	if err != nil {
		for _, e := range []syscall.Errno{syscall.ENETUNREACH, syscall.EHOSTUNREACH} {
			if errors.Is(err, e) {
				return "unreachable"
			}
		}
		return "error"
	}
	if len(rs) == 0 {
		return "none"
	}
	if rs[0].Gw != nil {
		return "via_" + rs[0].Gw.String()
	}
	return "direct"
}

// undo tries what code in the sandbox would try to lift the lock: delete
// the lock's rule, bring every link up, add a default route. Each must be
// refused (EPERM) for the lock to hold.
func undo() string {
	var out []string
	r := netlink.NewRule()
	r.Priority, r.Table, r.Family = lockPref, lockTable, netlink.FAMILY_V4
	out = append(out, "ruledel:"+errName(netlink.RuleDel(r)))
	links, _ := netlink.LinkList()
	for _, l := range links {
		if l.Attrs().Flags&net.FlagLoopback == 0 {
			out = append(out, "linkup_"+l.Attrs().Name+":"+errName(netlink.LinkSetUp(l)))
		}
	}
	_, all, _ := net.ParseCIDR("0.0.0.0/1")
	out = append(out, "routeadd:"+errName(netlink.RouteAdd(&netlink.Route{Dst: all, Type: syscall.RTN_UNREACHABLE})))
	return strings.Join(out, ",")
}

func errName(err error) string {
	switch {
	case err == nil:
		return "done"
	case errors.Is(err, syscall.EPERM):
		return "eperm"
	case errors.Is(err, syscall.EACCES):
		return "eacces"
	}
	return "error"
}

// selfAddrs are this pod's IPv4 addresses other than loopback.
func selfAddrs() string {
	var out []string
	addrs, _ := netlink.AddrList(nil, netlink.FAMILY_V4)
	for _, a := range addrs {
		if !a.IP.IsLoopback() {
			out = append(out, a.IP.String())
		}
	}
	return strings.Join(out, ",")
}
