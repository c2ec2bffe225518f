package exception

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/fulcrumlb/fulcrum/dataplane"
)

// lan is a LAN of the test's own: the LB's exception interface (lbIf, in
// namespace lbNS) and one other station (peerIf in peerNS, the gateway
// or an attacker), joined by a veth pair. Nothing leaves the two
// namespaces, which go (with the pair) when the test ends.
type lan struct {
	lbNS, peerNS     string
	lbIf, peerIf     string
	lbH, peerH       *netlink.Handle
	lbNSh, peerNSh   netns.NsHandle
	lbMAC, peerMAC   [6]byte
	lbAddr, gwAddr   netip.Addr
	lbAddr6, gwAddr6 netip.Addr
}

func newLAN(t *testing.T, tag string) *lan {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	l := &lan{
		lbNS: fmt.Sprintf("flx-lb-%d-%s", os.Getpid(), tag), peerNS: fmt.Sprintf("flx-pe-%d-%s", os.Getpid(), tag),
		lbIf: "flxl" + tag, peerIf: "flxp" + tag,
		lbMAC: [6]byte{2, 0xf1, 0, 0, 0, 0x10}, peerMAC: [6]byte{2, 0, 0, 0, 0, 0x01},
		lbAddr: netip.MustParseAddr("192.0.2.10"), gwAddr: netip.MustParseAddr("192.0.2.1"),
		lbAddr6: netip.MustParseAddr("2001:db8:100::10"), gwAddr6: netip.MustParseAddr("2001:db8:100::1"),
	}
	var hs []netns.NsHandle
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		t.Skipf("netns: %v", err)
	}
	for _, name := range []string{l.lbNS, l.peerNS} {
		h, err := netns.NewNamed(name) // creates it and enters it
		if err != nil {
			break
		}
		name := name
		t.Cleanup(func() { h.Close(); netns.DeleteNamed(name) })
		hs = append(hs, h)
	}
	if serr := netns.Set(orig); serr != nil {
		t.Fatalf("back to the test's namespace: %v", serr) // the thread stays locked: it is tainted
	}
	orig.Close()
	runtime.UnlockOSThread()
	if len(hs) != 2 {
		t.Skipf("netns: %v", err)
	}
	l.lbNSh, l.peerNSh = hs[0], hs[1]
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: l.lbIf, HardwareAddr: net.HardwareAddr(l.lbMAC[:])}, PeerName: l.peerIf, PeerHardwareAddr: net.HardwareAddr(l.peerMAC[:])}
	if err := netlink.LinkAdd(veth); err != nil {
		t.Skipf("veth: %v", err)
	}
	for i, n := range []string{l.lbIf, l.peerIf} {
		link, err := netlink.LinkByName(n)
		if err == nil {
			err = netlink.LinkSetNsFd(link, int(hs[i]))
		}
		if err != nil {
			if link, lerr := netlink.LinkByName(l.lbIf); lerr == nil {
				netlink.LinkDel(link)
			}
			t.Fatal(err)
		}
	}
	if l.lbH, err = netlink.NewHandleAt(hs[0]); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.lbH.Close)
	if l.peerH, err = netlink.NewHandleAt(hs[1]); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.peerH.Close)
	if err := Configure(Iface{Name: l.lbIf, MAC: l.lbMAC, MTU: 1500,
		Addrs: []netip.Prefix{netip.PrefixFrom(l.lbAddr, 24), netip.PrefixFrom(l.lbAddr6, 64)}}, l.lbNS); err != nil {
		t.Fatal(err)
	}
	peer, err := l.peerH.LinkByName(l.peerIf)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.peerH.LinkSetUp(peer); err != nil {
		t.Fatal(err)
	}
	return l
}

