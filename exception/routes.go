package exception

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// RouteProtocol marks the routes Configure installs (rtm_protocol; 0-4
// are the kernel's, and iproute2's rt_protos lists the daemons' numbers
// up to 99 and 186-192), so that it removes its own stale routes and
// never an operator's.
const RouteProtocol = 0xf1

// syncRoutes makes ifc.Routes exactly the host routes of protocol
// RouteProtocol on link: each address (/32 or /128) on the link, with its
// MTU (the kernel's TCP then sends segments that fit the tunnel), and a
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
	for _, rt := range ifc.Routes {
		a := rt.Addr.Unmap()
		want[a] = true
		fam := netlink.FAMILY_V4
		if a.Is6() {
			fam = netlink.FAMILY_V6
		}
		n := &netlink.Neigh{LinkIndex: idx, Family: fam, State: netlink.NUD_PERMANENT, IP: a.AsSlice(), HardwareAddr: net.HardwareAddr(ifc.MAC[:])}
		if err := h.NeighSet(n); err != nil {
			return fmt.Errorf("neighbour %v: %w", a, err)
		}
		r := &netlink.Route{LinkIndex: idx, Dst: hostNet(a), Scope: netlink.SCOPE_LINK, Protocol: RouteProtocol, MTU: rt.MTU}
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

// ForwardRulePriority is the priority of the policy-routing rules that
// keep the kernel from forwarding what arrives on the exception interface
// (noForwarding): after the local table's rule (0), which delivers the
// host's own addresses, and before the main table's (32766).
const ForwardRulePriority = 241

// noForwarding makes the kernel forward nothing that the dataplane
// punted to it through the exception interface, whatever the host's
// ip_forward: a blackhole rule per family for packets arriving on the
// interface, marked with RouteProtocol. The dataplane punts every packet
// that is not VIP traffic, whatever its destination; on a host with
// forwarding on (a container host's default) anyone on the LAN could
// otherwise route through the LB into every network the host reaches
// (its management network, its container bridges), with any source. The
// host's own addresses (the local table), broadcasts and multicast
// (ARP, ND, BGP, ping, ssh) are delivered before the rule is consulted.
// A per-interface forwarding sysctl would not do: IPv6 has none on the
// input side, and writing ip_forward resets IPv4's on every interface.
func noForwarding(h *netlink.Handle, ifc Iface) error {
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		have, err := h.RuleListFiltered(fam, &netlink.Rule{Priority: ForwardRulePriority}, netlink.RT_FILTER_PRIORITY)
		if err != nil {
			if fam == netlink.FAMILY_V6 && errors.Is(err, syscall.EAFNOSUPPORT) {
				continue // no IPv6 in this kernel: nothing to forward either
			}
			return fmt.Errorf("list rules: %w", err)
		}
		// A "nop" of ours (edited by hand) has no table and no goto
		// either, like the blackhole, and the rules listed do not say
		// which is which: the kernel deletes it by its action.
		for range 16 {
			nop := netlink.NewRule()
			nop.Family, nop.Priority, nop.IifName = fam, ForwardRulePriority, ifc.Name
			nop.Type, nop.Protocol = unix.FR_ACT_NOP, RouteProtocol
			if h.RuleDel(nop) != nil {
				break
			}
		}
		if len(have) > 0 {
			if have, err = h.RuleListFiltered(fam, &netlink.Rule{Priority: ForwardRulePriority}, netlink.RT_FILTER_PRIORITY); err != nil {
				return fmt.Errorf("list rules: %w", err)
			}
		}
		found := false
		for _, r := range have {
			if r.IifName != ifc.Name || r.Protocol != RouteProtocol {
				continue
			}
			// A blackhole names no table and no goto target, and
			// selects every packet from the interface. A rule of ours
			// that does otherwise (a leftover, or edited by hand) would
			// match before a blackhole added beside it, at the same
			// priority, and the kernel would forward, or blackholes only
			// some: it goes.
			if r.Table == 0 && r.Goto < 0 && allFromIface(r) {
				found = true
				continue
			}
			if err := h.RuleDel(&r); err != nil {
				return fmt.Errorf("remove stale rule iif %s table %d: %w", ifc.Name, r.Table, err)
			}
		}
		if found {
			continue
		}
		r := netlink.NewRule()
		r.Family, r.Priority, r.IifName = fam, ForwardRulePriority, ifc.Name
		r.Type, r.Protocol = unix.FR_ACT_BLACKHOLE, RouteProtocol
		if err := h.RuleAdd(r); err != nil {
			if fam == netlink.FAMILY_V6 && errors.Is(err, syscall.EAFNOSUPPORT) {
				continue
			}
			return fmt.Errorf("add rule iif %s blackhole: %w", ifc.Name, err)
		}
	}
	return nil
}

// allFromIface reports whether rule r selects by its input interface
// alone: no source, destination, mark, TOS, ports, protocol, UID range,
// output interface, and not inverted.
func allFromIface(r netlink.Rule) bool {
	return r.Src == nil && r.Dst == nil && !r.Invert && r.Mark == 0 && r.Tos == 0 && r.OifName == "" &&
		r.Dport == nil && r.Sport == nil && r.IPProto == 0 && r.UIDRange == nil && r.TunID == 0
}
