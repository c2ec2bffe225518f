package health

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"
)

// dialFunc opens a check's connection (net.Dialer.DialContext's shape).
type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// dial is how t's checks connect. A direct check lets the kernel pick its
// source. A check through the tunnel binds t.Tunnel.Source: the LB's
// address, which the backend answers (DSR) and the dataplane hands to the
// kernel, and a port that tells the dataplane which backend the check is
// for.
//
// The source port is the same for every check of a backend, every
// Interval (200 ms in the lab). A connection that the LB closed first
// would leave the 4-tuple in TIME_WAIT for a minute and the next connect
// would fail, so the socket lingers 0 s: its close sends a RST and leaves
// no state behind, on the LB or (RFC 1337 is not enforced by default) on
// the backend. SO_REUSEADDR lets the bind succeed while the previous
// check's socket is still being torn down, and a connect that finds the
// 4-tuple still taken (EADDRNOTAVAIL: a close the HTTP transport made
// from its own goroutine has not reached the kernel yet) is tried again
// after a millisecond, then two, four... within the check's time.
func (t Target) dial() dialFunc {
	d := t.dialer()
	if !t.Config.Tunnelled() {
		return d.DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		wait := time.Millisecond
		for {
			c, err := d.DialContext(ctx, network, addr)
			if err == nil || !errors.Is(err, syscall.EADDRNOTAVAIL) {
				return c, err
			}
			select {
			case <-ctx.Done():
				return nil, err
			case <-time.After(wait):
			}
			wait = min(2*wait, 50*time.Millisecond)
		}
	}
}

// dialer is the net.Dialer of t's checks (see dial).
func (t Target) dialer() *net.Dialer {
	if !t.Config.Tunnelled() {
		return checkDialer()
	}
	return &net.Dialer{
		LocalAddr: net.TCPAddrFromAddrPort(t.Tunnel.Source),
		Control:   tunnelSocket,
	}
}

// checkDialer is the net.Dialer of the checks that are not tunnelled.
func checkDialer() *net.Dialer { return &net.Dialer{Control: checkSocket} }

// checkSocket sets a check's TCP socket to linger 0 s before its
// connect: every close of it sends a RST and leaves no TIME_WAIT or
// FIN_WAIT2 on the LB (probe.go's TCPProber.Probe says why that
// matters). Set here, not once the dial returns, it also covers the
// dialer's own close when the check's time runs out as the connection
// comes up, on a loaded LB or toward a backend slow to answer.
func checkSocket(network, _ string, rc syscall.RawConn) error {
	if !strings.HasPrefix(network, "tcp") {
		return nil
	}
	var serr error
	err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptLinger(int(fd), syscall.SOL_SOCKET, syscall.SO_LINGER, &syscall.Linger{Onoff: 1, Linger: 0})
	})
	if err != nil {
		return err
	}
	return serr
}

// tunnelSocket sets a tunnel check's socket options before its bind:
// checkSocket's, and SO_REUSEADDR.
func tunnelSocket(network, address string, rc syscall.RawConn) error {
	var serr error
	err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
	})
	if err != nil {
		return err
	}
	if serr != nil {
		return serr
	}
	return checkSocket(network, address, rc)
}

// connCloser remembers the connections an HTTP check's transport dialled,
// so that the check closes them itself before it returns: without
// keep-alive the transport closes a connection from a goroutine of its
// own, later, and a tunnel check's next connection needs the same source
// port free.
type connCloser struct {
	mu    sync.Mutex
	conns []net.Conn
}

func (cc *connCloser) dialer(dial dialFunc) dialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err == nil {
			// Close with a RST, as the tcp and tunnel checks do: the
			// transport closes the connection itself once the body is
			// read, before closeAll, and whenever the check closed first
			// (a backend that keeps the connection despite "Connection:
			// close", or one whose own close lost the race) its 4-tuple
			// stayed on the LB for 60 s, in TIME_WAIT or FIN_WAIT2.
			if tc, ok := c.(*net.TCPConn); ok {
				tc.SetLinger(0)
			}
			cc.mu.Lock()
			cc.conns = append(cc.conns, c)
			cc.mu.Unlock()
		}
		return c, err
	}
}

func (cc *connCloser) closeAll() {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for _, c := range cc.conns {
		c.Close()
	}
	cc.conns = cc.conns[:0]
}
