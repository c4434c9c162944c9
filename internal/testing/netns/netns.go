//go:build linux

// Package netns makes network namespaces for tests: an empty "sandbox"
// namespace and an "outside" one reached from the host over a veth, where
// tests run their servers. Only addresses from the benchmarking ranges
// (198.18.0.0/15, 2001:2::/48) are used, and everything is removed when the
// test ends, also when it fails.
package netns

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/nsthread"
)

// Addresses of the lab.
var (
	Host4    = netip.MustParseAddr("198.18.0.1") // the host side of the veth (/32)
	Outside4 = netip.MustParsePrefix("198.18.1.0/24")
	Host6    = netip.MustParseAddr("2001:2::1")
	Outside6 = netip.MustParsePrefix("2001:2:0:1::/64")
)

// Lab is one sandbox namespace and one outside namespace.
type Lab struct {
	Sandbox string // name of the empty sandbox namespace (only lo)
	Outside string // name of the outside namespace
	// SandboxFD is an open descriptor of the sandbox namespace.
	SandboxFD int
	outsideFD int
}

// lockPath serialises labs across processes: the host routes they add
// would collide.
const lockPath = "/tmp/sandboxio-netns.lock"

// Require skips t unless the lab can be made (root and ip(8)); under
// SANDBOXIO_REQUIRE_NETNS=1 it fails instead.
func Require(t testing.TB) {
	t.Helper()
	reason := ""
	if os.Geteuid() != 0 {
		reason = "needs root to create network namespaces"
	} else if _, err := exec.LookPath("ip"); err != nil {
		reason = "needs ip(8) (iproute2) to create network namespaces"
	} else if _, err := os.Stat("/dev/net/tun"); err != nil {
		reason = "needs /dev/net/tun"
	}
	if reason == "" {
		return
	}
	if os.Getenv("SANDBOXIO_REQUIRE_NETNS") == "1" {
		t.Fatalf("SANDBOXIO_REQUIRE_NETNS=1 but the test %s", reason)
	}
	t.Skip("skipped: the test " + reason + " (set SANDBOXIO_REQUIRE_NETNS=1 to fail instead)")
}

// New makes a lab; outside addresses (each a /32 or /128 on the outside
// end of the veth) are given by the caller, all inside Outside4/Outside6.
func New(t testing.TB, outside ...netip.Addr) *Lab {
	t.Helper()
	Require(t)
	lf, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lf.Close() })
	id := randomHex(4)
	l := &Lab{Sandbox: "sbxs-" + id, Outside: "sbxo-" + id, SandboxFD: -1, outsideFD: -1}
	hostIf, outIf := "sbxh"+id, "sbxi"+id
	t.Cleanup(func() {
		if l.SandboxFD >= 0 {
			unix.Close(l.SandboxFD)
		}
		if l.outsideFD >= 0 {
			unix.Close(l.outsideFD)
		}
		// Deleting the namespaces removes the veth (both ends), and with
		// the host end its address and routes.
		_ = exec.Command("ip", "netns", "del", l.Sandbox).Run()
		_ = exec.Command("ip", "netns", "del", l.Outside).Run()
		_ = exec.Command("ip", "link", "del", hostIf).Run()
	})
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	run("netns", "add", l.Sandbox)
	run("netns", "add", l.Outside)
	run("link", "add", hostIf, "type", "veth", "peer", "name", outIf, "netns", l.Outside)
	run("addr", "add", Host4.String()+"/32", "dev", hostIf)
	run("-6", "addr", "add", Host6.String()+"/128", "dev", hostIf, "nodad")
	run("link", "set", hostIf, "up")
	run("route", "add", Outside4.String(), "dev", hostIf, "src", Host4.String())
	run("-6", "route", "add", Outside6.String(), "dev", hostIf, "src", Host6.String())
	o := []string{"-n", l.Outside}
	run(append(o, "link", "set", "lo", "up")...)
	run(append(o, "link", "set", outIf, "up")...)
	for _, a := range outside {
		if a.Is4() {
			if !Outside4.Contains(a) {
				t.Fatalf("netns: %s is not in %s", a, Outside4)
			}
			run(append(o, "addr", "add", a.String()+"/32", "dev", outIf)...)
		} else {
			if !Outside6.Contains(a) {
				t.Fatalf("netns: %s is not in %s", a, Outside6)
			}
			run(append(o, "-6", "addr", "add", a.String()+"/128", "dev", outIf, "nodad")...)
		}
	}
	run(append(o, "route", "add", Host4.String()+"/32", "dev", outIf)...)
	run(append(o, "-6", "route", "add", Host6.String()+"/128", "dev", outIf)...)
	run("-n", l.Sandbox, "link", "set", "lo", "up")
	if l.SandboxFD, err = unix.Open("/run/netns/"+l.Sandbox, unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
		t.Fatal(err)
	}
	if l.outsideFD, err = unix.Open("/run/netns/"+l.Outside, unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
		t.Fatal(err)
	}
	return l
}

// In runs f on an OS thread moved into the namespace fd and waits for it
// (see nsthread: the thread is returned to this process's namespace after).
// Sockets f creates stay in the namespace and may be used from any
// goroutine.
func In(fd int, f func() error) error { return nsthread.Run(fd, f) }

// InSandbox runs f in the sandbox namespace (see In).
func (l *Lab) InSandbox(f func() error) error { return In(l.SandboxFD, f) }

// InOutside runs f in the outside namespace (see In).
func (l *Lab) InOutside(f func() error) error { return In(l.outsideFD, f) }

// ListenOutside listens in the outside namespace.
func (l *Lab) ListenOutside(network, addr string) (net.Listener, error) {
	var ln net.Listener
	err := l.InOutside(func() (err error) { ln, err = net.Listen(network, addr); return })
	return ln, err
}

// ListenPacketOutside listens for datagrams in the outside namespace.
func (l *Lab) ListenPacketOutside(network, addr string) (net.PacketConn, error) {
	var pc net.PacketConn
	err := l.InOutside(func() (err error) { pc, err = net.ListenPacket(network, addr); return })
	return pc, err
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
