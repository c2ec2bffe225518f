package dataplane

import (
	"net/netip"
	"testing"

	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/flow"
)

// fillConntrack inserts n flows from distinct client ports, backend id
// i%4, VIP id 1, and returns the tuples the table holds (a full bucket
// evicts) with their backends, read with the table's own full scan.
func fillConntrack(r *rig, n int) map[flow.Tuple]uint32 {
	r.t.Helper()
	h := flow.NewHasher(r.key)
	for i := range n {
		tu, _ := flow.TupleFrom(netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("203.0.113.7"), uint16(1024+i), 80, 6)
		if r.w.ct.Insert(h.Hash(&tu), &tu, conntrack.StateEstablished, 1, uint32(i%4), 0, r.now) == nil {
			r.t.Fatalf("insert %d failed", i)
		}
	}
	out := map[flow.Tuple]uint32{}
	r.w.ct.ForEach(func(e *conntrack.Entry) { out[e.Key()] = e.Backend() })
	if len(out) < n*9/10 {
		r.t.Fatalf("%d of %d flows in the table", len(out), n)
	}
	return out
}

// TestListOpBounded: a listing visits at most opBudget buckets per step
// (one step per burst), never puts more than its limit in a page, and
// paging from Next visits every entry exactly once.
func TestListOpBounded(t *testing.T) {
	r := newRig(t, testConfig)
	want := fillConntrack(r, 3000)
	got := map[flow.Tuple]int{}
	from, pages := 0, 0
	for {
		op := ListOp(from, 100, -1, -1)
		if err := r.w.Post(op); err != nil {
			t.Fatal(err)
		}
		steps := 0
		for !op.done.Load() {
			before := op.cursor
			r.w.serveOp(r.now)
			steps++
			if op.cursor-before > opBudget {
				t.Fatalf("one step visited %d buckets, budget %d", op.cursor-before, opBudget)
			}
			if steps > r.w.ct.Buckets()+1 {
				t.Fatal("the op does not finish")
			}
		}
		if len(op.Conns) > 100 {
			t.Fatalf("page of %d entries, limit 100", len(op.Conns))
		}
		for _, c := range op.Conns {
			got[c.Tuple]++
			if c.Backend != want[c.Tuple] || c.VIP != 1 || c.State != conntrack.StateEstablished {
				t.Errorf("entry %+v", c)
			}
		}
		pages++
		if op.Done {
			break
		}
		if op.Next <= from {
			t.Fatalf("cursor %d -> %d does not advance", from, op.Next)
		}
		from = op.Next
	}
	if len(got) != len(want) || pages < len(want)/100 {
		t.Errorf("listed %d of %d entries in %d pages", len(got), len(want), pages)
	}
	for tu, n := range got {
		if n != 1 {
			t.Errorf("%v listed %d times", tu, n)
		}
	}

	// A backend's entries only.
	be2 := 0
	for _, b := range want {
		if b == 2 {
			be2++
		}
	}
	op := ListOp(0, 10000, -1, 2)
	if err := r.w.Post(op); err != nil {
		t.Fatal(err)
	}
	for !op.done.Load() {
		r.w.serveOp(r.now)
	}
	if len(op.Conns) != be2 || !op.Done || be2 == 0 {
		t.Errorf("backend 2: %d entries (done %v), want %d", len(op.Conns), op.Done, be2)
	}
}

// TestFlushOpCountsMoved: a flush removes a backend's entries and counts
// them as moved.
func TestFlushOpCountsMoved(t *testing.T) {
	r := newRig(t, testConfig)
	all := fillConntrack(r, 400)
	var be3 uint64
	for _, b := range all {
		if b == 3 {
			be3++
		}
	}
	op := FlushOp(conntrack.ByBackend(3))
	if err := r.w.Post(op); err != nil {
		t.Fatal(err)
	}
	for !op.done.Load() {
		r.w.serveOp(r.now)
	}
	gen3 := r.shared.Services.Load().Backends[3].Gen
	if op.Flushed != be3 || r.w.c.Moved != be3 || r.w.ct.Len() != len(all)-int(be3) || r.w.ct.BackendFlows(3, gen3) != 0 || be3 == 0 {
		t.Errorf("flushed %d, moved %d, %d left, backend 3 has %d; want %d, %d, %d, 0",
			op.Flushed, r.w.c.Moved, r.w.ct.Len(), r.w.ct.BackendFlows(3, gen3), be3, be3, len(all)-int(be3))
	}
}

// TestDropRemovedVIPsOnePass: a reload that removes several VIPs clears
// their entries in one pass over the table (one op), and only theirs.
// Before, it posted one op, a whole pass, per removed VIP: a reload that
// removed thousands held each worker's op slot for minutes, and flow
// counts, listings and lookups failed as busy meanwhile.
func TestDropRemovedVIPsOnePass(t *testing.T) {
	r := newRig(t, testConfig)
	h := flow.NewHasher(r.key)
	ids := []uint16{100, 101, 102} // ids no VIP of the snapshot holds
	for i := range 900 {
		tu, _ := flow.TupleFrom(netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("203.0.113.7"), uint16(1024+i), 80, 6)
		if r.w.ct.Insert(h.Hash(&tu), &tu, conntrack.StateEstablished, ids[i%3], uint32(i%4), 0, r.now) == nil {
			t.Fatalf("insert %d failed", i)
		}
	}
	count := func() map[uint16]int {
		n := map[uint16]int{}
		r.w.ct.ForEach(func(e *conntrack.Entry) { n[e.VIP()]++ })
		return n
	}
	before := count()
	op := DropRemovedVIPOp(100, 102)
	if err := r.w.Post(op); err != nil {
		t.Fatal(err)
	}
	for steps := 0; !op.done.Load(); steps++ {
		if steps > r.w.ct.Buckets()+1 {
			t.Fatal("the op does not finish")
		}
		r.w.serveOp(r.now)
	}
	after := count()
	if after[100] != 0 || after[102] != 0 || after[101] != before[101] || before[101] == 0 {
		t.Errorf("entries by VIP id before %v, after dropping 100 and 102 in one op %v: want 100 and 102 gone, all %d of 101 kept", before, after, before[101])
	}
}