// in runs f on a thread inside network namespace ns.
func in(t *testing.T, ns netns.NsHandle, f func() error) {
	t.Helper()
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	if err := netns.Set(ns); err != nil {
		orig.Close()
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	ferr := f()
	if err := netns.Set(orig); err != nil {
		t.Fatalf("back to the test's namespace: %v", err) // the thread stays locked: it is tainted
	}
	orig.Close()
	runtime.UnlockOSThread()
	if ferr != nil {
		t.Fatal(ferr)
	}
}

// send writes raw Ethernet frames on the peer's end of the LAN, as an
// attacker on the LB's link can.
func (l *lan) send(t *testing.T, frames ...[]byte) {
	t.Helper()
	link, err := l.peerH.LinkByName(l.peerIf)
	if err != nil {
		t.Fatal(err)
	}
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	if err := netns.Set(l.peerNSh); err != nil {
		orig.Close()
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	fd, serr := syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW, 0)
	if err := netns.Set(orig); err != nil {
		t.Fatalf("back to the test's namespace: %v", err) // the thread stays locked: it is tainted
	}
	orig.Close()
	runtime.UnlockOSThread()
	if serr != nil {
		t.Fatal(serr)
	}
	defer syscall.Close(fd)
	// From one CPU, so that the frames wait in one backlog queue and the
	// kernel takes them in the order sent.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var cpus, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &cpus); err != nil {
		t.Fatal(err)
	}
	for c := 0; c < 1024; c++ {
		if cpus.IsSet(c) {
			one.Set(c)
			break
		}
	}
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		t.Fatal(err)
	}
	defer unix.SchedSetaffinity(0, &cpus)
	sa := &syscall.SockaddrLinklayer{Ifindex: link.Attrs().Index, Halen: 6}
	for _, f := range frames {
		copy(sa.Addr[:], f[:6])
		if err := syscall.Sendto(fd, f, 0, sa); err != nil {
			t.Fatal(err)
		}
	}
}

// arp is an ARP packet (op 1 request, 2 reply) from sha/spa to tpa,
// broadcast on the link: what a station claiming spa sends.
func arp(op uint16, src, sha [6]byte, spa, tpa netip.Addr) []byte {
	f := make([]byte, 0, 42)
	f = append(f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	f = append(f, src[:]...)
	f = append(f, 0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, byte(op))
	f = append(f, sha[:]...)
	f = append(f, spa.AsSlice()...)
	f = append(f, 0, 0, 0, 0, 0, 0)
	return append(f, tpa.AsSlice()...)
}

// neighMAC is the MAC the kernel's neighbour table holds for ip on ifc,
// whatever its state and MAC (not Lookup's judgement).
func neighMAC(t *testing.T, h *netlink.Handle, ifc string, ip netip.Addr) ([6]byte, int, bool) {
	t.Helper()
	link, err := h.LinkByName(ifc)
	if err != nil {
		t.Fatal(err)
	}
	fam := netlink.FAMILY_V4
	if ip.Is6() {
		fam = netlink.FAMILY_V6
	}
	ns, err := h.NeighList(link.Attrs().Index, fam)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		if a, ok := netip.AddrFromSlice(n.IP); ok && a.Unmap() == ip && len(n.HardwareAddr) == 6 {
			var m [6]byte
			copy(m[:], n.HardwareAddr)
			return m, n.State, true
		}
	}
	return [6]byte{}, 0, false
}

