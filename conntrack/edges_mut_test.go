package conntrack

import (
	"testing"

	"github.com/fulcrumlb/fulcrum/packet"
)

// Edge cases that no other test of the package pinned down: a mutation
// audit changed each line they guard (a comparison, a condition, a
// constant) and every other test still passed.

// A SYN ends the revived mark (entryRevived: "A close or a SYN ends the
// mark"): a new connection on the tuple of one revived by data after a
// FIN is in use however quiet its client is, like any established one.
// TestHalfClosedInUse means to check this, but its revived entry sees a
// FIN (which clears the mark too) before the SYN.
func TestSYNEndsRevivedMark(t *testing.T) {
	tb := newTable(t, 8)
	k := tuple4(1)
	e := tb.Insert(testHasher.Hash(&k), &k, StateNew, 1, 1, 1, 0)
	tb.TouchSegment(e, 0, packet.TCPAck, false)               // established
	tb.TouchSegment(e, 0, packet.TCPFin|packet.TCPAck, false) // closing
	tb.TouchSegment(e, 0, packet.TCPAck, true)                // data: the FIN was forged; revived
	if e.State() != StateEstablished || e.flags&entryRevived == 0 {
		t.Fatalf("setup: state %v flags %#x, want established and revived", e.State(), e.flags)
	}
	quiet := Time(halfClosedIdle)
	if e.InUse(quiet) {
		t.Fatalf("setup: revived entry quiet for %v still in use", HalfClosedIdle)
	}
	if !tb.TouchSegment(e, 0, packet.TCPSyn, false) || e.State() != StateNew {
		t.Fatalf("SYN on the revived entry: state %v, want a reopened new entry", e.State())
	}
	tb.TouchSegment(e, 0, packet.TCPAck, false)
	if e.State() != StateEstablished {
		t.Fatalf("ACK after the SYN: state %v", e.State())
	}
	if !e.InUse(quiet) {
		t.Fatalf("a new connection (SYN, ACK) on a revived entry's tuple, quiet for %v: not in use; a drain would read 0 while it lives", HalfClosedIdle)
	}
}

// ByIncarnation selects one VIP's entries: an entry of another VIP pinned
// to the same id and generation survives the drop.
func TestByIncarnationKeepsOtherVIP(t *testing.T) {
	tb := newTable(t, 64)
	k1, k2 := tuple4(1), tuple4(2)
	if tb.Insert(testHasher.Hash(&k1), &k1, StateNew, 1, 7, 3, 0) == nil ||
		tb.Insert(testHasher.Hash(&k2), &k2, StateNew, 2, 7, 3, 0) == nil {
		t.Fatal("insert")
	}
	if _, done := tb.Drop(ByIncarnation(7, 3, 1), 0, tb.Buckets()); !done {
		t.Fatal("drop not done")
	}
	if tb.Peek(testHasher.Hash(&k1), &k1, 0) != nil {
		t.Error("VIP 1's entry of backend 7 gen 3 survived its drop")
	}
	if tb.Peek(testHasher.Hash(&k2), &k2, 0) == nil {
		t.Error("VIP 2's entry of backend 7 gen 3 was dropped by VIP 1's ByIncarnation")
	}
	if c := tb.Counters(); c.Dropped != 1 || tb.Len() != 1 {
		t.Errorf("Dropped %d, Len %d; want 1, 1", c.Dropped, tb.Len())
	}
}

// AndChances widens an incarnation's selector within its VIP only: an
// entry of another VIP whose second chance names the same id survives.
func TestAndChancesKeepsOtherVIP(t *testing.T) {
	tb := newTable(t, 64)
	k1, k2 := tuple4(1), tuple4(2)
	e1 := tb.Insert(testHasher.Hash(&k1), &k1, StateNew, 1, 5, 1, 0)
	e2 := tb.Insert(testHasher.Hash(&k2), &k2, StateNew, 2, 5, 1, 0)
	if e1 == nil || e2 == nil {
		t.Fatal("insert")
	}
	e1.SetChance(7)
	e2.SetChance(7)
	tb.Drop(ByIncarnation(7, 1, 1).AndChances(), 0, tb.Buckets())
	if tb.Peek(testHasher.Hash(&k1), &k1, 0) != nil {
		t.Error("VIP 1's entry whose chance names backend 7 survived")
	}
	if tb.Peek(testHasher.Hash(&k2), &k2, 0) == nil {
		t.Error("VIP 2's entry whose chance names id 7 was dropped by VIP 1's selector")
	}
}

// AndChances widens only an incarnation's selector: ByBackend's (every
// VIP) is left as it is, and does not select VIP 0's entries whose
// chance names the id.
func TestAndChancesOnlyIncarnation(t *testing.T) {
	tb := newTable(t, 64)
	k := tuple4(1)
	e := tb.Insert(testHasher.Hash(&k), &k, StateNew, 0, 5, 1, 0)
	e.SetChance(7)
	tb.Drop(ByBackend(7).AndChances(), 0, tb.Buckets())
	if tb.Peek(testHasher.Hash(&k), &k, 0) == nil {
		t.Error("ByBackend(7).AndChances() dropped VIP 0's entry pinned to 5 (chance 7)")
	}
}

// A negative budget visits nothing and leaves the cursor where it was:
// it must not move a drop's cursor backwards (then below 0, which a scan
// takes as done).
func TestScanNegativeBudget(t *testing.T) {
	tb := newTable(t, 1024)
	next, done := tb.Scan(3, -1, func(*Entry) { t.Error("visited an entry") })
	if next != 3 || done {
		t.Fatalf("Scan(3, -1) = %d, %v; want 3, false", next, done)
	}
}

// Insert takes an out-of-range state as StateOther (its doc), so the entry
// has a valid state and its eviction counts a valid index.
func TestInsertInvalidStateIsOther(t *testing.T) {
	tb := newTable(t, 8)
	k := tuple4(1)
	e := tb.Insert(testHasher.Hash(&k), &k, NumStates, 1, 1, 1, 0)
	if e == nil || e.State() != StateOther {
		t.Fatalf("Insert(state %d): entry state %v, want other", NumStates, e.State())
	}
}

// TryHandshake: a handshake is counted as tried once until it completes.
func TestTryHandshakeOncePerHandshake(t *testing.T) {
	var e Entry
	e.MarkSYN()
	if e.TryHandshake() {
		t.Fatal("SYN repeated after MarkSYN: counted as another try")
	}
	e.HandshakeDone()
	if !e.TryHandshake() {
		t.Fatal("SYN after a completed handshake: not counted as a try")
	}
	if e.TryHandshake() {
		t.Fatal("SYN repeated before the handshake completed: counted again")
	}
}

// Peek agrees with Lookup at the timeout's edge: an entry idle exactly its
// timeout is live for both.
func TestPeekAtTimeoutEdge(t *testing.T) {
	tb := newTable(t, 8)
	k := tuple4(1)
	h := testHasher.Hash(&k)
	tb.Insert(h, &k, StateNew, 1, 1, 1, 0)
	edge := tb.Timeout(StateNew)
	if tb.Peek(h, &k, edge) == nil {
		t.Fatalf("Peek at idle == timeout: nil, want the entry (Lookup returns it)")
	}
	if tb.Lookup(h, &k, edge) == nil {
		t.Fatalf("Lookup at idle == timeout: nil")
	}
	if tb.Peek(h, &k, edge+1) != nil {
		t.Fatalf("Peek past the timeout: entry")
	}
}
