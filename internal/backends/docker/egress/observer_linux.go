package egress

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/nsthread"
)

// Interface is the observer's device as the sandbox sees it.
const Interface = "egress0"

// The sandbox's own addresses on Interface. IPv4: the IPv4 dummy address
// (RFC 7600), meant for hosts with no address of their own; a documentation
// address would not do, since hosts use those too (this project's machines
// have 192.0.2.2), and a host address that is also the sandbox's own is one
// the sandbox reaches on its loopback, unobserved. IPv6: the documentation
// prefix (RFC 3849). Either routes nowhere.
var (
	sandboxAddr4 = netip.MustParseAddr("192.0.0.8")
	sandboxAddr6 = netip.MustParseAddr("2001:db8::2")
)

// The observer's device keeps Ethernet's MTU, and readBuf bounds one of its
// reads. The sandbox cannot raise the MTU (it has no CAP_NET_ADMIN); a
// longer packet would be cut and then refused by the parser's length checks.
const (
	observerMTU = 1500
	readBuf     = 4096
)

// closeWait bounds how long Close waits for the reader to notice.
const closeWait = 200 * time.Millisecond

// Observer reads and answers what one sandbox sends to its egress device.
type Observer struct {
	f       *os.File
	rec     *Record
	done    chan struct{}
	closing sync.Once
	// IPv6 says whether the sandbox got an IPv6 default route into the
	// observer (false where IPv6 is disabled in its namespace: there it has
	// no IPv6 route at all).
	IPv6 bool
}

// Attach gives the network namespace of process pid, which must belong to
// container id and must not be this process's own, a TUN device holding its
// default routes, and starts observing it. The namespace must hold only the
// loopback interface (Docker's network mode none). The device is created in
// this process's namespace and moved there, so that its file, held here,
// keeps no reference to the sandbox's namespace: when the container ends,
// its namespace goes, the device with it, and the reader ends.
func Attach(pid int, id string) (*Observer, error) {
	nsfd, err := sandboxNetns(pid, id)
	if err != nil {
		return nil, err
	}
	defer unix.Close(nsfd)
	f, v6, err := attachNetns(nsfd, observerMTU, false)
	if err != nil {
		return nil, err
	}
	o := &Observer{f: f, rec: NewRecord(), done: make(chan struct{}), IPv6: v6}
	go o.read()
	return o, nil
}

// attachNetns gives the network namespace nsfd a TUN device named Interface
// holding its default routes, and returns the device's file (non-blocking)
// and whether IPv6 is routed into it too. The observer and the gateway share
// it, each with its own MTU; the gateway's device puts a virtio-net header
// before each packet (vnetHdr). nsfd stays the caller's.
func attachNetns(nsfd int, mtu uint32, vnetHdr bool) (*os.File, bool, error) {
	tmp := "sbxe" + randomHex(5)
	f, err := openTUN(tmp, vnetHdr)
	if err != nil {
		return nil, false, err
	}
	v6, err := configure(tmp, nsfd, mtu)
	if err != nil {
		f.Close()
		return nil, false, err
	}
	return f, v6, nil
}

// sandboxNetns opens the network namespace of pid after checking that pid
// is a process of container id and that the namespace is not this
// process's own (never give the host a default route into a TUN device).
func sandboxNetns(pid int, id string) (int, error) {
	if pid <= 0 || len(id) < 12 {
		return -1, fmt.Errorf("egress observer: no process of the container to attach to")
	}
	p := "/proc/" + strconv.Itoa(pid)
	nsfd, err := unix.Open(p+"/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("egress observer: %w", err)
	}
	// Checked after the open: the namespace held is that of the process
	// whose cgroup names the container, not of a process that took its pid.
	cg, err := os.ReadFile(p + "/cgroup")
	if err != nil || !strings.Contains(string(cg), id) {
		unix.Close(nsfd)
		return -1, fmt.Errorf("egress observer: process %d is not in container %s", pid, id[:12])
	}
	var theirs, ours unix.Stat_t
	if err := unix.Fstat(nsfd, &theirs); err != nil {
		unix.Close(nsfd)
		return -1, fmt.Errorf("egress observer: %w", err)
	}
	if err := unix.Stat("/proc/self/ns/net", &ours); err != nil || (theirs.Ino == ours.Ino && theirs.Dev == ours.Dev) {
		unix.Close(nsfd)
		return -1, fmt.Errorf("egress observer: container %s shares this process's network namespace", id[:12])
	}
	return nsfd, nil
}

func openTUN(name string, vnetHdr bool) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("egress observer: %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("egress observer: %w", err)
	}
	flags := uint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if vnetHdr {
		flags |= unix.IFF_VNET_HDR
	}
	ifr.SetUint16(flags)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("egress observer: TUNSETIFF: %w", err)
	}
	// Non-blocking, so the runtime's poller serves reads and Close ends a
	// read in progress.
	return os.NewFile(uintptr(fd), "/dev/net/tun"), nil
}

