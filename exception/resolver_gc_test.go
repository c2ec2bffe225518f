package exception

import (
	"net"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
)

// TestResolverHoldsGatewayWhileKernelReResolves: the kernel
// removes an unreferenced neighbour entry whose last update is more than
// 5 s old whenever a new entry is allocated with the table (shared by
// every namespace) over gc_thresh2 (512) and no forced GC ran for 5 s
// (neigh_alloc -> neigh_forced_gc). A station on the LAN that sends ARP
// requests for the LB's address from ~520 spoofed sender addresses (each
// becomes a STALE entry; about 100 a second, a twentieth of the
// neighbour punt budget) makes the kernel drop the gateway's REACHABLE
// entry every few seconds. The gateway is alive and answers at once; yet
// the resolver took the missing (then INCOMPLETE) entry for a lost
// gateway and published it unresolved: every tunnelled packet dropped as
// no-next-hop until the next round. The removal is simulated here with
// the delete the kernel's GC does (filling the machine-wide table would
// disturb every other namespace on the host).
func TestResolverHoldsGatewayWhileKernelReResolves(t *testing.T) {
	l, pubs := gatewayLAN(t, "rgc", nil, 20*time.Millisecond, nil)
	if p := <-pubs; !p.has || p.mac != l.peerMAC {
		t.Fatalf("first: %v %v, want %v", net.HardwareAddr(p.mac[:]), p.has, net.HardwareAddr(l.peerMAC[:]))
	}
	link, err := l.lbH.LinkByName(l.lbIf)
	if err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 5; round++ {
		// What neigh_forced_gc does to the gateway's entry.
		if err := l.lbH.NeighDel(&netlink.Neigh{LinkIndex: link.Attrs().Index, Family: netlink.FAMILY_V4, IP: l.gwAddr.AsSlice()}); err != nil {
			t.Fatalf("round %d: deleting the entry: %v", round, err)
		}
		// Until the kernel has the gateway again, confirmed.
		deadline := time.Now().Add(10 * time.Second)
		for {
			select {
			case p := <-pubs:
				if !p.has {
					t.Fatalf("round %d: the kernel dropped the gateway's entry (neighbour GC) and resolved it again; the resolver published it unresolved meanwhile (every packet dropped as no-next-hop), want %v held", round, net.HardwareAddr(l.peerMAC[:]))
				}
				if p.mac != l.peerMAC {
					t.Fatalf("round %d: published %v, want %v", round, net.HardwareAddr(p.mac[:]), net.HardwareAddr(l.peerMAC[:]))
				}
			case <-time.After(5 * time.Millisecond):
			}
			if m, st, ok := neighMAC(t, l.lbH, l.lbIf, l.gwAddr); ok && m == l.peerMAC && confirmed(st) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the gateway not resolved again within 10s", round)
			}
		}
	}
	// A few more rounds of the resolver with the entry back: still nothing unresolved.
	deadline := time.Now().Add(200 * time.Millisecond)
	for time.Now().Before(deadline) {
		select {
		case p := <-pubs:
			if !p.has {
				t.Fatal("published unresolved after the gateway was resolved again")
			}
		case <-time.After(10 * time.Millisecond):
		}
	}
}
