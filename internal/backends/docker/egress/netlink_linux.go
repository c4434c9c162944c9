package egress

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rtnl is a route netlink socket, bound to the network namespace it was
// created in. Only the kernel answers on it, but its answers are still
// checked for length before use.
type rtnl struct {
	fd  int
	seq uint32
}

var rtnlSeq atomic.Uint32

func newRtnl(fd int) (*rtnl, error) {
	tv := unix.NsecToTimeval((2 * time.Second).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netlink: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netlink bind: %w", err)
	}
	return &rtnl{fd: fd, seq: rtnlSeq.Add(1000)}, nil
}

func (r *rtnl) close() { unix.Close(r.fd) }

// msg builds one netlink request: header, fixed part, attributes.
type msg struct{ b []byte }

func newMsg(typ, flags uint16, fixed []byte) *msg {
	m := &msg{b: make([]byte, unix.SizeofNlMsghdr, 128)}
	binary.NativeEndian.PutUint16(m.b[4:6], typ)
	binary.NativeEndian.PutUint16(m.b[6:8], flags|unix.NLM_F_REQUEST)
	m.b = append(m.b, fixed...)
	return m
}

func (m *msg) attr(typ uint16, data []byte) *msg {
	var h [4]byte
	binary.NativeEndian.PutUint16(h[0:2], uint16(4+len(data)))
	binary.NativeEndian.PutUint16(h[2:4], typ)
	m.b = append(m.b, h[:]...)
	m.b = append(m.b, data...)
	for len(m.b)%4 != 0 {
		m.b = append(m.b, 0)
	}
	return m
}

func u32(v uint32) []byte {
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], v)
	return b[:]
}

// do sends m and reads the answer: for a request with NLM_F_ACK the
// kernel's acknowledgement (its error, if any); for a dump every message
// until NLMSG_DONE, each passed to each.
func (r *rtnl) do(m *msg, each func(typ uint16, body []byte)) error {
	r.seq++
	binary.NativeEndian.PutUint32(m.b[0:4], uint32(len(m.b)))
	binary.NativeEndian.PutUint32(m.b[8:12], r.seq)
	if err := unix.Sendto(r.fd, m.b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 32<<10)
	for {
		n, _, err := unix.Recvfrom(r.fd, buf, 0)
		if err != nil {
			return err
		}
		b := buf[:n]
		for len(b) >= unix.SizeofNlMsghdr {
			l := int(binary.NativeEndian.Uint32(b[0:4]))
			if l < unix.SizeofNlMsghdr || l > len(b) {
				return fmt.Errorf("netlink: malformed answer")
			}
			typ := binary.NativeEndian.Uint16(b[4:6])
			seq := binary.NativeEndian.Uint32(b[8:12])
			body := b[unix.SizeofNlMsghdr:l]
			b = b[min(nlAlign(l), len(b)):]
			if seq != r.seq {
				continue
			}
			switch typ {
			case unix.NLMSG_DONE:
				return nil
			case unix.NLMSG_ERROR:
				if len(body) < 4 {
					return fmt.Errorf("netlink: malformed error")
				}
				if e := int32(binary.NativeEndian.Uint32(body[0:4])); e != 0 {
					return unix.Errno(-e)
				}
				return nil
			}
			if each != nil {
				each(typ, body)
			}
		}
	}
}

func nlAlign(n int) int { return (n + 3) &^ 3 }

func ifinfo(index int32, flags, change uint32) []byte {
	var b [unix.SizeofIfInfomsg]byte
	m := (*unix.IfInfomsg)(unsafe.Pointer(&b[0]))
	m.Family = unix.AF_UNSPEC
	m.Index, m.Flags, m.Change = index, flags, change
	return b[:]
}

// links lists the namespace's interfaces by index.
func (r *rtnl) links() (map[int32]string, error) {
	out := map[int32]string{}
	err := r.do(newMsg(unix.RTM_GETLINK, unix.NLM_F_DUMP, ifinfo(0, 0, 0)), func(typ uint16, body []byte) {
		if typ != unix.RTM_NEWLINK || len(body) < unix.SizeofIfInfomsg {
			return
		}
		idx := int32(binary.NativeEndian.Uint32(body[4:8]))
		name := "?"
		for a := body[unix.SizeofIfInfomsg:]; len(a) >= 4; {
			l := int(binary.NativeEndian.Uint16(a[0:2]))
			if l < 4 || l > len(a) {
				break
			}
			if binary.NativeEndian.Uint16(a[2:4]) == unix.IFLA_IFNAME {
				name = cstring(a[4:l])
			}
			a = a[min(nlAlign(l), len(a)):]
		}
		out[idx] = name
	})
	return out, err
}

