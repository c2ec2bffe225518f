// Package exception is the kernel's side of Fulcrum's exception path: the
// tap interface through which the kernel answers ARP/ND and ping for the
// LB's address and carries its own sessions (BGP), and the neighbour
// lookups that give the dataplane its next hop's MAC.
//
// It talks to the kernel over rtnetlink (github.com/vishvananda/netlink)
// rather than by running iproute2, so it needs no binary on the host and
// its errors are the kernel's own. Everything here runs on the slow path
// (control goroutines), never on an lcore.
package exception

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/fulcrumlb/fulcrum/dataplane"
)

// Iface is how the kernel's end of the tap must look.
type Iface struct {
	Name  string
	MAC   [6]byte        // the wire port's MAC, so the kernel's replies name it
	MTU   int            // the wire's L3 MTU
	Addrs []netip.Prefix // the LB's addresses with their prefix lengths
	// Routes are addresses (VIPs checked through the tunnel) the kernel
	// must send into the tap, so that the health checks' connections
	// reach the dataplane (routes.go).
	Routes []netip.Addr
}

// handle opens a netlink handle in network namespace ns ("": the current
// one).
func handle(ns string) (*netlink.Handle, error) {
	if ns == "" {
		return netlink.NewHandle()
	}
	nsh, err := netns.GetFromName(ns)
	if err != nil {
		return nil, fmt.Errorf("netns %s: %w", ns, err)
	}
	defer nsh.Close()
	return netlink.NewHandleAt(nsh)
}

// MoveToNetns moves interface name into the existing network namespace ns,
// as tests do to keep the kernel's answers inside a namespace they own.
func MoveToNetns(name, ns string) error {
	link, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("exception interface %s: %w", name, err)
	}
	nsh, err := netns.GetFromName(ns)
	if err != nil {
		return fmt.Errorf("exception interface %s: netns %s: %w", name, ns, err)
	}
	defer nsh.Close()
	if err := netlink.LinkSetNsFd(link, int(nsh)); err != nil {
		return fmt.Errorf("exception interface %s: move to netns %s: %w", name, ns, err)
	}
	return nil
}

// Configure makes the interface (in network namespace ns, "" for the
// current one) look like ifc: its MAC and MTU, up, and exactly ifc.Addrs
// as its global addresses (an address of an earlier configuration is
// removed, so a reload that changes lb_ipv4 moves the kernel's address
// too). It is idempotent.
func Configure(ifc Iface, ns string) error {
	h, err := handle(ns)
	if err != nil {
		return fmt.Errorf("exception interface %s: %w", ifc.Name, err)
	}
	defer h.Close()
	fail := func(what string, err error) error {
		return fmt.Errorf("exception interface %s: %s: %w", ifc.Name, what, err)
	}
	link, err := h.LinkByName(ifc.Name)
	if err != nil {
		return fail("find", err)
	}
	// Only what differs is set: setting even the same MAC makes the kernel
	// flush the interface's neighbour table (NETDEV_CHANGEADDR), which would
	// leave the gateway unresolved, and forwarding stopped, for a second
	// after every reload.
	attrs := link.Attrs()
	if !bytes.Equal(attrs.HardwareAddr, ifc.MAC[:]) {
		if err := h.LinkSetHardwareAddr(link, net.HardwareAddr(ifc.MAC[:])); err != nil {
			return fail("set address", err)
		}
	}
	if attrs.MTU != ifc.MTU {
		if err := h.LinkSetMTU(link, ifc.MTU); err != nil {
			return fail(fmt.Sprintf("set mtu %d", ifc.MTU), err)
		}
	}
	if attrs.Flags&net.FlagUp == 0 {
		if err := h.LinkSetUp(link); err != nil {
			return fail("set up", err)
		}
	}
	want := map[netip.Prefix]bool{}
	for _, p := range ifc.Addrs {
		want[p] = true
		a := &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}}
		if p.Addr().Is6() {
			a.Flags = syscall.IFA_F_NODAD // the LB's own address must work at once
		}
		if err := h.AddrReplace(link, a); err != nil {
			return fail("add "+p.String(), err)
		}
	}
	have, err := h.AddrList(link, netlink.FAMILY_ALL)
	if err != nil {
		return fail("list addresses", err)
	}
	for _, a := range have {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok || !ip.IsGlobalUnicast() {
			continue // link-local and the like belong to the kernel
		}
		ones, _ := a.Mask.Size()
		if !want[netip.PrefixFrom(ip.Unmap(), ones)] {
			if err := h.AddrDel(link, &a); err != nil {
				return fail("remove "+a.IPNet.String(), err)
			}
		}
	}
	if err := syncRoutes(h, link, ifc); err != nil {
		return fail("routes", err)
	}
	return nil
}

