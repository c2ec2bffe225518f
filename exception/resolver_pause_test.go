package exception

import (
	"context"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/fulcrumlb/fulcrum/dataplane"
)

// TestResolverPausedDaemonKeepsGateway: the daemon is paused (SIGSTOP, a
// VM paused for migration, a debugger) for some seconds. The exception
// tap is fed by the paused process, so the kernel's probes for the
// gateway (its own traffic, or the verification of a STALE entry the
// resolver had poked) go unanswered: the entry goes FAILED though the
// gateway never stopped answering. On resume the resolver's first round,
// much later than its interval, took FAILED for a lost gateway and
// published "no next hop": every tunnelled packet (and every check
// through the tunnel) was dropped as no-next-hop until ARP/ND completed
// again, a cost of the pause beyond the pause. A round that late must
// treat FAILED as an entry being resolved again (as a missing one): the
// last MAC is held while the kernel resolves it, for both families.
func TestResolverPausedDaemonKeepsGateway(t *testing.T) {
	var gate atomic.Pointer[chan struct{}]
	blocked := make(chan struct{}, 1)
	var l *lan
	pause := func() {
		if c := gate.Load(); c != nil {
			select {
			case blocked <- struct{}{}:
			default:
			}
			<-*c
		}
	}
	gws := func() Gateways { return Gateways{IPv4: l.gwAddr, IPv6: l.gwAddr6} }
	l0 := dualGatewayLAN(t, "pau")
	l = l0
	pubs := startPausableResolver(t, l, 50*time.Millisecond, gws, pause)
	deadline := time.Now().Add(10 * time.Second)
	for {
		nh := <-pubs
		if nh.Has4 && nh.Has6 && nh.MAC4 == l.peerMAC && nh.MAC6 == l.peerMAC {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("first publication %+v", nh)
		}
	}
	// Quick neighbour verification on the LB's side (the kernel's
	// defaults take 8 s to fail a STALE entry), so that the pause is short.
	in(t, l.lbNSh, func() error {
		for _, fam := range []string{"ipv4", "ipv6"} {
			for k, v := range map[string]string{"delay_first_probe_time": "1", "retrans_time_ms": "100"} {
				if err := os.WriteFile("/proc/sys/net/"+fam+"/neigh/"+l.lbIf+"/"+k, []byte(v), 0o644); err != nil {
					return err
				}
			}
		}
		return nil
	})

	// Pause: the resolver runs no round.
	g := make(chan struct{})
	gate.Store(&g)
	select {
	case <-blocked:
	case <-time.After(10 * time.Second):
		t.Fatal("the resolver did not reach its next round")
	}
	// While the daemon is stopped, nothing reads the tap: the gateway's
	// answers never reach the kernel (here: the peer does not answer).
	peer, err := l.peerH.LinkByName(l.peerIf)
	if err != nil {
		t.Fatal(err)
	}
	addrs := []*netlink.Addr{
		{IPNet: &net.IPNet{IP: l.gwAddr.AsSlice(), Mask: net.CIDRMask(24, 32)}},
		{IPNet: &net.IPNet{IP: l.gwAddr6.AsSlice(), Mask: net.CIDRMask(64, 128)}, Flags: 0x02},
	}
	for _, a := range addrs {
		if err := l.peerH.AddrDel(peer, a); err != nil {
			t.Fatal(err)
		}
	}
	// The kernel's own traffic to the gateway (BGP's retransmissions, or
	// a verification the resolver started just before the pause) makes
	// it verify the entries: unanswered, they fail.
	for _, ip := range []netip.Addr{l.gwAddr, l.gwAddr6} {
		addNeigh(t, l.lbH, l.lbIf, ip, l.peerMAC, netlink.NUD_STALE)
		poke(l.lbNS, l.lbIf, ip)
	}
	deadline = time.Now().Add(15 * time.Second)
	for _, ip := range []netip.Addr{l.gwAddr, l.gwAddr6} {
		for {
			if _, st, _, _, failed := lookup(l.lbNS, l.lbIf, ip); failed && st == 0 {
				break
			}
			if time.Now().After(deadline) {
				m, st, _ := neighMAC(t, l.lbH, l.lbIf, ip)
				t.Fatalf("precondition: %v's entry did not fail during the pause (%v %#x)", ip, net.HardwareAddr(m[:]), st)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// Resume: the tap is read again and the gateway's answers reach the
	// kernel; the resolver's round comes, far later than its interval.
	for _, a := range addrs {
		if err := l.peerH.AddrAdd(peer, a); err != nil {
			t.Fatal(err)
		}
	}
	gate.Store(nil)
	close(g)

	// Until the kernel has both entries confirmed at the gateway's MAC
	// again, every publication keeps the gateway's MAC.
	deadline = time.Now().Add(15 * time.Second)
	for {
		select {
		case nh := <-pubs:
			if !nh.Has4 || !nh.Has6 || nh.MAC4 != l.peerMAC || nh.MAC6 != l.peerMAC {
				t.Fatalf("after the pause the resolver published %+v (ipv4 %v, ipv6 %v): the gateway, which never stopped answering, was dropped as unresolved while the kernel resolved it again",
					nh, nh.Has4, nh.Has6)
			}
		case <-time.After(10 * time.Millisecond):
		}
		m4, st4, _ := neighMAC(t, l.lbH, l.lbIf, l.gwAddr)
		m6, st6, _ := neighMAC(t, l.lbH, l.lbIf, l.gwAddr6)
		if m4 == l.peerMAC && confirmed(st4) && m6 == l.peerMAC && confirmed(st6) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not resolved again after the pause: ipv4 %#x, ipv6 %#x", st4, st6)
		}
	}
	// Drain what the resolver published meanwhile.
	for {
		select {
		case nh := <-pubs:
			if !nh.Has4 || !nh.Has6 {
				t.Fatalf("after the pause the resolver published %+v", nh)
			}
			continue
		default:
		}
		break
	}
}

// startResolver runs a resolver on l's LB interface at interval for
// gateways gws until the test ends; its publications come on the channel.
func startResolver(t *testing.T, l *lan, interval time.Duration, gws func() Gateways) chan dataplane.NextHop {
	t.Helper()
	return startPausableResolver(t, l, interval, gws, nil)
}

// startPausableResolver is startResolver whose rounds call pause first:
// a pause there is one of the process (the resolver's clock runs on).
func startPausableResolver(t *testing.T, l *lan, interval time.Duration, gws func() Gateways, pause func()) chan dataplane.NextHop {
	t.Helper()
	pubs := make(chan dataplane.NextHop, 4096)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	r := &Resolver{Iface: l.lbIf, Netns: l.lbNS, Interval: interval, paused: pause}
	go func() {
		defer close(done)
		r.Run(ctx, gws, nil, func(_ Gateways, nh dataplane.NextHop) bool { pubs <- nh; return true })
	}()
	t.Cleanup(func() { cancel(); <-done })
	return pubs
}

// TestResolverPausedGatewayGoneStillUnresolved: the hold after a pause is
// only a hold: a gateway that really left during the pause (it answers
// nothing after it either) is published unresolved once the kernel's new
// resolution fails, as without the pause.
func TestResolverPausedGatewayGoneStillUnresolved(t *testing.T) {
	var gate atomic.Pointer[chan struct{}]
	blocked := make(chan struct{}, 1)
	l := dualGatewayLAN(t, "pau")
	pause := func() {
		if c := gate.Load(); c != nil {
			select {
			case blocked <- struct{}{}:
			default:
			}
			<-*c
		}
	}
	gws := func() Gateways { return Gateways{IPv4: l.gwAddr} }
	in(t, l.lbNSh, func() error {
		for k, v := range map[string]string{"delay_first_probe_time": "1", "retrans_time_ms": "100"} {
			if err := os.WriteFile("/proc/sys/net/ipv4/neigh/"+l.lbIf+"/"+k, []byte(v), 0o644); err != nil {
				return err
			}
		}
		return nil
	})
	pubs := startPausableResolver(t, l, 50*time.Millisecond, gws, pause)
	if nh := <-pubs; !nh.Has4 || nh.MAC4 != l.peerMAC {
		t.Fatalf("first publication %+v", nh)
	}
	g := make(chan struct{})
	gate.Store(&g)
	select {
	case <-blocked:
	case <-time.After(10 * time.Second):
		t.Fatal("the resolver did not reach its next round")
	}
	gatewayLeaves(t, l)
	gate.Store(nil)
	close(g)
	deadline := time.Now().Add(reResolveHold + 10*time.Second)
	for {
		select {
		case nh := <-pubs:
			if nh.Has4 && nh.MAC4 != l.peerMAC {
				t.Fatalf("published %+v", nh)
			}
			if !nh.Has4 {
				return
			}
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("a gateway gone since the pause is still published after the hold")
		}
	}
}

// gatewayLeaves removes the IPv4 gateway from the LAN and waits until the
// kernel, asked to verify the LB's entry for it, has failed it.
func gatewayLeaves(t *testing.T, l *lan) {
	t.Helper()
	peer, err := l.peerH.LinkByName(l.peerIf)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.peerH.AddrDel(peer, &netlink.Addr{IPNet: &net.IPNet{IP: l.gwAddr.AsSlice(), Mask: net.CIDRMask(24, 32)}}); err != nil {
		t.Fatal(err)
	}
	addNeigh(t, l.lbH, l.lbIf, l.gwAddr, l.peerMAC, netlink.NUD_STALE)
	poke(l.lbNS, l.lbIf, l.gwAddr)
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, st, _, _, failed := lookup(l.lbNS, l.lbIf, l.gwAddr); failed && st == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("precondition: the gateway's entry did not fail")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
