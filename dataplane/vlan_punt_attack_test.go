package dataplane

import (
	"testing"

	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/punt"
)

// tagVID inserts an 802.1Q tag of VLAN vid into an untagged frame.
func tagVID(f []byte, vid uint16) []byte {
	return cat(f[:12], []byte{0x81, 0x00, byte(vid >> 8), byte(vid)}, f[12:])
}

// TestTaggedFramesForHostNotPunted: the kernel's end of the tap has no
// VLAN interface, so it drops every frame tagged with a VLAN other than 0
// (Linux: no VLAN device for the tag, PACKET_OTHERHOST; shown on a veth in
// the exception package's rig), ARP and packets to the LB's address alike;
// its answers are untagged. Punted, each costs the forwarding core the
// tap's write and a token of its class's budget: on a trunk port every
// other VLAN's broadcast ARP is such a frame, and a flood of them starved
// the LB's own (untagged) ARP, as flooded unicast ARP between other hosts
// did before not-for-host. A priority tag (VLAN 0) is the kernel's, and
// punted.
func TestTaggedFramesForHostNotPunted(t *testing.T) {
	r := newRig(t, testConfig)
	arp, _, _, _, _ := puntFrames(t)
	cases := []struct {
		name string
		f    []byte
		want Verdict
	}{
		{"ARP request for the LB on VLAN 100", tagVID(arp(1), 100), Drop},
		{"ssh to the LB on VLAN 100", tagVID(frame(t, "198.51.100.7", lb4, 40000, 22, layers.IPProtocolTCP, "S", 0, true), 100), Drop},
		{"ARP request for the LB, priority-tagged (VLAN 0)", tagVID(arp(2), 0), Punt},
		{"ARP request for the LB, untagged", arp(3), Punt},
	}
	for _, tc := range cases {
		if _, v := r.run(tc.f); v[0] != tc.want {
			t.Errorf("%s: verdict %v, want %v", tc.name, v[0], tc.want)
		}
	}

	// A trunk's other VLANs' broadcast ARP, a burst of it every
	// millisecond: the LB's own ARP request must still reach the kernel.
	r.now += 100000
	for i := range 20 {
		fs := make([][]byte, 32)
		for j := range fs {
			fs[j] = tagVID(arp(i*32+j), 100+uint16(j))
		}
		r.runAt(fs...)
	}
	if v := r.runAt(arp(4)); v[0] != Punt {
		t.Errorf("after other VLANs' broadcast ARP, the LB's own ARP request: %v (neighbour limited %d)", v[0], r.w.c.PuntLimited[punt.Neighbour])
	}
	wantBalance(t, r)
}
