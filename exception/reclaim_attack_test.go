package exception

import (
	"context"
	"net"
	"os"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/fulcrumlb/fulcrum/dataplane"
)

// TestResolverHoldsClaimAfterFailedClaim: a station that claims the
// gateway's address with a broadcast ARP request (never answering a
// probe) has its claim held, and the kernel's entry fails; the resolver
// then publishes the gateway unresolved and pokes, and the real gateway
// answers. A second claim, made once the kernel has the gateway's real
// MAC again, must be held as the first was: the gateway's MAC was
// confirmed a moment ago, and the claim is as unconfirmed as before.
// Before, the hold compared with the last *published* MAC only, which
// was "unresolved", so the second claim was published at once: a station
// that merely broadcasts claims got the backends' traffic (every
// tunnelled packet, the clients' data in it) for one verification
// (5-8 s with the kernel's timers) out of every cycle, against README's
// "a station that merely broadcasts a claim to the gateway's address
// does not get the backends' traffic".
func TestResolverHoldsClaimAfterFailedClaim(t *testing.T) {
	l := newLAN(t, "recl")
	peer, err := l.peerH.LinkByName(l.peerIf)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.peerH.AddrAdd(peer, &netlink.Addr{IPNet: &net.IPNet{IP: l.gwAddr.AsSlice(), Mask: net.CIDRMask(24, 32)}}); err != nil {
		t.Fatal(err)
	}
	in(t, l.lbNSh, func() error {
		for k, v := range map[string]string{"delay_first_probe_time": "1", "retrans_time_ms": "100"} {
			if err := os.WriteFile("/proc/sys/net/ipv4/neigh/"+l.lbIf+"/"+k, []byte(v), 0o644); err != nil {
				return err
			}
		}
		return nil
	})
	addNeigh(t, l.lbH, l.lbIf, l.gwAddr, l.peerMAC, netlink.NUD_REACHABLE)

	type pub struct {
		mac [6]byte
		has bool
	}
	pubs := make(chan pub, 64)
	changed := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	// Rounds only when the test asks (changed), so that each one reads
	// the kernel's entry in the state the test has waited for.
	r := &Resolver{Iface: l.lbIf, Netns: l.lbNS, Interval: time.Hour}
	go func() {
		defer close(done)
		r.Run(ctx, func() Gateways { return Gateways{IPv4: l.gwAddr} }, changed, func(_ Gateways, nh dataplane.NextHop) bool {
			pubs <- pub{nh.MAC4, nh.Has4}
			return true
		})
	}()
	defer func() { cancel(); <-done }()
	round := func() pub {
		t.Helper()
		changed <- struct{}{}
		select {
		case p := <-pubs:
			return p
		case <-time.After(10 * time.Second):
			t.Fatal("nothing published within 10s")
			return pub{}
		}
	}
	waitEntry := func(what string, ok func(m [6]byte, st int, present bool) bool) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			m, st, present := neighMAC(t, l.lbH, l.lbIf, l.gwAddr)
			if ok(m, st, present) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("kernel entry never %s: %v state %#x present %v", what, net.HardwareAddr(m[:]), st, present)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if p := <-pubs; !p.has || p.mac != l.peerMAC {
		t.Fatalf("first: %v %v, want %v", net.HardwareAddr(p.mac[:]), p.has, net.HardwareAddr(l.peerMAC[:]))
	}
	claimed := [6]byte{2, 0, 0, 0, 0, 0x66} // no station answers for it
	isClaimed := func(m [6]byte, _ int, present bool) bool { return present && m == claimed }

	// The first claim: held, probed, failed.
	l.send(t, arp(1, claimed, claimed, l.gwAddr, l.lbAddr))
	waitEntry("the first claim", isClaimed)
	if p := round(); p.has && p.mac == claimed {
		t.Fatalf("first claim published at once")
	}
	waitEntry("failed", func(_ [6]byte, st int, present bool) bool {
		return !present || st&(netlink.NUD_FAILED|netlink.NUD_INCOMPLETE) != 0
	})
	p := round() // sees the failure: pokes, the gateway answers
	t.Logf("after the failed claim: %v has=%v", net.HardwareAddr(p.mac[:]), p.has)
	waitEntry("the gateway's, confirmed", func(m [6]byte, st int, present bool) bool {
		return present && m == l.peerMAC && confirmed(st)
	})

	// The second claim, the same as the first.
	l.send(t, arp(1, claimed, claimed, l.gwAddr, l.lbAddr))
	waitEntry("the second claim", isClaimed)
	if p := round(); p.has && p.mac == claimed {
		_, st, _ := neighMAC(t, l.lbH, l.lbIf, l.gwAddr)
		t.Fatalf("second broadcast claim published as the next hop: %v (kernel state %#x, unconfirmed); want %v or unresolved",
			net.HardwareAddr(p.mac[:]), st, net.HardwareAddr(l.peerMAC[:]))
	}
}
