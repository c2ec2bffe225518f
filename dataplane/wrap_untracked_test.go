package dataplane

import (
	"testing"

	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/sched"
)

// TestUntrackedWindowAcrossClockWrap: the README says that after a
// datagram flow of a load-based VIP found no conntrack slot, new datagram
// flows are placed by the Maglev table "for a UDP timeout" (30 s), and the
// scheduler chooses again "once the table has had room for that long". A
// single such event must not turn the scheduler off again 2^31 ms (24.8
// days) later: the window is computed in 32-bit wrapping time and the
// flag is never cleared, so from 24.8 to 49.7 days after the event (and in
// every second 24.8 days after that) every new datagram flow is placed by
// the table. Round-robin makes the difference exact: 32 new flows, 8 on
// each of the 4 backends.
func TestUntrackedWindowAcrossClockWrap(t *testing.T) {
	upEvery(t, []sched.Kind{sched.RoundRobin}, func(k sched.Kind) string { return upConfig(k, 64, 1500, 4, "") }, func(t *testing.T, k sched.Kind, r *rig) {
		now := conntrack.Time(2000)
		for i := 0; i < 200; i++ { // a table full of two-datagram flows
			f := upFlood(i, configtest.Web, 27015)
			now++
			upMust(t, r, now, f, f)
		}
		fail0 := r.w.ct.Counters().InsertFailed
		now += 10
		upMust(t, r, now, upEach(lpRange(0, 1), 100)...) // one stream finds no slot
		if r.w.ct.Counters().InsertFailed == fail0 {
			t.Fatal("the table had room: no untracked flow")
		}
		event := now
		for _, c := range []struct {
			after conntrack.Time
			from  int
		}{
			{60_000, 100},                      // a minute later
			{24 * 3600_000, 200},               // a day later
			{1<<31 + 60_000, 300},              // 24.8 days and a minute later
			{1<<31 + 7*86400_000, 400},         // a month later
			{^conntrack.Time(0) - 60_000, 500}, // 49.7 days less a minute later
		} {
			now = event + c.after
			got := upMust(t, r, now, upEach(lpRange(c.from, 32), 100)...)
			n := upCount(got)
			even := len(n) == 4
			for _, v := range n {
				even = even && v == 8
			}
			if !even {
				t.Errorf("%d ms after the one untracked flow (table empty since): 32 new round-robin flows went %v, want 8 on each of 4 backends", c.after, n)
			}
		}
	})
}
