package exception

import (
	"net"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
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
	// Rounds only when the test asks (changed), so that each one reads
	// the kernel's entry in the state the test has waited for.
	changed := make(chan struct{}, 1)
	l, pubs := gatewayLAN(t, "recl", map[string]string{"delay_first_probe_time": "1", "retrans_time_ms": "100"}, time.Hour, changed)
	round := func() published {
		t.Helper()
		changed <- struct{}{}
		select {
		case p := <-pubs:
			return p
		case <-time.After(10 * time.Second):
			t.Fatal("nothing published within 10s")
			return published{}
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
