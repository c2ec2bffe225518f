package conntrack

import (
	"testing"
)

// maxTimeoutTable is a table whose every timeout is MaxTimeout (7 days).
func maxTimeoutTable(t *testing.T, capacity int) *Table {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Capacity = capacity
	cfg.TCPNewTimeout, cfg.TCPEstablishedTimeout = MaxTimeout, MaxTimeout
	cfg.TCPClosingTimeout, cfg.OtherTimeout = MaxTimeout, MaxTimeout
	tb, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// TestProbeMaxTimeoutAcrossWrap: an entry with the longest configurable
// timeout, inserted just before the clock wraps, lives exactly its timeout
// (Lookup, Expired, Sweep, Insert agree) on the far side of the wrap.
func TestProbeMaxTimeoutAcrossWrap(t *testing.T) {
	to := Time(MaxTimeout / Resolution)
	for _, start := range []Time{^Time(0) - 1000, ^Time(0), ^Time(0) - to/2, 0, 1 << 31} {
		for _, st := range []State{StateNew, StateEstablished, StateClosing, StateOther} {
			for _, c := range []struct {
				age  Time
				live bool
			}{{0, true}, {to, true}, {to + 1, false}, {to + 60_000, false}} {
				now := start + c.age
				k := tuple4(int(c.age))
				h := testHasher.Hash(&k)
				// Lookup.
				tb := maxTimeoutTable(t, 64)
				e := tb.Insert(h, &k, st, 1, 1, 1, start)
				if tb.Expired(e, now) == c.live || (tb.Lookup(h, &k, now) != nil) != c.live {
					t.Errorf("%v from %d, age %d: live should be %v", st, start, c.age, c.live)
				}
				// Sweep over every bucket.
				tb = maxTimeoutTable(t, 64)
				tb.Insert(h, &k, st, 1, 1, 1, start)
				if n := tb.Sweep(now, tb.Buckets()); (n == 0) != c.live {
					t.Errorf("%v from %d, age %d: sweep removed %d", st, start, c.age, n)
				}
				// Insert of the same flow: the existing entry when live,
				// a fresh one (lastSeen now) when expired.
				tb = maxTimeoutTable(t, 64)
				tb.Insert(h, &k, st, 1, 7, 1, start)
				e = tb.Insert(h, &k, st, 1, 9, 1, now)
				if want := map[bool]uint32{true: 7, false: 9}[c.live]; e == nil || e.Backend() != want {
					t.Errorf("%v from %d, age %d: reinsert pinned %v, want %d", st, start, c.age, e, want)
				}
			}
		}
	}
}

// TestProbeSweepPacedAcrossWrap: the paced sweep keeps its pace (one pass
// of every bucket per pass ms) while the clock wraps, at a call every
// millisecond, with default and with maximal timeouts.
func TestProbeSweepPacedAcrossWrap(t *testing.T) {
	for _, tc := range []struct {
		name string
		tb   *Table
		step Time
	}{
		{"default", newTable(t, 4096), 1},
		{"max", maxTimeoutTable(t, 4096), 1000},
	} {
		tb := tc.tb
		nb := tb.Buckets()
		pass := Time(tb.pass)
		now := ^Time(0) - pass/2 // the wrap falls mid-pass
		tb.SweepPaced(now)
		for p := 0; p < 3; p++ {
			visited := 0
			for el := Time(0); el < pass; el += tc.step {
				now += tc.step
				before := tb.sweep
				tb.SweepPaced(now)
				visited += (tb.sweep - before + nb) % nb
			}
			if visited < nb-1 || visited > nb+1 {
				t.Errorf("%s: pass %d (now %d): %d buckets visited, want %d", tc.name, p, now, visited, nb)
			}
		}
	}
}

// TestProbeLongUptime: flows inserted all along 120 days (two wraps) with
// the paced sweep running every ms are each swept once idle past their
// timeout plus one pass, never earlier, and never kept.
func TestProbeLongUptime(t *testing.T) {
	tb := newTable(t, 256)
	nb := tb.Buckets()
	pass := Time(tb.pass)
	to := tb.Timeout(StateNew)
	// Jump the schedule to just before each wrap and run there a while.
	for _, base := range []Time{^Time(0) - 3*to, ^Time(0) - to/2, ^Time(0) - 7} {
		now := base
		tb.SweepPaced(now - 1)
		k := tuple4(int(base & 0xffff))
		h := testHasher.Hash(&k)
		if tb.Insert(h, &k, StateNew, 1, 1, 1, now) == nil {
			t.Fatal("insert failed")
		}
		gone := Time(0)
		for el := Time(0); el <= to+2*pass+2; el++ {
			now = base + el
			if tb.SweepPaced(now) > 0 && gone == 0 {
				gone = el
			}
		}
		if gone <= to || gone > to+pass+1 || tb.Len() != 0 {
			t.Errorf("from %d: swept at age %d (timeout %d, pass %d, %d buckets); %d left", base, gone, to, pass, nb, tb.Len())
		}
	}
}
