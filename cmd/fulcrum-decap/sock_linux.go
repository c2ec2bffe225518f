package main

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// noBroadcast turns SO_BROADCAST off on a socket the agent may forward
// from (Go turns it on for every raw and UDP socket): a send to a
// broadcast address then fails (EACCES) instead of reaching every host of
// a segment, whatever check before it missed.
func noBroadcast(c syscall.Conn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_BROADCAST, 0)
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("SO_BROADCAST: %w", serr)
	}
	return nil
}

// recvFrom6 reads a raw IPv6 socket with recvmsg(2) into a sockaddr and a
// control buffer it owns, for the datagram's source and the outer traffic
// class (IPV6_RECVTCLASS) without an allocation (IPConn.ReadFrom
// allocates an *IPAddr per packet).
type recvFrom6 struct {
	rc    syscall.RawConn
	buf   []byte
	n     int
	errno syscall.Errno
	sa    unix.RawSockaddrInet6
	iov   unix.Iovec
	msg   unix.Msghdr
	oob   [64]byte
	tos   uint8 // the last datagram's traffic class
	fn    func(fd uintptr) bool
}

func newRecvFrom6(c *net.IPConn) (*recvFrom6, error) {
	if err := recvTOS(c, true); err != nil {
		return nil, err
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	r := &recvFrom6{rc: rc}
	r.fn = func(fd uintptr) bool {
		r.iov.Base = nil
		if len(r.buf) > 0 {
			r.iov.Base = &r.buf[0]
		}
		r.iov.SetLen(len(r.buf))
		r.msg = unix.Msghdr{Name: (*byte)(unsafe.Pointer(&r.sa)), Namelen: unix.SizeofSockaddrInet6, Iov: &r.iov, Iovlen: 1,
			Control: &r.oob[0]}
		r.msg.SetControllen(len(r.oob))
		n, _, e := unix.Syscall(unix.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&r.msg)), 0)
		if e == unix.EAGAIN || e == unix.EINTR {
			return false // wait for the poller
		}
		r.n, r.errno = int(n), e
		return true
	}
	return r, nil
}

// read is one recvmsg: the datagram (from the payload after the IPv6
// header, as IPConn.Read) and its source; r.tos is its traffic class.
func (r *recvFrom6) read(b []byte) (int, netip.Addr, error) {
	r.buf = b
	err := r.rc.Read(r.fn)
	r.buf = nil
	if err != nil {
		return 0, netip.Addr{}, err
	}
	if r.errno != 0 {
		return 0, netip.Addr{}, os.NewSyscallError("recvmsg", r.errno)
	}
	r.tos = tosFrom(r.oob[:r.msg.Controllen])
	return r.n, netip.AddrFrom16(r.sa.Addr).Unmap(), nil
}

// recvTOS asks the kernel to report each datagram's outer IPv4 TOS
// (IP_RECVTOS) or IPv6 traffic class (IPV6_RECVTCLASS) as control data:
// the ECN field routers may have marked on the way (RFC 6040), which a
// socket that consumed the outer header cannot read otherwise.
func recvTOS(c syscall.Conn, v6 bool) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		if v6 {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_RECVTCLASS, 1)
		} else {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_RECVTOS, 1)
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("receiving the outer TOS: %w", serr)
	}
	return nil
}

// tosFrom finds the IP_TOS (one byte) or IPV6_TCLASS (an int) control
// message in oob, as recvTOS asked for; 0 (Not-ECT: nothing to carry
// over) if there is none.
func tosFrom(oob []byte) uint8 {
	for len(oob) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		l := int(h.Len)
		if l < unix.SizeofCmsghdr || l > len(oob) {
			return 0
		}
		data := oob[unix.CmsgLen(0):l]
		switch {
		case h.Level == unix.IPPROTO_IP && (h.Type == unix.IP_TOS || h.Type == unix.IP_RECVTOS) && len(data) >= 1:
			return data[0]
		case h.Level == unix.IPPROTO_IPV6 && h.Type == unix.IPV6_TCLASS && len(data) >= 4:
			return uint8(*(*int32)(unsafe.Pointer(&data[0])))
		}
		next := unix.CmsgSpace(l - unix.CmsgLen(0))
		if next > len(oob) {
			return 0
		}
		oob = oob[next:]
	}
	return 0
}
