package exception

import (
	"context"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/fulcrumlb/fulcrum/dataplane"
)

// dualGatewayLAN is a LAN whose peer is the gateway for both families,
// the LB's entries REACHABLE at its MAC.
func dualGatewayLAN(t *testing.T, tag string) *lan {
	t.Helper()
	l := newLAN(t, tag)
	peer, err := l.peerH.LinkByName(l.peerIf)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []netip.Prefix{netip.PrefixFrom(l.gwAddr, 24), netip.PrefixFrom(l.gwAddr6, 64)} {
		a := &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}}
		if p.Addr().Is6() {
			a.Flags = 0x02 // IFA_F_NODAD
		}
		if err := l.peerH.AddrAdd(peer, a); err != nil {
			t.Fatal(err)
		}
	}
	addNeigh(t, l.lbH, l.lbIf, l.gwAddr, l.peerMAC, netlink.NUD_REACHABLE)
	addNeigh(t, l.lbH, l.lbIf, l.gwAddr6, l.peerMAC, netlink.NUD_REACHABLE)
	return l
}

// dualLAN: the peer is the gateway for both families; the resolver runs
// at interval on both, publishing on the channel returned.
func dualLAN(t *testing.T, tag string, interval time.Duration, gws func() Gateways, changed chan struct{}) (*lan, chan dataplane.NextHop) {
	t.Helper()
	l := dualGatewayLAN(t, tag)
	if gws == nil {
		gws = func() Gateways { return Gateways{IPv4: l.gwAddr, IPv6: l.gwAddr6} }
	}
	pubs := make(chan dataplane.NextHop, 4096)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	r := &Resolver{Iface: l.lbIf, Netns: l.lbNS, Interval: interval}
	go func() {
		defer close(done)
		r.Run(ctx, gws, changed, func(_ Gateways, nh dataplane.NextHop) bool { pubs <- nh; return true })
	}()
	t.Cleanup(func() { cancel(); <-done })
	return l, pubs
}

// TestResolverHoldND: the IPv6 gateway's entry removed (GC) while both
// families are published: the IPv6 MAC is held while ND resolves it again.
func TestResolverHoldND(t *testing.T) {
	l, pubs := dualLAN(t, "y9nd", 20*time.Millisecond, nil, nil)
	if nh := <-pubs; !nh.Has4 || !nh.Has6 {
		t.Fatalf("first: %+v", nh)
	}
	link, _ := l.lbH.LinkByName(l.lbIf)
	for round := 0; round < 5; round++ {
		if err := l.lbH.NeighDel(&netlink.Neigh{LinkIndex: link.Attrs().Index, Family: netlink.FAMILY_V6, IP: l.gwAddr6.AsSlice()}); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			select {
			case nh := <-pubs:
				if !nh.Has6 || !nh.Has4 {
					t.Fatalf("round %d: published %+v while ND re-resolved the gateway", round, nh)
				}
			case <-time.After(5 * time.Millisecond):
			}
			if m, st, ok := neighMAC(t, l.lbH, l.lbIf, l.gwAddr6); ok && m == l.peerMAC && confirmed(st) {
				break
			}
			if time.Now().After(deadline) {
				m, st, _ := neighMAC(t, l.lbH, l.lbIf, l.gwAddr6)
				t.Fatalf("round %d: not re-resolved (%v %#x)", round, net.HardwareAddr(m[:]), st)
			}
		}
	}
}

