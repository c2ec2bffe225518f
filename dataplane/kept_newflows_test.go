package dataplane

import (
	"testing"

	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/google/gopacket/layers"
)

// TestKeptSYNsAreNoNewFlows: fulcrum_backend_new_flows_total is
// "New flows (conntrack misses) a VIP sent to a backend", and a drained
// backend takes "no new flows". A SYN the dataplane keeps on a live
// entry (SYNKept: port reuse, or a spoofer's SYN on a known tuple) is no
// conntrack miss and no new flow the backend was chosen for, yet each
// one is counted in the pinned backend's (and VIP's) new flows: in a
// daemon run, a drained backend's NEW-FLOWS grew from 149 to 1520 while
// drained. A blind spoofer repeating SYNs on one tuple inflates one
// backend's new flows at will.
func TestKeptSYNsAreNoNewFlows(t *testing.T) {
	for _, fused := range []bool{true, false} {
		r := newRig(t, testConfig)
		r.w.generalOnly = !fused
		seg := func(flags string) []byte {
			return frame(t, "198.51.100.98", configtest.Web, 27001, 80, layers.IPProtocolTCP, flags, 0, true)
		}
		r.run(seg("S"))
		r.now += 30
		r.run(seg("A"))
		before := sumBackends(&r.w.c)
		kept := r.w.c.SYNKept
		for range 50 {
			r.run(seg("S"))
		}
		if r.w.c.SYNKept != kept+50 {
			t.Fatalf("fused %v: SYNKept +%d, want 50", fused, r.w.c.SYNKept-kept)
		}
		if p := sumBackends(&r.w.c); p.NewFlows != before.NewFlows {
			t.Errorf("fused %v: 50 SYNs kept on one established tuple counted %d new flows (1 connection)", fused, p.NewFlows-before.NewFlows)
		}
	}
}
