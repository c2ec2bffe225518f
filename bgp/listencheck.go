package bgp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// CheckListen binds, and closes at once, every address the speaker will
// listen on (none with listen_port 0), as GoBGP binds them (an IPv6
// address IPv6-only; without listen_addresses 0.0.0.0 and ::). The daemon
// calls it before it sets anything up, so that a port another program
// holds (bird, another Fulcrum) is named at once, not after the NIC, the
// tap and the tables are up and systemd has been told the daemon is
// ready. A program that takes the port in between is still caught by
// Start.
func CheckListen(cfg Config) error {
	c, err := cfg.WithDefaults().compile()
	if err != nil {
		return err
	}
	if cfg.ListenPort == 0 {
		return nil
	}
	addrs := c.listen
	if len(addrs) == 0 {
		addrs = []netip.Addr{netip.IPv4Unspecified(), netip.IPv6Unspecified()}
	}
	for _, a := range addrs {
		if err := bindOnce(a, cfg.ListenPort); err != nil {
			if errors.Is(err, syscall.EADDRINUSE) {
				return fmt.Errorf("bgp: listen_port %d on %v is in use by another program (another BGP daemon, or another Fulcrum): stop it, or set another bgp.listen_port or bgp.listen_addresses: %w", cfg.ListenPort, a, err)
			}
			return fmt.Errorf("bgp: listening on %v port %d (bgp.listen_port, bgp.listen_addresses): %w", a, cfg.ListenPort, err)
		}
	}
	return nil
}

// bindOnce listens on a:port as GoBGP's listener does (network tcp4 or
// tcp6, the latter IPv6-only in Go) and closes at once. The socket is
// free-bound (IP_FREEBIND, IPV6_FREEBIND): the check is of the port, and
// an address the host has not got yet is no refusal. The daemon puts
// dataplane.lb_ipv4 and lb_ipv6 on its exception tap only after this
// check, and GoBGP binds after that.
func bindOnce(a netip.Addr, port int) error {
	network := "tcp4"
	if a.Is6() {
		network = "tcp6"
	}
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			if a.Is6() {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_IPV6, unix.IPV6_FREEBIND, 1)
			} else {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_FREEBIND, 1)
			}
		})
		if err != nil {
			return err
		}
		_ = serr // an old kernel without IPV6_FREEBIND: bound as before
		return nil
	}}
	lc.SetMultipathTCP(false) // as GoBGP's listener
	l, err := lc.Listen(context.Background(), network, net.JoinHostPort(a.String(), strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return l.Close()
}
