package exception

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// RouteProtocol marks the routes Configure installs (rtm_protocol; 0-4
// are the kernel's, and iproute2's rt_protos lists the daemons' numbers
// up to 99 and 186-192), so that it removes its own stale routes and
// never an operator's.
const RouteProtocol = 0xf1

// syncRoutes makes ifc.Routes exactly the host routes of protocol
// RouteProtocol on link: each address (/32 or /128) on the link, with a
// permanent neighbour entry naming the interface's own MAC. The kernel then
// sends a health check's packets for a VIP into the tap at once, without
// asking ARP or ND on it (nobody would answer: what the kernel sends into
// the tap goes to the wire), and the dataplane, which rewrites the
// Ethernet header anyway, steers them (dataplane/healthpath.go). The
// host's address, its BGP sessions and its ARP answers are untouched: a
// route to an address does not make the address local.
func syncRoutes(h *netlink.Handle, link netlink.Link, ifc Iface) error {
	idx := link.Attrs().Index
	want := map[netip.Addr]bool{}
	for _, a := range ifc.Routes {
		a = a.Unmap()
		want[a] = true
		fam := netlink.FAMILY_V4
		if a.Is6() {
			fam = netlink.FAMILY_V6
		}
		n := &netlink.Neigh{LinkIndex: idx, Family: fam, State: netlink.NUD_PERMANENT, IP: a.AsSlice(), HardwareAddr: net.HardwareAddr(ifc.MAC[:])}
		if err := h.NeighSet(n); err != nil {
			return fmt.Errorf("neighbour %v: %w", a, err)
		}
		r := &netlink.Route{LinkIndex: idx, Dst: hostNet(a), Scope: netlink.SCOPE_LINK, Protocol: RouteProtocol}
		if err := h.RouteReplace(r); err != nil {
			return fmt.Errorf("route %v: %w", a, err)
		}
	}
	have, err := h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{LinkIndex: idx, Protocol: RouteProtocol}, netlink.RT_FILTER_OIF|netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		return fmt.Errorf("list routes: %w", err)
	}
	for _, r := range have {
		if r.Dst == nil {
			continue
		}
		a, ok := netip.AddrFromSlice(r.Dst.IP)
		if !ok || want[a.Unmap()] {
			continue
		}
		if err := h.RouteDel(&r); err != nil {
			return fmt.Errorf("remove route %v: %w", r.Dst, err)
		}
		fam := netlink.FAMILY_V4
		if a.Unmap().Is6() {
			fam = netlink.FAMILY_V6
		}
		// The neighbour entry went in with the route; it goes with it.
		h.NeighDel(&netlink.Neigh{LinkIndex: idx, Family: fam, IP: r.Dst.IP})
	}
	return nil
}

// hostNet is a as a /32 or /128.
func hostNet(a netip.Addr) *net.IPNet {
	return &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(a.BitLen(), a.BitLen())}
}
