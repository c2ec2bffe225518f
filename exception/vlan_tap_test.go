package exception

import (
	"net/netip"
	"testing"
	"time"
)

// TestKernelDropsTaggedFrames: the premise of the dataplane's
// TestTaggedFramesForHostNotPunted. An interface without a VLAN device
// (the exception tap; here a veth) takes an untagged or priority-tagged
// (VLAN 0) ARP request for its address, and drops one tagged with another
// VLAN (no device for the tag: PACKET_OTHERHOST), so punting such frames
// only costs the dataplane.
func TestKernelDropsTaggedFrames(t *testing.T) {
	l := newLAN(t, "vlan")
	tag := func(f []byte, vid uint16) []byte {
		out := append([]byte{}, f[:12]...)
		out = append(out, 0x81, 0x00, byte(vid>>8), byte(vid))
		return append(out, f[12:]...)
	}
	// Each request is from an address of its own: the kernel takes one
	// by making a neighbour entry for its sender (and answering).
	taken := func(spa netip.Addr) bool {
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) {
			if _, _, ok := neighMAC(t, l.lbH, l.lbIf, spa); ok {
				return true
			}
			time.Sleep(5 * time.Millisecond)
		}
		return false
	}
	a100, a0, aNone := netip.MustParseAddr("192.0.2.50"), netip.MustParseAddr("192.0.2.51"), netip.MustParseAddr("192.0.2.52")
	l.send(t, tag(arp(1, l.peerMAC, l.peerMAC, a100, l.lbAddr), 100))
	l.send(t, tag(arp(1, l.peerMAC, l.peerMAC, a0, l.lbAddr), 0))
	l.send(t, arp(1, l.peerMAC, l.peerMAC, aNone, l.lbAddr))
	if !taken(a0) || !taken(aNone) {
		t.Fatalf("untagged or priority-tagged ARP request not taken (precondition)")
	}
	// Sent first, from one CPU (lan.send): taken by now if ever.
	if _, _, ok := neighMAC(t, l.lbH, l.lbIf, a100); ok {
		t.Errorf("ARP request tagged with VLAN 100 taken by an interface without a VLAN device")
	}
}