// TestResolverHoldLooksAgainSoon: the gateway's entry vanishes (neighbour GC,
// or an operator's `ip neigh flush` after replacing the router) and the
// kernel resolves it again, at once, to the new router's MAC. The
// resolver held the old (dead) MAC and poked, but looked again only one
// Interval later (the daemon's: 1 s; here an hour, as in
// TestResolverPublishesOnceARPAnswers): every tunnelled packet went to
// the old MAC meanwhile, where before the hold an absent entry was
// unresolved and looked at again after 10 ms.
func TestResolverHoldLooksAgainSoon(t *testing.T) {
	changed := make(chan struct{}, 1)
	l, pubs := gatewayLAN(t, "y9so", nil, time.Hour, changed)
	old := [6]byte{2, 0, 0, 0, 0, 0xee} // the replaced router: silent
	if p := <-pubs; !p.has || p.mac != l.peerMAC {
		t.Fatalf("first: %+v", p)
	}
	// The entry at the old router's MAC, published.
	addNeigh(t, l.lbH, l.lbIf, l.gwAddr, old, netlink.NUD_REACHABLE)
	changed <- struct{}{}
	if p := <-pubs; !p.has || p.mac != old {
		t.Fatalf("old router: %+v", p)
	}
	link, err := l.lbH.LinkByName(l.lbIf)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.lbH.NeighDel(&netlink.Neigh{LinkIndex: link.Attrs().Index, Family: netlink.FAMILY_V4, IP: l.gwAddr.AsSlice()}); err != nil {
		t.Fatal(err)
	}
	changed <- struct{}{} // one round sees the entry gone: held, poked
	if p := <-pubs; !p.has || p.mac != old {
		t.Fatalf("hold: %+v, want %v held", p, net.HardwareAddr(old[:]))
	}
	// The kernel has the new router's MAC within milliseconds.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if m, st, ok := neighMAC(t, l.lbH, l.lbIf, l.gwAddr); ok && m == l.peerMAC && confirmed(st) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the kernel did not resolve the gateway again (precondition)")
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case p := <-pubs:
		if !p.has || p.mac != l.peerMAC {
			t.Fatalf("published %+v, want %v", p, net.HardwareAddr(l.peerMAC[:]))
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the kernel resolved the gateway at %v, but the resolver still publishes the old router's %v: it looks again only at its next interval (the hold poked, but set no retry)",
			net.HardwareAddr(l.peerMAC[:]), net.HardwareAddr(old[:]))
	}
}

// TestResolverReloadDuringHold: gateway_ipv4 changed by a reload while the
// old gateway's MAC is held: the new gateway is never published at it.
func TestResolverReloadDuringHold(t *testing.T) {
	changed := make(chan struct{}, 1)
	var gw atomic.Value
	l := newLAN(t, "y9rl")
	gw.Store(l.gwAddr)
	peer, _ := l.peerH.LinkByName(l.peerIf)
	if err := l.peerH.AddrAdd(peer, &netlink.Addr{IPNet: &net.IPNet{IP: l.gwAddr.AsSlice(), Mask: net.CIDRMask(24, 32)}}); err != nil {
		t.Fatal(err)
	}
	addNeigh(t, l.lbH, l.lbIf, l.gwAddr, l.peerMAC, netlink.NUD_REACHABLE)
	type pub struct {
		g  Gateways
		nh dataplane.NextHop
	}
	pubs := make(chan pub, 1024)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	r := &Resolver{Iface: l.lbIf, Netns: l.lbNS, Interval: time.Hour}
	go func() {
		defer close(done)
		r.Run(ctx, func() Gateways { return Gateways{IPv4: gw.Load().(netip.Addr)} }, changed, func(g Gateways, nh dataplane.NextHop) bool {
			pubs <- pub{g, nh}
			return true
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	if p := <-pubs; !p.nh.Has4 {
		t.Fatalf("first %+v", p)
	}
	link, _ := l.lbH.LinkByName(l.lbIf)
	// The peer stops answering for A; A's entry vanishes: held.
	l.peerH.AddrDel(peer, &netlink.Addr{IPNet: &net.IPNet{IP: l.gwAddr.AsSlice(), Mask: net.CIDRMask(24, 32)}})
	if err := l.lbH.NeighDel(&netlink.Neigh{LinkIndex: link.Attrs().Index, Family: netlink.FAMILY_V4, IP: l.gwAddr.AsSlice()}); err != nil {
		t.Fatal(err)
	}
	changed <- struct{}{}
	if p := <-pubs; !p.nh.Has4 || p.nh.MAC4 != l.peerMAC {
		t.Fatalf("hold %+v", p)
	}
	b := netip.MustParseAddr("192.0.2.2") // nobody answers for it
	gw.Store(b)
	changed <- struct{}{}
	deadline := time.After(3 * time.Second)
	for {
		select {
		case p := <-pubs:
			if p.g.IPv4 == b && p.nh.Has4 {
				t.Fatalf("new gateway %v published at %v", b, net.HardwareAddr(p.nh.MAC4[:]))
			}
		case <-deadline:
			return
		}
	}
}