// Lookup asks the kernel's neighbour table (of network namespace ns, ""
// for the current one) for ip's MAC on interface ifc. Entries that are
// FAILED, INCOMPLETE or empty do not count.
func Lookup(ns, ifc string, ip netip.Addr) ([6]byte, bool) {
	var mac [6]byte
	h, err := handle(ns)
	if err != nil {
		return mac, false
	}
	defer h.Close()
	link, err := h.LinkByName(ifc)
	if err != nil {
		return mac, false
	}
	fam := netlink.FAMILY_V4
	if ip.Is6() {
		fam = netlink.FAMILY_V6
	}
	neighs, err := h.NeighList(link.Attrs().Index, fam)
	if err != nil {
		return mac, false
	}
	for _, n := range neighs {
		a, ok := netip.AddrFromSlice(n.IP)
		if !ok || a.Unmap() != ip.Unmap() {
			continue
		}
		if n.State == netlink.NUD_NONE || n.State&(netlink.NUD_FAILED|netlink.NUD_INCOMPLETE) != 0 || len(n.HardwareAddr) != 6 {
			continue
		}
		copy(mac[:], n.HardwareAddr)
		return mac, true
	}
	return mac, false
}

// poke makes the kernel resolve ip on ifc by sending one UDP datagram to
// its discard port through that interface.
func poke(ifc string, ip netip.Addr) {
	dl := net.Dialer{Timeout: time.Second, Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptString(int(fd), syscall.SOL_SOCKET, syscall.SO_BINDTODEVICE, ifc)
		})
		return errors.Join(err, serr)
	}}
	conn, err := dl.Dial("udp", netip.AddrPortFrom(ip, 9).String())
	if err != nil {
		return
	}
	_, _ = conn.Write([]byte{0})
	conn.Close()
}

// Gateways are the next hops toward the backends, one per outer family
// (an invalid address: none for that family, or nothing to resolve
// because a static next-hop MAC is configured).
type Gateways struct {
	IPv4, IPv6 netip.Addr
}

// Resolver keeps the next hop's MACs current from the kernel's neighbour
// table.
type Resolver struct {
	Iface    string        // the exception interface the gateways are reached through
	Netns    string        // its network namespace; "": the current one
	Interval time.Duration // how often the table is read again
	Log      *slog.Logger
}

// Run resolves the gateways that gateways() returns, every Interval and at
// once whenever changed fires (a reload changed them), until ctx ends. It
// calls publish with the gateways it resolved and their MACs whenever
// either changes; a gateway not resolved yet is poked (the kernel sends
// ARP/ND) and published as unresolved, so its family's packets are dropped
// and counted (no-next-hop), never flooded.
func (r *Resolver) Run(ctx context.Context, gateways func() Gateways, changed <-chan struct{}, publish func(Gateways, dataplane.NextHop)) {
	t := time.NewTicker(r.Interval)
	defer t.Stop()
	var curG Gateways
	var cur dataplane.NextHop
	first := true
	for {
		g := gateways()
		var nh dataplane.NextHop
		for _, x := range []struct {
			ip  netip.Addr
			mac *[6]byte
			has *bool
		}{{g.IPv4, &nh.MAC4, &nh.Has4}, {g.IPv6, &nh.MAC6, &nh.Has6}} {
			if !x.ip.IsValid() {
				continue
			}
			if m, ok := Lookup(r.Netns, r.Iface, x.ip); ok {
				*x.mac, *x.has = m, true
			} else if r.Netns == "" {
				poke(r.Iface, x.ip)
			}
		}
		if first || g != curG || nh != cur {
			if r.Log != nil {
				r.Log.Info("next hop changed", "ipv4_gateway", g.IPv4, "ipv4_mac", macStr(nh.MAC4, nh.Has4),
					"ipv6_gateway", g.IPv6, "ipv6_mac", macStr(nh.MAC6, nh.Has6))
			}
			publish(g, nh)
			curG, cur, first = g, nh, false
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-changed:
		}
	}
}

func macStr(m [6]byte, ok bool) string {
	if !ok {
		return "unresolved"
	}
	return net.HardwareAddr(m[:]).String()
}
