package main

import (
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// tunDevice is the TUN device the inner packets are written to. It is not
// persistent: it disappears when the file closes.
type tunDevice struct {
	*os.File
	name string
}

// openTUN creates the TUN device name: a layer-3 device without the
// 4-byte packet-information prefix (IFF_TUN|IFF_NO_PI), so each write is
// one bare IP packet, which the kernel receives as if it had arrived on
// that device (Documentation/networking/tuntap.rst).
func openTUN(name string) (*tunDevice, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("tun %q: %w", name, err)
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("tun %q: TUNSETIFF: %w", name, err)
	}
	// Non-blocking, so os.File puts it in the runtime poller and Close
	// wakes the reader.
	return &tunDevice{File: os.NewFile(uintptr(fd), "/dev/net/tun"), name: ifr.Name()}, nil
}

// up sets IFF_UP on the device, as `ip link set dev NAME up` does.
func (t *tunDevice) up() error {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("tun %s: up: %w", t.name, err)
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq(t.name)
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("tun %s: SIOCGIFFLAGS: %w", t.name, err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("tun %s: up: SIOCSIFFLAGS: %w", t.name, err)
	}
	return nil
}

// looseRPFilter turns reverse-path filtering off on the device: the
// clients' addresses are routed elsewhere, so strict mode would drop every
// decapsulated packet (see the command doc). It is the agent's own device;
// net.ipv4.conf.all is left to the operator.
func (t *tunDevice) looseRPFilter() error {
	return os.WriteFile("/proc/sys/net/ipv4/conf/"+t.name+"/rp_filter", []byte("0\n"), 0o644)
}

// allowZeroChecksum6 lets a UDP socket accept IPv6 datagrams with a zero
// checksum (UDP_NO_CHECK6_RX, RFC 6936 §5: the tunnel end must be
// configured to), which the kernel drops otherwise (RFC 8200 §8.1).
func allowZeroChecksum6(c *net.UDPConn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_NO_CHECK6_RX, 1)
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("UDP_NO_CHECK6_RX: %w", serr)
	}
	return nil
}