func cstring(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// moveTo moves the interface into the network namespace nsfd refers to.
func (r *rtnl) moveTo(index int32, nsfd int) error {
	return r.do(newMsg(unix.RTM_NEWLINK, unix.NLM_F_ACK, ifinfo(index, 0, 0)).attr(unix.IFLA_NET_NS_FD, u32(uint32(nsfd))), nil)
}

func (r *rtnl) rename(index int32, name string) error {
	return r.do(newMsg(unix.RTM_NEWLINK, unix.NLM_F_ACK, ifinfo(index, 0, 0)).attr(unix.IFLA_IFNAME, append([]byte(name), 0)), nil)
}

// From linux/if_link.h.
const (
	iflaInet6AddrGenMode = 8 // IFLA_INET6_ADDR_GEN_MODE
	in6AddrGenModeNone   = 1 // IN6_ADDR_GEN_MODE_NONE
)

// noAddrGen stops the kernel from giving the interface an IPv6 link-local
// address, and so from sending router solicitations of its own on it.
func (r *rtnl) noAddrGen(index int32) error {
	inner := (&msg{}).attr(iflaInet6AddrGenMode, []byte{in6AddrGenModeNone}).b
	af := (&msg{}).attr(unix.AF_INET6, inner).b
	return r.do(newMsg(unix.RTM_NEWLINK, unix.NLM_F_ACK, ifinfo(index, 0, 0)).attr(unix.IFLA_AF_SPEC|unix.NLA_F_NESTED, af), nil)
}

// setMTU sets the interface's MTU.
func (r *rtnl) setMTU(index int32, mtu uint32) error {
	return r.do(newMsg(unix.RTM_NEWLINK, unix.NLM_F_ACK, ifinfo(index, 0, 0)).attr(unix.IFLA_MTU, u32(mtu)), nil)
}

func (r *rtnl) up(index int32) error {
	return r.do(newMsg(unix.RTM_NEWLINK, unix.NLM_F_ACK, ifinfo(index, unix.IFF_UP, unix.IFF_UP)), nil)
}

// addAddr gives the interface a host address (a /32 or /128), without
// duplicate address detection: nothing else is on the link.
func (r *rtnl) addAddr(index int32, a netip.Addr) error {
	var b [unix.SizeofIfAddrmsg]byte
	m := (*unix.IfAddrmsg)(unsafe.Pointer(&b[0]))
	m.Family, m.Prefixlen, m.Index = unix.AF_INET, 32, uint32(index)
	if a.Is6() {
		m.Family, m.Prefixlen = unix.AF_INET6, 128
	}
	req := newMsg(unix.RTM_NEWADDR, unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_EXCL, b[:])
	req.attr(unix.IFA_LOCAL, a.AsSlice()).attr(unix.IFA_ADDRESS, a.AsSlice())
	if a.Is6() {
		req.attr(unix.IFA_FLAGS, u32(unix.IFA_F_NODAD))
	}
	return r.do(req, nil)
}

// defaultRoute routes every destination of the family out of the interface.
func (r *rtnl) defaultRoute(index int32, v6 bool) error {
	var b [unix.SizeofRtMsg]byte
	m := (*unix.RtMsg)(unsafe.Pointer(&b[0]))
	m.Family, m.Table, m.Protocol, m.Scope, m.Type = unix.AF_INET, unix.RT_TABLE_MAIN, unix.RTPROT_STATIC, unix.RT_SCOPE_LINK, unix.RTN_UNICAST
	if v6 {
		m.Family, m.Scope = unix.AF_INET6, unix.RT_SCOPE_UNIVERSE
	}
	return r.do(newMsg(unix.RTM_NEWROUTE, unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_EXCL, b[:]).attr(unix.RTA_OIF, u32(uint32(index))), nil)
}