// configure moves the device tmp into the namespace and gives it the
// sandbox's default routes.
func configure(tmp string, nsfd int, mtu uint32) (bool, error) {
	ifc, err := net.InterfaceByName(tmp)
	if err != nil {
		return false, fmt.Errorf("egress observer: %w", err)
	}
	host, err := socket(-1)
	if err != nil {
		return false, err
	}
	err = host.moveTo(int32(ifc.Index), nsfd)
	host.close()
	if err != nil {
		return false, fmt.Errorf("egress observer: move into the sandbox: %w", err)
	}
	nl, err := socket(nsfd)
	if err != nil {
		return false, err
	}
	defer nl.close()
	links, err := nl.links()
	if err != nil {
		return false, fmt.Errorf("egress observer: list interfaces: %w", err)
	}
	idx := int32(-1)
	var names []string
	for i, n := range links {
		names = append(names, n)
		if n == tmp {
			idx = i
		}
	}
	slices.Sort(names)
	// The sandbox must have had nothing but loopback: an interface that
	// reaches the host or another container would make this no deny.
	if idx < 0 || len(names) != 2 || !slices.Contains(names, "lo") {
		return false, fmt.Errorf("egress observer: the sandbox's namespace holds %s, not only lo and the observer", strings.Join(names, ", "))
	}
	if err := nl.rename(idx, Interface); err != nil {
		return false, fmt.Errorf("egress observer: rename: %w", err)
	}
	// Best effort: without it the kernel's own IPv6 chatter on the link is
	// still told apart from attempts (see Inspect).
	_ = nl.noAddrGen(idx)
	if err := nl.setMTU(idx, mtu); err != nil {
		return false, fmt.Errorf("egress observer: mtu: %w", err)
	}
	if err := nl.up(idx); err != nil {
		return false, fmt.Errorf("egress observer: link up: %w", err)
	}
	if err := nl.addAddr(idx, sandboxAddr4); err != nil {
		return false, fmt.Errorf("egress observer: address: %w", err)
	}
	if err := nl.defaultRoute(idx, false); err != nil {
		return false, fmt.Errorf("egress observer: route: %w", err)
	}
	// Docker disables IPv6 in a container without an IPv6 network. On the
	// observer's device it is enabled again, so that IPv6 attempts are
	// observed too (they can reach nothing else either way); where that
	// fails the sandbox has no IPv6 route, its IPv6 attempts fail in its own
	// kernel and are not counted (IPv6 false).
	return enableIPv6(nsfd, Interface) == nil && nl.addAddr(idx, sandboxAddr6) == nil && nl.defaultRoute(idx, true) == nil, nil
}

// socket opens a route netlink socket in the namespace nsfd (-1: this
// process's). Only the socket is made there (see nsthread).
func socket(nsfd int) (*rtnl, error) {
	fd := -1
	mk := func() (err error) {
		fd, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
		return err
	}
	var err error
	if nsfd >= 0 {
		err = nsthread.Run(nsfd, mk)
	} else {
		err = mk()
	}
	if err != nil {
		return nil, fmt.Errorf("egress observer: netlink: %w", err)
	}
	return newRtnl(fd)
}

// enableIPv6 clears disable_ipv6 for the interface name in the namespace
// nsfd. The net sysctls a thread opens are those of its network namespace,
// so the file is opened from a thread moved into it.
func enableIPv6(nsfd int, name string) error {
	return nsthread.Run(nsfd, func() error {
		return os.WriteFile("/proc/sys/net/ipv6/conf/"+name+"/disable_ipv6", []byte("0\n"), 0)
	})
}

// read records and answers packets until the device goes: Close, or the
// sandbox's namespace ending with its container.
func (o *Observer) read() {
	defer close(o.done)
	defer o.f.Close()
	buf := make([]byte, readBuf)
	out := make([]byte, 0, 512)
	for {
		n, err := o.f.Read(buf)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return
		}
		a, ok, reply := Inspect(buf[:n], out[:0])
		if ok {
			o.rec.Add(a)
		}
		if reply != nil {
			// Not written is only a slower failure for the sandbox.
			_, _ = o.f.Write(reply)
		}
	}
}

// Record is what the observer has seen so far; it stays readable after
// Close.
func (o *Observer) Record() *Record { return o.rec }

// Close stops the observer and releases the device; it waits a moment for
// the reader, never longer. Idempotent.
func (o *Observer) Close() {
	o.closing.Do(func() { _ = o.f.Close() })
	select {
	case <-o.done:
	case <-time.After(closeWait):
	}
}

// Done is closed when the reader has ended.
func (o *Observer) Done() <-chan struct{} { return o.done }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
