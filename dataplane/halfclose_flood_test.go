package dataplane

import (
	"testing"

	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/sched"
)

// TestHalfCloseDownloadSurvivesSYNFlood: clients that shut down their
// side and go on acknowledging a server's long response keep their
// backend through a SYN flood that fills every bucket of a small table
// many times over, as established connections do. Their entries are
// closing (the client's FIN), the class a SYN evicts first; from their
// second ACK after the FIN they rank above new (conntrack's eviction
// order), so the flood's SYNs evict each other instead. Under a
// load-based scheduler an evicted entry sends the next ACK by the Maglev
// table to a backend that has no such connection and resets it.
func TestHalfCloseDownloadSurvivesSYNFlood(t *testing.T) {
	const capacity = 1024 // 128 buckets of 8
	lpEvery(t, capacity, func(t *testing.T, k sched.Kind, r *rig) {
		half, open := lpRange(0, 32), lpRange(32, 32)
		all := append(append([]int(nil), half...), open...)
		be, now := lpOpen(t, r, 2000, all)
		now += 20
		got := lpAt(t, r, now, lpEach(all, func(c int) []byte {
			if c < 32 {
				return lpSeg(c, lpFA, 0, nil) // shutdown(SHUT_WR)
			}
			return lpSeg(c, lpA, 0, nil)
		})...)
		if m := lpMoved(be, got); m > 0 {
			t.Fatalf("FIN: %d flows moved", m)
		}
		for step := range 2 { // the response arriving: the clients ACK it
			now += 20
			if m := lpMoved(be, lpAt(t, r, now, lpEach(all, func(c int) []byte { return lpSeg(c, lpA, 0, nil) })...)); m > 0 {
				t.Fatalf("ACK %d: %d flows moved", step, m)
			}
		}
		// The flood: 8,192 SYNs of distinct spoofed sources, 8 per slot.
		ev0 := r.w.ct.Counters().Evicted
		flood := 1000
		for b := 0; b < 8*capacity/32; b++ {
			fr := make([][]byte, 32)
			for i := range fr {
				fr[i] = lpSeg(flood, lpS, 0, nil)
				flood++
			}
			r.run(fr...)
		}
		ev := r.w.ct.Counters().Evicted
		if ev[conntrack.StateNew]-ev0[conntrack.StateNew] < capacity {
			t.Fatalf("the flood evicted %d new entries, want at least %d: not the pressure this test needs", ev[conntrack.StateNew]-ev0[conntrack.StateNew], capacity)
		}
		now = r.now + 20
		got = lpAt(t, r, now, lpEach(all, func(c int) []byte { return lpSeg(c, lpA, 0, nil) })...)
		if m := lpMoved(be[32:], got[32:]); m > 0 {
			t.Errorf("%v: %d of 32 established connections moved during the flood", k, m)
		}
		if m := lpMoved(be[:32], got[:32]); m > 0 {
			t.Errorf("%v: %d of 32 half-closed downloads moved during the flood (closing entries evicted: %d)", k, m, ev[conntrack.StateClosing]-ev0[conntrack.StateClosing])
		}
	})
}
