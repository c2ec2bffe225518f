package conntrack

import (
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/flow"
	"github.com/fulcrumlb/fulcrum/packet"
)

// modelEntry is what the model remembers of a flow.
type modelEntry struct {
	vip          uint16
	backend, gen uint32
	seen         Time
	state        State
	reset        bool // closed by an RST alone (Entry.Live)
	once         bool // inserted as other and not touched since: ranks as new (entryOnce)
	acks         int  // segments without FIN, RST, SYN or data since the FIN (entryAcked, entryActive)
}

// modelRank is m's rank for eviction at now (rankOf).
func (m *modelEntry) modelRank(now Time) uint8 {
	if m.once {
		return rank[StateNew]
	}
	if m.state == StateClosing && m.acks >= 2 && int32(now-m.seen) < halfClosedIdle {
		return rankHalfClosed
	}
	return rank[m.state]
}

// touch is the model of Table.TouchSegment's state change (the package
// doc's policy): State.Next, except that a SYN with ACK, FIN or RST
// changes nothing, an RST without FIN closes and marks the entry (unless a
// FIN closed it before), a closing entry's segment without FIN, RST or SYN
// makes it established again if the entry is marked or the segment
// carries data, and anything else ends the mark.
func (m *modelEntry) touch(flags uint8, data bool) {
	m.once = false
	fin, rst, syn := flags&packet.TCPFin != 0, flags&packet.TCPRst != 0, flags&packet.TCPSyn != 0
	if syn && (fin || rst || flags&packet.TCPAck != 0) {
		return // no client's segment: no change
	}
	next := m.state.Next(flags)
	switch {
	case m.state == StateOther:
		m.reset = false
	case m.state == StateClosing && (m.reset || data) && !fin && !rst && !syn:
		next, m.reset = StateEstablished, false
	case rst && !fin && (m.state != StateClosing || m.reset):
		m.reset = true
	default:
		if m.state == StateClosing && !fin && !rst && !syn {
			m.acks++ // an acknowledgement after the FIN
		}
		m.reset = false
	}
	if m.state != StateClosing {
		m.acks = 0
	}
	m.state = next
}

// fuzzKeys are the flows of the fuzz target: v4 and v6, TCP, UDP and ICMP.
var fuzzKeys = func() []flow.Tuple {
	var ks []flow.Tuple
	for i := range 8 {
		ks = append(ks, tuple4(i), tuple6(i))
		k := tuple4(i)
		k.Proto, k.SrcPort, k.DstPort = packet.ProtoICMP, 0, 0
		ks = append(ks, k)
	}
	return ks
}()

// fuzzHash is a deliberately bad hash: 2 buckets and one signature for 24
// keys, so full buckets, evictions and signature collisions between
// different keys are the normal case; a key's second bucket (Table.alt)
// is the other one.
func fuzzHash(i int) uint64 { return uint64(i%3)<<48 | uint64(i%2) }

