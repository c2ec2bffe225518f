package dataplane

import (
	"testing"

	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/google/gopacket/layers"
)

// Passive health judges a backend by its handshakes tried (SYNs) and
// completed (Established). A SYN the dataplane keeps on a live entry
// (README: "A SYN on a live connection keeps its backend", SYNKept)
// leaves the entry's state alone (conntrack.Table.Keep), so the ACK that
// follows it never counts a completed handshake; counted as tried, every
// such SYN is a handshake failure charged to the pinned backend, whatever
// the backend did. Two cases, both paths: a real client that resets a
// connection and opens a new one on the same tuple (TestLegitEndAndReuse's
// pattern), whose handshake completes; and a blind spoofer's SYNs on one
// forged, established tuple, which by the pin all reach one backend. In
// neither may the tried handshakes exceed the completed ones: the backend
// failed nothing.
func TestKeptSYNIsNoFailedHandshake(t *testing.T) {
	for _, fused := range []bool{true, false} {
		r := newRig(t, testConfig)
		r.w.generalOnly = !fused
		seg := func(sp uint16, flags string) []byte {
			return frame(t, "198.51.100.96", configtest.Web, sp, 80, layers.IPProtocolTCP, flags, 0, true)
		}
		// A client: connection, RST, the same tuple again 2 s later.
		r.run(seg(25000, "S"))
		r.now += 30
		r.run(seg(25000, "A"))
		r.run(seg(25000, "RA"))
		r.now += 2000
		kept0 := r.w.c.SYNKept
		r.run(seg(25000, "S"))
		r.now += 30
		r.run(seg(25000, "A"))
		r.run(seg(25000, "PA"))
		if r.w.c.SYNKept != kept0+1 {
			t.Fatalf("fused %v: the reused tuple's SYN was not kept (SYNKept +%d)", fused, r.w.c.SYNKept-kept0)
		}
		if p := sumBackends(&r.w.c); p.SYNs > p.Established {
			t.Errorf("fused %v: RST, then a new connection on the tuple that completed: %d handshakes tried, %d completed; a completed handshake counted as a failure", fused, p.SYNs, p.Established)
		}
		// A spoofer: SYN, ACK, then 50 SYNs on the same tuple.
		r.run(seg(25001, "S"))
		r.run(seg(25001, "A"))
		before := sumBackends(&r.w.c)
		for range 50 {
			r.run(seg(25001, "S"))
		}
		if p := sumBackends(&r.w.c); p.SYNs-before.SYNs > 0 {
			t.Errorf("fused %v: 50 SYNs on one established tuple counted %d handshakes tried, %d completed: all charged to its one backend", fused, p.SYNs-before.SYNs, p.Established-before.Established)
		}
		wantBalance(t, r)
	}
}

// A tuple's handshake that never completed is tried once, however often
// its SYN is sent again: a SYN on its New entry is a retransmission
// (SYNRetrans). But a forged FIN (or RST, then an ACK, then a FIN) closes
// the New entry, and the next SYN on the tuple is "a new connection on a
// reused tuple", counted as tried again, on the tuple's one backend (the
// table's choice for it does not change). A blind spoofer repeating
// FIN, SYN on one 5-tuple charges one backend with as many failed
// handshakes as it likes, no hash key needed. At most one tried
// handshake of a tuple may stay uncompleted.
func TestReopenedTupleTriedOnce(t *testing.T) {
	for _, cycle := range [][]string{{"F", "S"}, {"R", "S", "A", "F", "S"}} {
		for _, fused := range []bool{true, false} {
			r := newRig(t, testConfig)
			r.w.generalOnly = !fused
			seg := func(flags string) []byte {
				return frame(t, "198.51.100.97", configtest.Web, 26000, 80, layers.IPProtocolTCP, flags, 0, true)
			}
			r.run(seg("S"))
			for range 50 {
				for _, fl := range cycle {
					r.now += 5
					r.run(seg(fl))
				}
			}
			if p := sumBackends(&r.w.c); p.SYNs > p.Established+1 {
				t.Errorf("cycle %v, fused %v: one tuple's forged segments counted %d handshakes tried, %d completed (%d SYN retransmissions)", cycle, fused, p.SYNs, p.Established, p.SYNRetrans)
			}
			wantBalance(t, r)
		}
	}
}
