package conntrack

import (
	"testing"

	"github.com/fulcrumlb/fulcrum/flow"
)

// ProbeBurst and Peek count no lookup; ProbeBurst reclaims the expired
// entries it meets (as LookupBurst does, so that the burst's inserts see
// their slots free), Peek changes nothing.
func TestProbeBurstAndPeek(t *testing.T) {
	tb := newTable(t, 64)
	live, old, none := tuple4(1), tuple4(2), tuple4(3)
	hl, ho, hn := testHasher.Hash(&live), testHasher.Hash(&old), testHasher.Hash(&none)
	tb.Insert(ho, &old, StateNew, 1, 1, 0, 0)
	now := 11 * sec // past the half-open timeout (10 s) of old
	tb.Insert(hl, &live, StateNew, 1, 1, 0, now)
	c0 := tb.Counters()
	if e := tb.Peek(hl, &live, now); e == nil || !e.Is(&live) {
		t.Fatalf("Peek of a live entry: %v", e)
	}
	if tb.Peek(ho, &old, now) != nil || tb.Peek(hn, &none, now) != nil {
		t.Fatal("Peek found an expired or absent flow")
	}
	if tb.Counters() != c0 || tb.Len() != 2 {
		t.Fatalf("Peek changed the table: %+v -> %+v, %d entries", c0, tb.Counters(), tb.Len())
	}
	out := make([]*Entry, 4)
	found := tb.ProbeBurst([]uint64{hl, ho, hn, ho}, ptrs(&live, &old, &none, &old), now, out)
	if found != 1 || out[0] == nil || !out[0].Is(&live) || out[1] != nil || out[2] != nil || out[3] != nil {
		t.Fatalf("ProbeBurst: found %d, out %v", found, out)
	}
	c := tb.Counters()
	if c.Hits != c0.Hits || c.Misses != c0.Misses || c.Expired != c0.Expired+1 || tb.Len() != 1 {
		t.Fatalf("ProbeBurst: counters %+v -> %+v, %d entries; want the expired entry reclaimed once and nothing else counted", c0, c, tb.Len())
	}
	tb.CountMiss()
	tb.CountHits(2)
	if c2 := tb.Counters(); c2.Misses != c.Misses+1 || c2.Hits != c.Hits+2 {
		t.Fatalf("CountMiss, CountHits(2): %+v -> %+v", c, c2)
	}
}

// A burst's lookups run before its inserts. LookupAgain turns a counted
// miss into a hit when an insert since made the entry; Stale turns a
// counted hit into a miss when an insert since evicted the entry for
// another flow, which Evictions tells.
func TestLookupAgainAndStale(t *testing.T) {
	tb := newTable(t, 16) // two buckets of 8: every flow has both
	now := sec
	k := tuple4(100)
	h := testHasher.Hash(&k)
	if tb.Lookup(h, &k, now) != nil {
		t.Fatal("found before the insert")
	}
	if tb.LookupAgain(h, &k, now) != nil {
		t.Fatal("LookupAgain found before the insert")
	}
	c0 := tb.Counters()
	tb.Insert(h, &k, StateNew, 1, 1, 0, now)
	if e := tb.LookupAgain(h, &k, now); e == nil {
		t.Fatal("LookupAgain missed the entry just inserted")
	}
	if c := tb.Counters(); c.Hits != c0.Hits+1 || c.Misses != c0.Misses-1 {
		t.Fatalf("LookupAgain's hit: %+v -> %+v, want the miss turned into a hit", c0, c)
	}

	// Fill the table with half-open flows, k the oldest, then look k up
	// and insert flows until one insert evicts it.
	for i := 0; tb.Len() < tb.Slots(); i++ {
		now++
		ki := tuple4(i)
		tb.Insert(testHasher.Hash(&ki), &ki, StateNew, 1, 1, 0, now)
	}
	e := tb.Lookup(h, &k, now)
	if e == nil {
		t.Fatal("k not found in the full table")
	}
	ev := tb.Evictions()
	var last flow.Tuple
	for i := 1000; tb.Peek(h, &k, now) != nil; i++ {
		if i > 2000 {
			t.Fatal("no insert evicted k")
		}
		last = tuple4(i)
		tb.Insert(testHasher.Hash(&last), &last, StateNew, 1, 1, 0, now)
	}
	if tb.Evictions() == ev {
		t.Fatal("Evictions did not change")
	}
	if e.Is(&k) {
		t.Fatal("k's old slot still holds k")
	}
	c1 := tb.Counters()
	if !tb.Stale(e, &k) {
		t.Fatal("Stale: false for an evicted entry")
	}
	if c := tb.Counters(); c.Hits != c1.Hits-1 || c.Misses != c1.Misses+1 {
		t.Fatalf("Stale: %+v -> %+v, want the hit turned into a miss", c1, c)
	}
	c2 := tb.Counters()
	if live := tb.Peek(testHasher.Hash(&last), &last, now); live == nil || tb.Stale(live, &last) {
		t.Fatalf("Stale: true for a live entry of its flow (%v)", live)
	}
	if tb.Counters() != c2 {
		t.Fatal("Stale counted for a live entry")
	}
}

func ptrs(ts ...*flow.Tuple) []*flow.Tuple { return ts }