// TestLookupRefusesGroupAndZeroMACs: the kernel stores whatever MAC an
// ARP packet on the link claims for the gateway's address, broadcast,
// multicast and zero included (shown here by sending them from the LAN);
// none of them, nor the port's own MAC, may become the dataplane's next
// hop: a broadcast next hop floods every tunnelled packet, the clients'
// data in them, to every station of the LAN. The gateway is unresolved
// instead (its packets dropped and counted as no-next-hop), and the
// resolver publishes it so.
func TestLookupRefusesGroupAndZeroMACs(t *testing.T) {
	l := newLAN(t, "grp")
	real := [6]byte{2, 0, 0, 0, 0, 0xaa}
	addNeigh(t, l.lbH, l.lbIf, l.gwAddr, real, netlink.NUD_REACHABLE)
	if m, ok := Lookup(l.lbNS, l.lbIf, l.gwAddr); !ok || m != real {
		t.Fatalf("before the attack: %v %v, want %v", net.HardwareAddr(m[:]), ok, net.HardwareAddr(real[:]))
	}
	attacker := [6]byte{2, 0, 0, 0, 0, 0x66}
	for _, bad := range [][6]byte{
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		{0x01, 0x00, 0x5e, 0x00, 0x00, 0x01},
		{0x33, 0x33, 0x00, 0x00, 0x00, 0x01},
		{},
		l.lbMAC,
	} {
		// A gratuitous ARP request for the gateway's address (the
		// kernel takes a request's sender as an update of an entry it
		// has: STALE with the new MAC).
		l.send(t, arp(1, attacker, bad, l.gwAddr, l.lbAddr))
		deadline := time.Now().Add(5 * time.Second)
		for {
			m, _, ok := neighMAC(t, l.lbH, l.lbIf, l.gwAddr)
			if ok && m == bad {
				break
			}
			if time.Now().After(deadline) {
				// The kernel refused it itself: not ours to judge,
				// but the operator's entry below must still be.
				addNeigh(t, l.lbH, l.lbIf, l.gwAddr, bad, netlink.NUD_STALE)
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		if m, ok := Lookup(l.lbNS, l.lbIf, l.gwAddr); ok {
			t.Errorf("gateway claimed at %v: Lookup = %v, true; want unresolved", net.HardwareAddr(bad[:]), net.HardwareAddr(m[:]))
		}
		// An operator's permanent entry with such a MAC is no better.
		addNeigh(t, l.lbH, l.lbIf, l.gwAddr6, bad, netlink.NUD_PERMANENT)
		if m, ok := Lookup(l.lbNS, l.lbIf, l.gwAddr6); ok {
			t.Errorf("IPv6 gateway at %v (permanent): Lookup = %v, true; want unresolved", net.HardwareAddr(bad[:]), net.HardwareAddr(m[:]))
		}
	}

	// The resolver publishes the broadcast-claimed gateway as unresolved.
	addNeigh(t, l.lbH, l.lbIf, l.gwAddr, [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, netlink.NUD_STALE)
	pubs := make(chan dataplane.NextHop, 4)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	r := &Resolver{Iface: l.lbIf, Netns: l.lbNS, Interval: time.Hour}
	go func() {
		defer close(done)
		r.Run(ctx, func() Gateways { return Gateways{IPv4: l.gwAddr} }, nil, func(_ Gateways, nh dataplane.NextHop) bool {
			select {
			case pubs <- nh:
			default:
			}
			return true
		})
	}()
	defer func() { cancel(); <-done }()
	select {
	case nh := <-pubs:
		if nh.Has4 {
			t.Errorf("resolver published %v for a gateway claimed at the broadcast address, want unresolved", net.HardwareAddr(nh.MAC4[:]))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nothing published within 10s")
	}
}

// TestResolverHoldsUnconfirmedGatewayChange: a station on the LAN that
// claims the gateway's address with a gratuitous ARP (its own MAC, or one
// nobody has) gets only a STALE entry from the kernel, and the kernel
// would verify it before its own packets relied on it; the dataplane's
// packets never pass through the kernel, so before, nothing ever verified
// it and the resolver published the claimed MAC at once and for good:
// every tunnelled packet went to the claimant. Now the resolver keeps
// publishing the gateway's confirmed MAC (or, while the kernel resolves
// it again, nothing: no-next-hop), never the claimed one, and makes the
// kernel verify the claim: the claimant does not answer the unicast
// probes, the entry fails, and the gateway is resolved again.
func TestResolverHoldsUnconfirmedGatewayChange(t *testing.T) {
	// Quicker verification than the kernel's defaults (5 s before the
	// first probe, 1 s between probes), in the test's namespace only.
	l, pubs := gatewayLAN(t, "hold", map[string]string{"delay_first_probe_time": "1", "retrans_time_ms": "100"}, 20*time.Millisecond, nil)
	if p := <-pubs; !p.has || p.mac != l.peerMAC {
		t.Fatalf("first: %v %v, want %v", net.HardwareAddr(p.mac[:]), p.has, net.HardwareAddr(l.peerMAC[:]))
	}

	claimed := [6]byte{2, 0, 0, 0, 0, 0x66} // no station has it
	l.send(t, arp(1, claimed, claimed, l.gwAddr, l.lbAddr))
	deadline := time.Now().Add(5 * time.Second)
	for {
		if m, _, ok := neighMAC(t, l.lbH, l.lbIf, l.gwAddr); ok && m == claimed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the kernel did not take the claim (precondition)")
		}
		time.Sleep(2 * time.Millisecond)
	}
	// Until the kernel has the gateway's own MAC again, confirmed, and
	// the resolver has published it: never the claimed MAC.
	deadline = time.Now().Add(15 * time.Second)
	var seen []published
	last, unresolved := published{l.peerMAC, true}, false
	take := func(p published) {
		t.Helper()
		seen = append(seen, p)
		last = p
		unresolved = unresolved || !p.has
		if p.has && p.mac != l.peerMAC {
			t.Fatalf("published %v for the gateway, claimed by a gratuitous ARP; want %v or unresolved (publications %v)",
				net.HardwareAddr(p.mac[:]), net.HardwareAddr(l.peerMAC[:]), seen)
		}
	}
	for {
		select {
		case p := <-pubs:
			take(p)
		case <-time.After(10 * time.Millisecond):
		}
		// The claimed MAC answers no probe: the entry fails, the
		// resolver publishes the gateway unresolved and pokes, and the
		// gateway's answer is published.
		m, st, _ := neighMAC(t, l.lbH, l.lbIf, l.gwAddr)
		if unresolved && last == (published{l.peerMAC, true}) {
			if !confirmed(st) || m != l.peerMAC {
				t.Fatalf("published %v while the kernel's entry is %v (state %#x)", net.HardwareAddr(l.peerMAC[:]), net.HardwareAddr(m[:]), st)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the kernel's entry is %v (state %#x) after 15s, the resolver's %v: the claim was never verified, or the gateway not resolved again", net.HardwareAddr(m[:]), st, last)
		}
	}

	// The gateway itself moves to another MAC (a replaced router) and
	// says so: the kernel verifies it, it answers, and the resolver
	// follows.
	moved := [6]byte{2, 0, 0, 0, 0, 0x02}
	peer, err := l.peerH.LinkByName(l.peerIf)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.peerH.LinkSetHardwareAddr(peer, net.HardwareAddr(moved[:])); err != nil {
		t.Fatal(err)
	}
	l.send(t, arp(1, moved, moved, l.gwAddr, l.lbAddr))
	deadline = time.Now().Add(15 * time.Second)
	for {
		select {
		case p := <-pubs:
			if p.has && p.mac == moved {
				if m, st, _ := neighMAC(t, l.lbH, l.lbIf, l.gwAddr); m != moved || !confirmed(st) {
					t.Errorf("followed the move to %v before the kernel confirmed it (entry %v, state %#x)", net.HardwareAddr(moved[:]), net.HardwareAddr(m[:]), st)
				}
				return
			}
			if p.has && p.mac != l.peerMAC {
				t.Fatalf("published %v, want %v or %v", net.HardwareAddr(p.mac[:]), net.HardwareAddr(l.peerMAC[:]), net.HardwareAddr(moved[:]))
			}
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			m, st, _ := neighMAC(t, l.lbH, l.lbIf, l.gwAddr)
			t.Fatalf("the gateway's move to %v not followed within 15s (entry %v, state %#x)", net.HardwareAddr(moved[:]), net.HardwareAddr(m[:]), st)
		}
	}
}

// published is one next hop the resolver published for IPv4.
type published struct {
	mac [6]byte
	has bool
}

// gatewayLAN is a LAN whose peer is the real gateway (it answers ARP for
// gwAddr), with the LB's entry for it REACHABLE at the peer's MAC and the
// kernel's neighbour timers of the LB's interface set as given (quicker
// verification than the defaults), and a resolver running on it at
// interval (rounds also on changed, if not nil) whose publications come
// on the channel returned. The resolver stops when the test ends.
func gatewayLAN(t *testing.T, name string, neigh map[string]string, interval time.Duration, changed chan struct{}) (*lan, chan published) {
	t.Helper()
	l := newLAN(t, name)
	peer, err := l.peerH.LinkByName(l.peerIf)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.peerH.AddrAdd(peer, &netlink.Addr{IPNet: &net.IPNet{IP: l.gwAddr.AsSlice(), Mask: net.CIDRMask(24, 32)}}); err != nil {
		t.Fatal(err)
	}
	in(t, l.lbNSh, func() error {
		for k, v := range neigh {
			if err := os.WriteFile("/proc/sys/net/ipv4/neigh/"+l.lbIf+"/"+k, []byte(v), 0o644); err != nil {
				return err
			}
		}
		return nil
	})
	addNeigh(t, l.lbH, l.lbIf, l.gwAddr, l.peerMAC, netlink.NUD_REACHABLE)
	pubs := make(chan published, 1024)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	r := &Resolver{Iface: l.lbIf, Netns: l.lbNS, Interval: interval}
	go func() {
		defer close(done)
		r.Run(ctx, func() Gateways { return Gateways{IPv4: l.gwAddr} }, changed, func(_ Gateways, nh dataplane.NextHop) bool {
			pubs <- published{nh.MAC4, nh.Has4}
			return true
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return l, pubs
}
