package exception

import (
	"net"
	"testing"
	"time"
)

// TestResolverHoldsGatewayClaimedAtGroupMAC: a station that broadcasts one
// ARP request claiming the gateway's address at the broadcast MAC (or a
// multicast one, or zero, or the LB's own) leaves the kernel's entry for
// the gateway STALE with that MAC. Lookup rightly refuses it as a next
// hop; but the resolver then published the gateway unresolved, so that
// every tunnelled packet was dropped (no-next-hop) until the kernel's
// probes found the gateway again: with the kernel's default timers about
// 5 s of the LB forwarding nothing, for one packet, as often as the
// station repeats it. A claim at a unicast MAC nobody has is held (the
// last MAC stays published until the kernel confirms another); a claim
// that can never be a next hop must not do more harm than that one.
func TestResolverHoldsGatewayClaimedAtGroupMAC(t *testing.T) {
	// Quick probes; locktime 0, so that the gateway's answer to a probe
	// made within a second of the claim is taken (the kernel's default
	// probes come after that second).
	l, pubs := gatewayLAN(t, "gclm", map[string]string{"delay_first_probe_time": "1", "retrans_time_ms": "100", "locktime": "0"}, 20*time.Millisecond, nil)
	if p := <-pubs; !p.has || p.mac != l.peerMAC {
		t.Fatalf("first: %v %v, want %v", net.HardwareAddr(p.mac[:]), p.has, net.HardwareAddr(l.peerMAC[:]))
	}

	attacker := [6]byte{2, 0, 0, 0, 0, 0x66}
	for _, bad := range [][6]byte{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, {0x01, 0x00, 0x5e, 0, 0, 1}, {0x33, 0x33, 0, 0, 0, 1}} {
		l.send(t, arp(1, attacker, bad, l.gwAddr, l.lbAddr))
		deadline := time.Now().Add(5 * time.Second)
		for {
			if m, _, ok := neighMAC(t, l.lbH, l.lbIf, l.gwAddr); ok && m == bad {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("claim at %v: the kernel did not take it (precondition)", net.HardwareAddr(bad[:]))
			}
			time.Sleep(2 * time.Millisecond)
		}
		// Until the kernel has the gateway's MAC again, confirmed, and
		// the resolver has published it (or published nothing new).
		deadline = time.Now().Add(15 * time.Second)
		for {
			select {
			case p := <-pubs:
				if !p.has || p.mac != l.peerMAC {
					km, kst, kok := neighMAC(t, l.lbH, l.lbIf, l.gwAddr)
					t.Logf("kernel entry %v state %#x present %v", net.HardwareAddr(km[:]), kst, kok)
					t.Fatalf("one ARP request claiming the gateway at %v: resolver published %v (has=%v); want %v kept",
						net.HardwareAddr(bad[:]), net.HardwareAddr(p.mac[:]), p.has, net.HardwareAddr(l.peerMAC[:]))
				}
				continue
			case <-time.After(10 * time.Millisecond):
			}
			if m, st, ok := neighMAC(t, l.lbH, l.lbIf, l.gwAddr); ok && m == l.peerMAC && confirmed(st) {
				break
			}
			if time.Now().After(deadline) {
				m, st, _ := neighMAC(t, l.lbH, l.lbIf, l.gwAddr)
				t.Fatalf("claim at %v: kernel entry %v state %#x after 15s", net.HardwareAddr(bad[:]), net.HardwareAddr(m[:]), st)
			}
		}
		// Let a round pass on the confirmed entry before the next claim.
		for len(pubs) > 0 {
			<-pubs
		}
	}
}
