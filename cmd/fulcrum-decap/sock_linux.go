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

// recvFrom6 reads a raw IPv6 socket with recvfrom(2) into a sockaddr it
// owns, for the datagram's source without an allocation (IPConn.ReadFrom
// allocates an *IPAddr per packet).
type recvFrom6 struct {
	rc    syscall.RawConn
	buf   []byte
	n     int
	errno syscall.Errno
	sa    unix.RawSockaddrInet6
	salen uint32
	fn    func(fd uintptr) bool
}

func newRecvFrom6(c *net.IPConn) (*recvFrom6, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	r := &recvFrom6{rc: rc}
	r.fn = func(fd uintptr) bool {
		r.salen = unix.SizeofSockaddrInet6
		var p unsafe.Pointer
		if len(r.buf) > 0 {
			p = unsafe.Pointer(&r.buf[0])
		}
		n, _, e := unix.Syscall6(unix.SYS_RECVFROM, fd, uintptr(p), uintptr(len(r.buf)), 0,
			uintptr(unsafe.Pointer(&r.sa)), uintptr(unsafe.Pointer(&r.salen)))
		if e == unix.EAGAIN || e == unix.EINTR {
			return false // wait for the poller
		}
		r.n, r.errno = int(n), e
		return true
	}
	return r, nil
}

// read is one recvfrom: the datagram (from the payload after the IPv6
// header, as IPConn.Read) and its source.
func (r *recvFrom6) read(b []byte) (int, netip.Addr, error) {
	r.buf = b
	err := r.rc.Read(r.fn)
	r.buf = nil
	if err != nil {
		return 0, netip.Addr{}, err
	}
	if r.errno != 0 {
		return 0, netip.Addr{}, os.NewSyscallError("recvfrom", r.errno)
	}
	return r.n, netip.AddrFrom16(r.sa.Addr).Unmap(), nil
}
