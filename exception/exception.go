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
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"runtime"
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
	Routes []Route
}

// Route is a host route into the tap: Addr, with MTU as the route's (0:
// the interface's), so that what the kernel sends fits the tunnel the
// dataplane puts it in.
type Route struct {
	Addr netip.Addr
	MTU  int
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

// CheckAbsent returns an error if an interface named name already exists
// in the current network namespace. The exception path's net_tap creates
// the interface; with the name of an existing multi-queue tap it would
// silently attach to it as one more queue (another Fulcrum's still
// running, with its own file prefix, or one of the host's), and Configure
// would then replace that interface's addresses and routes, and the exit
// set it down. A tap of a killed Fulcrum is not persistent: the kernel
// removes it when the process dies, so a restart never finds its own.
func CheckAbsent(name string) error {
	link, err := netlink.LinkByName(name)
	var nf netlink.LinkNotFoundError
	switch {
	case errors.As(err, &nf):
		return nil
	case err != nil:
		return fmt.Errorf("exception interface %s: %w", name, err)
	}
	return fmt.Errorf("exception interface %s already exists (type %s, index %d): another Fulcrum running, or an interface of the host's; "+
		"Fulcrum creates its own and will not take over an existing one: remove it or set another dataplane.exception_iface",
		name, link.Type(), link.Attrs().Index)
}

// Configure makes the interface (in network namespace ns, "" for the
// current one) look like ifc: its MAC and MTU, up, and exactly ifc.Addrs
// as its global addresses (an address of an earlier configuration is
// removed, so a reload that changes lb_ipv4 moves the kernel's address
// too). It is idempotent.
func Configure(ifc Iface, ns string) error {
	if ifc.MTU < 1280 {
		// Linux removes (and refuses) IPv6 addresses on a link below
		// IPv6's minimum MTU: refuse before anything changes, so that a
		// reload to it cannot take lb_ipv6 away (config refuses it too).
		for _, p := range ifc.Addrs {
			if p.Addr().Is6() {
				return fmt.Errorf("exception interface %s: mtu %d is below 1280, IPv6's minimum, and it must hold %v", ifc.Name, ifc.MTU, p)
			}
		}
	}
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
	if err := noAutoconf(ns, ifc.Name); err != nil {
		return fail("router advertisements", err)
	}
	if err := ownARP(ns, ifc.Name); err != nil {
		return fail("arp", err)
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
	if err := noForwarding(h, ifc); err != nil {
		return fail("forwarding", err)
	}
	return nil
}

// noAutoconf makes the kernel ignore router advertisements on interface
// ifc (in network namespace ns, "" for the current one): the dataplane
// punts them (the neighbour class), and with the kernel's defaults one
// advertisement of the LB's prefix gave the interface a SLAAC address,
// to which the dataplane punts nothing back, a default route through the
// wire port and the advertised MTU. The LB's addresses and routes are
// the configuration's alone. A kernel without IPv6 has no such setting.
func noAutoconf(ns, ifc string) error {
	return confSysctls(ns, "ipv6", ifc, map[string]string{"accept_ra": "0\n", "autoconf": "0\n"})
}

// ownARP makes the kernel answer ARP on interface ifc (in network
// namespace ns) only for the addresses it holds (arp_ignore 1), and name
// one of them as the source of its own requests (arp_announce 2). With
// Linux's defaults it answered the LAN's requests (all punted) for any
// address of the host, its other interfaces' included, with the wire
// port's MAC: it claimed addresses on a LAN where they do not live, and
// the dataplane drops what then comes for them (not-for-host).
func ownARP(ns, ifc string) error {
	return confSysctls(ns, "ipv4", ifc, map[string]string{"arp_ignore": "1\n", "arp_announce": "2\n"})
}

// confSysctls writes each of values to /proc/sys/net/<family>/conf/<ifc>/
// in network namespace ns ("" for the current one). A key the kernel does
// not have (a kernel without IPv6) is left out.
func confSysctls(ns, family, ifc string, values map[string]string) error {
	return inNamespace(ns, func() error {
		for k, v := range values {
			err := os.WriteFile("/proc/sys/net/"+family+"/conf/"+ifc+"/"+k, []byte(v), 0o644)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
		return nil
	})
}

// Lookup asks the kernel's neighbour table (of network namespace ns, ""
// for the current one) for ip's MAC on interface ifc. Entries that are
// FAILED, INCOMPLETE or empty do not count, and neither does a MAC that
// cannot be a next hop (UsableNextHop): the kernel stores whatever
// link-layer address an ARP or ND packet claims, so anyone on the LAN can
// make the gateway's entry the broadcast address.
func Lookup(ns, ifc string, ip netip.Addr) ([6]byte, bool) {
	mac, _, ok, _, _ := lookup(ns, ifc, ip)
	return mac, ok
}

// lookup is Lookup with the entry's NUD state, bogus: the entry holds
// a MAC that cannot be a next hop (what a claim at a group, zero or the
// port's own MAC leaves), which ok refuses, and failed: the kernel's entry
// is FAILED (its solicitations went unanswered), or it could not be read.
func lookup(ns, ifc string, ip netip.Addr) (mac [6]byte, state int, ok, bogus, failed bool) {
	h, link, fam, err := neighTable(ns, ifc, ip)
	if err != nil {
		return mac, 0, false, false, true
	}
	defer h.Close()
	neighs, err := h.NeighList(link.Attrs().Index, fam)
	if err != nil {
		return mac, 0, false, false, true
	}
	for _, n := range neighs {
		a, ok := netip.AddrFromSlice(n.IP)
		if !ok || a.Unmap() != ip.Unmap() {
			continue
		}
		if n.State&netlink.NUD_FAILED != 0 {
			failed = true
		}
		if n.State == netlink.NUD_NONE || n.State&(netlink.NUD_FAILED|netlink.NUD_INCOMPLETE) != 0 || len(n.HardwareAddr) != 6 {
			continue
		}
		var m, own [6]byte
		copy(m[:], n.HardwareAddr)
		copy(own[:], link.Attrs().HardwareAddr)
		if !UsableNextHop(m, own) {
			bogus = true
			continue
		}
		return m, n.State, true, false, false
	}
	return mac, 0, false, bogus, failed
}

// confirmed reports whether a neighbour entry's MAC is one the kernel has
// confirmed (an answer to its own solicitation, or reachability traffic),
// or one an operator set: not merely what a packet on the link claimed.
// The kernel takes an unsolicited ARP or ND advertisement (anyone's on the
// LAN) as STALE, and only a later probe, made when the kernel itself
// sends through the entry, tells whether that station answers.
func confirmed(state int) bool {
	return state&(netlink.NUD_REACHABLE|netlink.NUD_PERMANENT|netlink.NUD_NOARP) != 0
}

// UsableNextHop reports whether mac can be the Ethernet destination of
// the tunnels toward the backends, for a port whose own MAC is own: not
// zero, not a group address (multicast, broadcast: every tunnelled packet
// would be flooded to the whole LAN, the clients' data with it) and not
// the port's own (the frames would come back to the LB, or be lost at
// the switch). config refuses the first two for a static next_hop_mac.
func UsableNextHop(mac, own [6]byte) bool {
	return mac != [6]byte{} && mac[0]&1 == 0 && mac != own
}

// poke makes the kernel resolve ip on ifc (in network namespace ns, ""
// for the current one), or verify an entry it has not confirmed, by
// sending one UDP datagram to ip's discard port through that interface:
// the kernel's own use of the entry is what starts its resolution (ARP,
// ND) or its unicast probes (STALE, DELAY, PROBE). The dataplane's
// packets never pass through the kernel, so without this an entry stays
// STALE, unverified, for as long as nothing else of the host's talks to
// the gateway.
func poke(ns, ifc string, ip netip.Addr) {
	inNamespace(ns, func() error { pokeHere(ifc, ip); return nil })
}

// inNamespace runs fn in network namespace ns ("" for the current one):
// for another, on a locked thread of its own, which a failed switch back
// retires (it ends with its goroutine). It returns fn's error, or the
// switch's.
func inNamespace(ns string, fn func() error) error {
	if ns == "" {
		return fn()
	}
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		orig, e := netns.Get()
		if e != nil {
			err = e
			return
		}
		defer orig.Close()
		target, e := netns.GetFromName(ns)
		if e != nil {
			err = e
			return
		}
		defer target.Close()
		if err = netns.Set(target); err != nil {
			return
		}
		err = fn()
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
	}()
	<-done
	return err
}

// pokeHere is poke in the calling thread's network namespace.
func pokeHere(ifc string, ip netip.Addr) {
	var fam int
	var sa syscall.Sockaddr
	if ip = ip.Unmap(); ip.Is4() {
		fam, sa = syscall.AF_INET, &syscall.SockaddrInet4{Port: 9, Addr: ip.As4()}
	} else {
		s6 := &syscall.SockaddrInet6{Port: 9, Addr: ip.As16()}
		if ip.IsLinkLocalUnicast() { // a link-local gateway: on ifc
			if ifi, err := net.InterfaceByName(ifc); err == nil {
				s6.ZoneId = uint32(ifi.Index)
			}
		}
		fam, sa = syscall.AF_INET6, s6
	}
	fd, err := syscall.Socket(fam, syscall.SOCK_DGRAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer syscall.Close(fd)
	if syscall.SetsockoptString(fd, syscall.SOL_SOCKET, syscall.SO_BINDTODEVICE, ifc) != nil {
		return
	}
	_ = syscall.Sendto(fd, []byte{0}, 0, sa)
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

	paused func() // tests: called as each round begins, before its clock is read
}

// Run resolves the gateways that gateways() returns, every Interval and at
// once whenever changed fires (a reload changed them), until ctx ends. It
// calls publish with the gateways it resolved and their MACs whenever
// either changes, and again at the next round if publish refused them
// (false: the gateways moved on meanwhile, as two quick reloads A to B
// and back to A do; the answer must not be taken as delivered, or A's
// new MAC would wait for the next change). A gateway not resolved yet is poked (the kernel sends
// ARP/ND) and published as unresolved, so its family's packets are dropped
// and counted (no-next-hop), never flooded.
//
// An entry the kernel has not confirmed (STALE: what an unsolicited ARP or
// ND advertisement from anyone on the LAN leaves; DELAY, PROBE: being
// verified) is poked too, so that the kernel verifies it with unicast
// probes as it would if its own packets used it. Such an entry is
// published as it is when nothing was published for the gateway before;
// but a MAC that differs from the one published is not followed until
// the kernel confirms it (it answered the kernel's probe): until then the
// last MAC stays, and if the probes fail the entry fails and the gateway
// is resolved again. A station that merely claims the gateway's address
// does not get the backends' traffic.
func (r *Resolver) Run(ctx context.Context, gateways func() Gateways, changed <-chan struct{}, publish func(Gateways, dataplane.NextHop) bool) {
	t := time.NewTicker(r.Interval)
	defer t.Stop()
	var curG Gateways
	var cur dataplane.NextHop
	var held [2][6]byte // the unconfirmed MAC last logged as held, per family
	// claims: per family, when the last claim warning was written, the
	// claims seen since and the MAC the last one was held against.
	var claims [2]struct {
		at  time.Time
		n   int
		ref [6]byte
	}
	// good is the MAC the kernel last confirmed for each family's
	// gateway: the reference an unconfirmed claim is held against while
	// nothing is published (the entry failed and is being resolved
	// again), or a claim made then would be published at once.
	var good [2]struct {
		ip  netip.Addr
		mac [6]byte
	}
	// lost is when each family's gateway entry went missing (absent, or
	// INCOMPLETE: being resolved) while a MAC was published for it.
	var lost [2]time.Time
	// claimed is when each family's published MAC began to be held
	// against another MAC in the kernel's entry (an unconfirmed claim,
	// or one no next hop can be), with no round since that saw the
	// entry confirmed, at the published MAC, or failed.
	var claimed [2]time.Time
	first := true
	// force: changed fired. The plane may have forgotten what was
	// published (a static next_hop_mac set and removed by two reloads
	// within one round: the resolver never saw Gateways() empty), so the
	// next round's answer is published even if it is the last one.
	force := false
	// retry: a gateway was looked up and not found, and the kernel was
	// poked to ask ARP/ND, which answers within milliseconds on a LAN:
	// look again soon (doubling from pokeRetryMin up to Interval), not
	// one Interval later. Until the MAC is published every packet toward
	// the backends is dropped as no-next-hop, the checks through the
	// tunnel of a freshly started instance included.
	retry := time.Duration(0)
	// idle is when the last round ended (it then waited for the next).
	var idle time.Time
	for {
		if r.paused != nil {
			r.paused() // tests: the process stopped between two rounds
		}
		// late: this round comes far later than the resolver waits for
		// (Interval at most): the process did not run meanwhile (SIGSTOP,
		// a VM paused for migration, a debugger, starved of CPU). Nothing
		// read the exception tap then, so the kernel's probes for the
		// gateways went unanswered and their entries may have failed
		// though the gateways never stopped answering: a FAILED entry
		// says nothing of them in this round, and is held as a missing
		// one is while the kernel resolves it again. Taken before
		// gateways(): its wait for the control plane's lock (a rebuild
		// holds it for seconds at a large configuration) is no pause,
		// the rest of the process, the tap's reader included, ran.
		late := !idle.IsZero() && time.Since(idle) > r.Interval+pauseSlack
		g := gateways()
		var nh dataplane.NextHop
		unresolved := false
		for i, x := range []struct {
			ip      netip.Addr
			mac     *[6]byte
			has     *bool
			prevIP  netip.Addr
			prevMAC [6]byte
			prevHas bool
		}{{g.IPv4, &nh.MAC4, &nh.Has4, curG.IPv4, cur.MAC4, cur.Has4}, {g.IPv6, &nh.MAC6, &nh.Has6, curG.IPv6, cur.MAC6, cur.Has6}} {
			if !x.ip.IsValid() {
				continue
			}
			m, st, ok, bogus, failed := lookup(r.Netns, r.Iface, x.ip)
			if ok || bogus || failed || first || x.prevIP != x.ip || !x.prevHas {
				lost[i] = time.Time{}
			}
			if failed || first || x.prevIP != x.ip || !x.prevHas || ok && (confirmed(st) || m == x.prevMAC) {
				claimed[i] = time.Time{}
			}
			if late && !ok && !bogus && !first && x.prevIP == x.ip && x.prevHas {
				// Failed or missing after a pause: held as an entry
				// being resolved again, the hold counted from now (one
				// begun before the pause ran out while nothing read
				// the tap).
				failed = false
				lost[i] = time.Time{}
			}
			// overClaimed: the published MAC has been held against claims
			// for longer than the kernel takes to verify one (claims at
			// other MACs in turn restart its verification each time, so it
			// never probes, and never fails a gateway that is gone). The
			// entry is dropped and resolved afresh: a gateway that is
			// there answers at once; one that is gone is unresolved.
			overClaimed := func() bool {
				if claimed[i].IsZero() {
					claimed[i] = time.Now()
					return false
				}
				if time.Since(claimed[i]) < claimHoldMax {
					return false
				}
				claimed[i] = time.Time{}
				forget(r.Netns, r.Iface, x.ip)
				poke(r.Netns, r.Iface, x.ip)
				unresolved = true
				return true
			}
			switch {
			case !ok && bogus && !first && x.prevIP == x.ip && x.prevHas:
				// Claimed at a MAC that can be no next hop (one
				// packet from anyone on the LAN): not a reason to
				// drop everything. The last MAC stays while the
				// kernel verifies the entry (its probe finds the
				// gateway again, or fails it).
				if overClaimed() {
					continue
				}
				poke(r.Netns, r.Iface, x.ip)
				m = x.prevMAC
			case !ok && !bogus && !failed && !first && x.prevIP == x.ip && x.prevHas &&
				(lost[i].IsZero() || time.Since(lost[i]) < reResolveHold):
				// The entry is gone (the kernel's neighbour GC drops an
				// unused entry over 5 s old whenever the table, shared by
				// every namespace, is over gc_thresh2: what a flood of ARP
				// from spoofed senders makes it) or being resolved again:
				// no sign that the gateway left. The last MAC stays
				// while the kernel resolves it; a FAILED entry (no
				// answer) ends the hold, and so does reResolveHold.
				if lost[i].IsZero() {
					lost[i] = time.Now()
				}
				poke(r.Netns, r.Iface, x.ip)
				m = x.prevMAC
				// Look again soon, as for an unresolved gateway: the
				// kernel's answer may be another MAC (the router was
				// replaced), which the held one must not outlive.
				unresolved = true
			case !ok:
				poke(r.Netns, r.Iface, x.ip)
				unresolved = true
				continue
			case confirmed(st):
				good[i].ip, good[i].mac = x.ip, m
			default:
				if st&netlink.NUD_STALE != 0 {
					poke(r.Netns, r.Iface, x.ip) // STALE -> DELAY -> PROBE: the kernel verifies it
				}
				ref, known := x.prevMAC, x.prevHas
				if !known && good[i].ip == x.ip {
					ref, known = good[i].mac, true
				}
				if !first && x.prevIP == x.ip && known && ref != m {
					if held[i] != m {
						claims[i].n++ // logged below
						claims[i].ref = ref
					}
					held[i] = m
					if !x.prevHas {
						continue // stays unresolved until the kernel confirms a MAC
					}
					if overClaimed() {
						continue
					}
					m = x.prevMAC
				}
			}
			*x.mac, *x.has = m, true
		}
		// At most one claim warning per claimLogEvery (a station claiming
		// the address at two MACs in turn would otherwise write one a
		// round for ever); the claims counted meanwhile are written once
		// it is over, whether or not another claim comes.
		for i, gw := range []netip.Addr{g.IPv4, g.IPv6} {
			if c := &claims[i]; c.n > 0 && r.Log != nil && (c.at.IsZero() || time.Since(c.at) >= claimLogEvery) {
				r.Log.Warn("gateway claimed at another MAC, not followed until the kernel confirms it",
					"gateway", gw, "mac", macStr(c.ref, true), "claimed", macStr(held[i], true), "claims", c.n)
				c.at, c.n = time.Now(), 0
			}
		}
		if first || force || g != curG || nh != cur {
			if r.Log != nil {
				r.Log.Info("next hop changed", "ipv4_gateway", g.IPv4, "ipv4_mac", macStr(nh.MAC4, nh.Has4),
					"ipv6_gateway", g.IPv6, "ipv6_mac", macStr(nh.MAC6, nh.Has6))
			}
			if publish(g, nh) {
				curG, cur, first, force = g, nh, false, false
			}
		}
		idle = time.Now()
		var soon <-chan time.Time
		var tm *time.Timer
		if unresolved {
			retry = min(max(2*retry, pokeRetryMin), r.Interval)
			if retry < r.Interval {
				tm = time.NewTimer(retry)
				soon = tm.C
			}
		} else {
			retry = 0
		}
		select {
		case <-ctx.Done():
		case <-t.C:
		case <-soon:
		case <-changed:
			force = true
			retry = 0 // other gateways: asked quickly again from the start
		}
		if tm != nil {
			tm.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// claimHoldMax bounds how long the resolver keeps publishing a gateway's
// MAC while the kernel's entry holds another, unconfirmed one: the
// kernel's own verification (delay_first_probe_time 5 s, then
// ucast_solicit 3 x retrans_time 1 s) ends sooner unless new claims keep
// restarting it.
const claimHoldMax = 15 * time.Second

// forget deletes the kernel's neighbour entry for ip on ifc (in network
// namespace ns), so that the next use resolves it afresh by broadcast.
func forget(ns, ifc string, ip netip.Addr) {
	h, link, fam, err := neighTable(ns, ifc, ip)
	if err != nil {
		return
	}
	defer h.Close()
	_ = h.NeighDel(&netlink.Neigh{LinkIndex: link.Attrs().Index, Family: fam, IP: ip.AsSlice()})
}

// neighTable opens the neighbour table of ip's family on interface ifc
// (in network namespace ns): a handle the caller closes, the interface
// and the netlink family.
func neighTable(ns, ifc string, ip netip.Addr) (h *netlink.Handle, link netlink.Link, fam int, err error) {
	if h, err = handle(ns); err != nil {
		return nil, nil, 0, err
	}
	if link, err = h.LinkByName(ifc); err != nil {
		h.Close()
		return nil, nil, 0, err
	}
	fam = netlink.FAMILY_V4
	if ip.Is6() {
		fam = netlink.FAMILY_V6
	}
	return h, link, fam, nil
}

// pauseSlack is how much later than its interval a resolver round must
// come for the resolver to take it that its process did not run
// meanwhile (Run's late): far more than a round's own work, and than a
// busy scheduler's delay.
const pauseSlack = time.Second

// pokeRetryMin is the first wait before the resolver looks again for a
// gateway it has just asked the kernel to resolve.
const pokeRetryMin = 10 * time.Millisecond

// reResolveHold bounds how long the resolver keeps publishing a gateway's
// last MAC while its kernel entry is missing or INCOMPLETE: the kernel's
// own resolution (mcast_solicit 3 x retrans_time 1 s) ends in FAILED
// sooner.
const reResolveHold = 5 * time.Second

// claimLogEvery is the least time between two warnings of claims at
// another MAC for one family's gateway (a variable for tests).
var claimLogEvery = time.Minute

func macStr(m [6]byte, ok bool) string {
	if !ok {
		return "unresolved"
	}
	return net.HardwareAddr(m[:]).String()
}
