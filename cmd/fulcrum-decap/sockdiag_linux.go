package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"
)

// sockDiag asks the kernel whether a local TCP socket owns a flow, with
// one exact lookup over NETLINK_SOCK_DIAG (inet_diag, the interface ss
// uses): a SOCK_DIAG_BY_FAMILY request without NLM_F_DUMP carrying the
// whole 4-tuple, which the kernel answers with the one socket the stack
// would deliver the packet to, or ENOENT. One sockDiag serves one
// goroutine: it is not safe for concurrent use.
type sockDiag struct {
	fd  int
	seq uint32
	req [nlmsgLen + inetDiagReqLen]byte
	buf [8192]byte
}

// Layout of the request (linux/netlink.h, linux/inet_diag.h).
const (
	nlmsgLen         = 16 // struct nlmsghdr
	inetDiagReqLen   = 56 // struct inet_diag_req_v2, its inet_diag_sockid included
	sockDiagByFamily = 20 // SOCK_DIAG_BY_FAMILY
	inetDiagNoCookie = 0xffffffff

	// TCP states of the answer (include/net/tcp_states.h): a listener
	// owns no established flow; a closed socket owns nothing; TIME_WAIT
	// only the end of its connection (owned).
	tcpTimeWait = 6
	tcpClose    = 7
	tcpListen   = 10

	diagTimeout = time.Second // the kernel answers at once; never block a receive loop for long
)

var errNoAnswer = errors.New("sock_diag: no answer")

func openSockDiag() (*sockDiag, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil, fmt.Errorf("netlink sock_diag socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netlink sock_diag bind: %w", err)
	}
	tv := unix.NsecToTimeval(diagTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &sockDiag{fd: fd}, nil
}

func (s *sockDiag) close() { unix.Close(s.fd) }

// owned reports whether a TCP socket of this host other than a listener
// owns a segment (closing: it carries FIN or RST) of the flow from remote
// to local: an established connection, one still in its handshake
// (SYN_RECV), or one closing. A socket in TIME_WAIT owns only closing
// segments (a FIN retransmitted by a client whose last ACK was lost, an
// RST): its connection is over, and any other segment is of a newer
// connection on the same tuple, which another backend has (the LB placed
// it by another table, or the client reused the tuple through another
// LB); delivered here it would stall that connection for good, the
// TIME_WAIT answering with ACKs of its own. The lookup is the stack's own
// (inet_lookup: established first, then listeners), so a listener on the
// port answers too, and is not an owner.
//
// dif is the interface index to ask with (diagIf: the TUN's VRF, or the
// TUN), so that a socket bound to that device is found as the stack would
// find it for the packet.
func (s *sockDiag) owned(local, remote netip.AddrPort, closing bool, dif uint32) (bool, error) {
	fam, alen := uint8(unix.AF_INET), 4
	if local.Addr().Is6() {
		fam, alen = unix.AF_INET6, 16
	}
	s.seq++
	r := s.req[:]
	clear(r)
	ne := binary.NativeEndian
	ne.PutUint32(r[0:], uint32(len(r)))
	ne.PutUint16(r[4:], sockDiagByFamily)
	ne.PutUint16(r[6:], unix.NLM_F_REQUEST)
	ne.PutUint32(r[8:], s.seq)
	q := r[nlmsgLen:]
	q[0], q[1] = fam, unix.IPPROTO_TCP
	ne.PutUint32(q[4:], 0xffffffff) // idiag_states: every state
	id := q[8:]
	binary.BigEndian.PutUint16(id[0:], local.Port())  // idiag_sport: ours
	binary.BigEndian.PutUint16(id[2:], remote.Port()) // idiag_dport: the client's
	la, ra := local.Addr().As16(), remote.Addr().As16()
	copy(id[4:4+alen], la[16-alen:])
	copy(id[20:20+alen], ra[16-alen:])
	// struct inet_diag_sockid: sport 0, dport 2, src 4, dst 20, if 36,
	// cookie 40 and 44: 48 bytes.
	ne.PutUint32(id[36:], dif) // idiag_if
	ne.PutUint32(id[40:], inetDiagNoCookie)
	ne.PutUint32(id[44:], inetDiagNoCookie)
	if err := unix.Sendto(s.fd, r, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return false, fmt.Errorf("sock_diag send: %w", err)
	}
	for {
		n, _, err := unix.Recvfrom(s.fd, s.buf[:], 0)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return false, fmt.Errorf("sock_diag receive: %w", err)
		}
		for b := s.buf[:n]; len(b) >= nlmsgLen; {
			l := int(ne.Uint32(b[0:]))
			if l < nlmsgLen || l > len(b) {
				return false, errNoAnswer
			}
			typ, seq, body := ne.Uint16(b[4:]), ne.Uint32(b[8:]), b[nlmsgLen:l]
			if a := (l + 3) &^ 3; a < len(b) {
				b = b[a:]
			} else {
				b = nil
			}
			if seq != s.seq {
				continue // a late answer to an earlier question
			}
			switch typ {
			case unix.NLMSG_ERROR:
				if len(body) < 4 {
					return false, errNoAnswer
				}
				switch errno := -int32(ne.Uint32(body)); errno {
				case 0:
					continue // an ack: not asked for
				case int32(unix.ENOENT):
					return false, nil
				default:
					return false, fmt.Errorf("sock_diag: %w", unix.Errno(errno))
				}
			case sockDiagByFamily:
				if len(body) < 2 {
					return false, errNoAnswer
				}
				st := body[1] // struct inet_diag_msg: family, state, ...
				return st != tcpListen && st != tcpClose && (st != tcpTimeWait || closing), nil
			}
		}
	}
}
