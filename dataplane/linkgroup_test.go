package dataplane

import (
	"testing"

	"github.com/google/gopacket/layers"
)

// toMAC is frame f sent to the Ethernet destination mac.
func toMAC(f []byte, mac ...byte) []byte {
	g := append([]byte(nil), f...)
	copy(g[0:6], mac)
	return g
}

// VIP traffic in a frame to a broadcast or multicast MAC address is
// dropped as vip-link-broadcast on both paths: routers send VIP traffic
// to the LB's own MAC, and a frame to a group address reaches every LB of
// the segment, each of which forwarded a copy to the backend (an
// established flow's packet on the fused path, a new flow's SYN, a
// datagram, an echo request to the VIP). The host's traffic in group
// frames (ARP, a broadcast to the LB's own address) still reaches the
// kernel.
func TestVIPLinkGroupDropped(t *testing.T) {
	tw := newTwin(t, fastTestConfig)
	const client, vip = "198.51.100.20", "203.0.113.7"
	syn := frame(t, client, vip, 40000, 80, layers.IPProtocolTCP, "S", 0, true)
	ack := frame(t, client, vip, 40000, 80, layers.IPProtocolTCP, "A", 10, true)
	tw.burst("open", [][]byte{syn})
	tw.burst("establish", [][]byte{ack, ack})
	bcast := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	mcast := []byte{0x01, 0x00, 0x5e, 0x00, 0x00, 0x07}
	arp := toMAC(make([]byte, 42), bcast...)
	arp[12], arp[13] = 0x08, 0x06
	copy(arp[14:], []byte{0, 1, 8, 0, 6, 4, 0, 1})
	burst := [][]byte{
		ack,                  // 0: forwarded
		toMAC(ack, bcast...), // 1: the established flow, to broadcast
		toMAC(ack, mcast...), // 2: to a multicast MAC
		ack,                  // 3: forwarded
		toMAC(frame(t, "198.51.100.21", vip, 40001, 80, layers.IPProtocolTCP, "S", 0, true), bcast...), // 4: a new flow
		toMAC(frame(t, "198.51.100.22", vip, 40002, 53, layers.IPProtocolUDP, "", 20, true), mcast...), // 5: a datagram
		toMAC(icmpEcho(t, "198.51.100.23", vip), bcast...),                                             // 6: an echo request
		arp, // 7: ARP: the kernel's
		toMAC(frame(t, client, lb4, 40003, 22, layers.IPProtocolTCP, "S", 0, true), bcast...), // 8: to the LB's address: the kernel's
	}
	want := []Verdict{Tx, Drop, Drop, Tx, Drop, Drop, Drop, Punt, Punt}
	before := tw.slow.w.c.Drops[DropVIPLinkGroup]
	beforeFast := tw.fast.w.c.Drops[DropVIPLinkGroup]
	tw.burst("group frames", burst)
	tw.same("group frames")
	for i, w := range want {
		if got := tw.slow.w.Verdicts[i]; got != w {
			t.Errorf("packet %d: verdict %v, want %v", i, got, w)
		}
	}
	if n := tw.slow.w.c.Drops[DropVIPLinkGroup] - before; n != 5 {
		t.Errorf("%d counted as vip-link-broadcast, want 5", n)
	}
	if n := tw.fast.w.c.Drops[DropVIPLinkGroup] - beforeFast; n != 5 {
		t.Errorf("fused path: %d counted as vip-link-broadcast, want 5", n)
	}
}