// FuzzTable drives random operation sequences against a map-based model.
// The table may forget flows only where the policy allows (expiry, eviction
// of an entry no more valuable than the newcomer by an insert whose own
// bucket held it, Delete/Remove/Drop of that flow); it must never return an entry
// whose key differs, never return an expired entry, and never disagree with
// the model on a flow it reports present.
func FuzzTable(f *testing.F) {
	f.Add([]byte{1, 0, 0, 1, 3, 1, 1, 6, 2, 0, 2, 1, 0, 0})
	f.Add([]byte{1, 0, 1, 1, 2, 1, 1, 4, 1, 1, 6, 1, 1, 8, 1, 1, 10, 1, 1, 12, 1, 1, 14, 1, 1, 16, 1, 1, 18, 1, 0, 20, 0})
	f.Add([]byte{1, 0, 3, 1, 1, 3, 1, 2, 3, 3, 200, 4, 1, 3, 0, 0, 1})
	f.Add([]byte{1, 5, 2, 1, 7, 2, 7, 1, 0, 7, 0, 0, 5, 5, 0, 6, 7, 0, 8, 3, 0})
	seq := []byte{}
	for i := range 24 {
		seq = append(seq, 1, byte(i), byte(i%5))
	}
	seq = append(seq, 8, 0, 7, 3, 90, 8, 4, 0, 2, 7, 19, 3, 255, 4, 0, 1)
	f.Add(seq)

	f.Fuzz(func(t *testing.T, ops []byte) {
		cfg := Config{Capacity: 16, TCPNewTimeout: time.Second, TCPEstablishedTimeout: 5 * time.Second,
			TCPClosingTimeout: time.Second, OtherTimeout: 2 * time.Second,
			Backends: 4} // ids 4 and up are pinned but not counted
		tb, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		model := map[flow.Tuple]modelEntry{}
		where := map[flow.Tuple]uint64{} // the bucket each entry was in after the last op
		now := ^Time(0) - 3000           // cross the clock's wrap
		expired := func(m modelEntry) bool { return int32(now-m.seen) > int32(tb.Timeout(m.state)) }
		check := func(k *flow.Tuple, e *Entry, what string) {
			if e == nil {
				return
			}
			m, ok := model[*k]
			if e.Key() != *k || !ok || expired(m) || m.vip != e.vip || m.backend != e.backend || m.gen != e.gen || m.seen != e.lastSeen || m.state != e.state || m.reset != e.Live() && e.state == StateClosing {
				t.Fatalf("%s %v: table %+v, model %+v (present %v)", what, *k, *e, m, ok)
			}
		}
		arg := func(i int) byte {
			if i < len(ops) {
				return ops[i]
			}
			return 0
		}

		for i := 0; i < len(ops); i += 3 {
			op, a, b := ops[i]%9, int(arg(i+1)), arg(i+2)
			ki := a % len(fuzzKeys)
			k := &fuzzKeys[ki]
			h := fuzzHash(ki)
			var inserted *flow.Tuple // the flow an Insert added
			var insertState State
			var dropped Selector
			dropping, removed := false, (*flow.Tuple)(nil)

			switch op {
			case 0: // lookup
				e := tb.Lookup(h, k, now)
				check(k, e, "Lookup")
				if m, ok := model[*k]; e == nil && ok && !expired(m) {
					t.Fatalf("Lookup %v: miss for a live model entry %+v", *k, m)
				}
			case 1: // insert
				st := State(b % 4)
				m, had := model[*k]
				e := tb.Insert(h, k, st, uint16(b%3), uint32(b%5), uint32(a), now)
				if had && !expired(m) {
					if e == nil {
						t.Fatalf("Insert %v: nil for a live tracked flow", *k)
					}
					check(k, e, "Insert existing")
					break
				}
				if e != nil {
					model[*k] = modelEntry{uint16(b % 3), uint32(b % 5), uint32(a), now, st, false, st == StateOther, 0}
					inserted, insertState = k, st
					check(k, e, "Insert")
				}
			case 2: // a packet: lookup and touch
				if e := tb.Lookup(h, k, now); e != nil {
					check(k, e, "Lookup before Touch")
					data := (ops[i]/9)&1 != 0 // the segment carries data
					tb.TouchSegment(e, now, b, data)
					m := model[*k]
					m.seen = now
					m.touch(b, data)
					if b&0x20 != 0 { // the flow moves to another backend
						m.backend, m.gen = uint32(b>>2)%5, m.gen+1
						tb.Repin(e, m.backend, m.gen)
					}
					model[*k] = m
					check(k, e, "Touch")
				}
			case 3: // time passes (sometimes backwards, a stale clock)
				if b&0x80 != 0 {
					now -= Time(b & 0x7f)
				} else {
					now += Time(b) * 50
				}
			case 4:
				tb.Sweep(now, int(b%4))
			case 5:
				tb.Delete(h, k)
				removed = k
			case 6:
				if e := tb.Lookup(h, k, now); e != nil {
					tb.Remove(e)
				}
				removed = k
			case 7: // a complete drop
				dropped, dropping = ByBackend(uint32(b%5)), true
				if b&1 != 0 {
					dropped = ByVIP(uint16(b % 3))
				}
				for next, done := 0, false; !done; {
					next, done = tb.Drop(dropped, next, 1)
				}
			case 8: // a burst over several keys
				var hs [5]uint64
				var ks [5]*flow.Tuple
				var out [5]*Entry
				for j := range hs {
					kj := (a + j*int(b)) % len(fuzzKeys) // b = 0: the same flow 5 times
					hs[j], ks[j] = fuzzHash(kj), &fuzzKeys[kj]
				}
				tb.LookupBurst(hs[:], ks[:], now, out[:])
				for j := range out {
					check(ks[j], out[j], "LookupBurst")
					if m, ok := model[*ks[j]]; out[j] == nil && ok && !expired(m) {
						t.Fatalf("LookupBurst %v: miss for a live model entry %+v", *ks[j], m)
					}
				}
			}

			checkCounts(t, tb)
			// Reconcile: every table entry is in the model and agrees;
			// a model entry missing from the table left for a reason the
			// policy allows.
			inTable := map[flow.Tuple]bool{}
			tb.ForEach(func(e *Entry) {
				inTable[e.key] = true
				if b := uint64(tb.slotOf(e) / bucketSlots); b != fuzzBucket(e.key)&tb.mask && b != tb.alt(fuzzBucket(e.key)) {
					t.Fatalf("op %d: %v in bucket %d, neither its own nor its second", op, e.key, b)
				}
				where[e.key] = uint64(tb.slotOf(e) / bucketSlots)
				m, ok := model[e.key]
				if !ok || m.vip != e.vip || m.backend != e.backend || m.gen != e.gen || m.seen != e.lastSeen || m.state != e.state {
					t.Fatalf("op %d: table holds %+v, model %+v (present %v)", op, *e, m, ok)
				}
			})
			if len(inTable) != tb.Len() {
				t.Fatalf("Len %d, ForEach saw %d", tb.Len(), len(inTable))
			}
			evictions := 0
			for mk, m := range model {
				if inTable[mk] {
					continue
				}
				delete(model, mk)
				switch {
				case expired(m):
				case removed != nil && mk == *removed:
				case dropping && dropped.matches(&Entry{vip: m.vip, backend: m.backend}):
				case inserted != nil && where[mk] == fuzzBucket(*inserted)&tb.mask && m.modelRank(now) <= newcomerRank(insertState):
					// Evicted from the newcomer's own bucket, which is
					// where an insert into full buckets makes room.
					evictions++
				default:
					t.Fatalf("op %d: live flow %v %+v vanished", op, mk, m)
				}
			}
			if evictions > 1 {
				t.Fatalf("one insert evicted %d live entries", evictions)
			}
		}
	})
}

// fuzzBucket is the hash of a fuzz key.
func fuzzBucket(k flow.Tuple) uint64 {
	for i := range fuzzKeys {
		if fuzzKeys[i] == k {
			return fuzzHash(i)
		}
	}
	panic("not a fuzz key")
}

// checkCounts fails t unless the per-backend flow counts are those of
// the entries in the table of each id's newest generation, and no entry
// is of a newer one.
func checkCounts(t testing.TB, tb *Table) {
	t.Helper()
	per := make([]int32, len(tb.per))
	for s := range tb.entries {
		e := &tb.entries[s]
		if b := e.backend; tb.used(s) && int(b) < len(per) {
			switch g := tb.per[b].gen; {
			case e.gen == g:
				per[b]++
			case int32(e.gen-g) > 0:
				t.Fatalf("backend %d: an entry of generation %d, counted under %d", b, e.gen, g)
			}
		}
	}
	for b := range per {
		if per[b] != tb.per[b].n {
			t.Fatalf("backend %d: %d entries, counted %d", b, per[b], tb.per[b].n)
		}
	}
}
