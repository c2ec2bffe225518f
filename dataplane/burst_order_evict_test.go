package dataplane

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/google/gopacket/layers"
)

// The fused path commits its packets before the burst's general ones. A
// client's FIN committed that way closes the connection's entry (the
// lowest eviction rank) before the insert of a general packet that
// arrived earlier in the burst (here a new DNS datagram) runs, so that
// insert evicts the established connection, and the client's next segment
// in the same burst (data after its FIN: the FIN was forged, or a
// retransmission) misses and goes to the table's choice instead of the
// connection's backend. In arrival order (the general path alone) the
// datagram's insert comes first, meets an established entry it may not
// evict, and the data reaches the connection's backend and makes the entry
// established again (README: "The client's next data segment after a
// forged FIN shows it forged ... and the entry is established again").
// docs/benchmarks.md says of this ordering: "Every packet still goes to
// the same backend; only which half-open entry survives differs."
//
// Setup: a 16-entry table (two buckets, every flow's own and second), a
// connection established to be_P, be_P drained (weight 0: the table now
// sends the connection's hash elsewhere, its pin stays), the rest of the
// table filled with half-open flows; then one burst: a new DNS datagram,
// the connection's FIN, its data.
func TestBurstOrderFINThenEarlierInsertKeepsConnection(t *testing.T) {
	burstOrderClose(t, "FA", "PA", 100)
}

// The same with a forged RST and a forged SYN on the connection's tuple
// (README: "A SYN on a live connection keeps its backend ... Live means
// established, or closed by an RST alone"): in arrival order the SYN is
// kept on the connection's backend; with the RST committed first, the
// earlier datagram's insert evicts the entry and the SYN is taken for a
// new connection, placed by the table.
func TestBurstOrderRSTThenEarlierInsertKeepsSYNOnPin(t *testing.T) {
	burstOrderClose(t, "R", "S", 0)
}

func burstOrderClose(t *testing.T, closeFlags, nextFlags string, nextLen int) {
	tcp, udp := layers.IPProtocolTCP, layers.IPProtocolUDP
	const client = "198.51.100.35"
	for _, fused := range []bool{false, true} {
		t.Run(fmt.Sprintf("fused=%v", fused), func(t *testing.T) {
			moved := 0
			tried := 0
			for xport := uint16(40000); xport < 40016; xport++ {
				r := newRig(t, cfgWithCapacity(fastTestConfig, 16))
				r.w.generalOnly = !fused
				seg := func(flags string, payload int) []byte {
					return frame(t, client, "203.0.113.7", 49449, 80, tcp, flags, payload, true)
				}
				out, v := r.run(seg("S", 0))
				pin := tunnelDst(t, out[0], v[0])
				r.run(seg("A", 0))
				var pinName string
				for _, n := range []string{"be1", "be2", "be3"} {
					if backendAddr(r, "web", n) == pin {
						pinName = n
					}
				}
				r.publish(Overrides{{"web", pinName}: {Weight: 0}}) // drained: the pin stays, new flows go elsewhere
				for k := 0; r.w.ct.Len() < r.w.ct.Slots() && k < 200; k++ {
					r.run(frame(t, fmt.Sprintf("192.0.2.%d", 100+k), "203.0.113.7", uint16(1000+k), 80, tcp, "S", 0, true))
				}
				if r.w.ct.Len() != r.w.ct.Slots() {
					t.Fatalf("table holds %d of %d", r.w.ct.Len(), r.w.ct.Slots())
				}
				r.w.fastIdle = 0 // this burst tries the fused path (the daemon's back-off may or may not skip it)
				dns := frame(t, "198.51.100.200", "203.0.113.7", xport, 53, udp, "", 20, true)
				out, v = r.run(dns, seg(closeFlags, 0), seg(nextFlags, nextLen))
				tried++
				if got := tunnelDst(t, out[1], v[1]); got != pin {
					t.Fatalf("x port %d: the %s went to %v, the connection is on %v", xport, closeFlags, got, pin)
				}
				if got := tunnelDst(t, out[2], v[2]); got != pin {
					moved++
					t.Logf("x port %d: the %s after the %s went to %v, the connection is on %v", xport, nextFlags, closeFlags, got, pin)
				}
			}
			if moved > 0 {
				t.Errorf("%d of %d bursts sent the connection's %s after its %s to another backend than its own", moved, tried, nextFlags, closeFlags)
			}
		})
	}
	_ = netip.Addr{}
}
