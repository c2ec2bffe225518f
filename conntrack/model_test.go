package conntrack

import (
	"math"
	"math/rand"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/flow"
	"github.com/fulcrumlb/fulcrum/packet"
)

// --- Edge cases -------------------------------------------------------------

// TestScanHugeBudget: Scan and Drop with a budget near MaxInt from a
// bucket other than 0 must still visit the buckets from there to the end
// (a budget larger than the table means "the rest of it").
func TestScanHugeBudget(t *testing.T) {
	tb := newTable(t, 64) // 8 buckets
	n := 0
	for i := 0; n < 40; i++ {
		k := tuple4(i)
		if tb.Insert(testHasher.Hash(&k), &k, StateNew, 1, 1, 1, 0) != nil {
			n++
		}
	}
	nb := tb.Buckets()
	want := 0
	tb.scan(1, nb, func(int, *Entry) { want++ })
	if want == 0 {
		t.Fatal("no entries beyond bucket 0")
	}
	got := 0
	next, done := tb.Scan(1, math.MaxInt, func(*Entry) { got++ })
	if got != want || next != nb || !done {
		t.Errorf("Scan(1, MaxInt): visited %d entries (want %d), next %d (want %d), done %v", got, want, next, nb, done)
	}
	before := tb.Len()
	next, done = tb.Drop(ByVIP(1), 1, math.MaxInt)
	if tb.Len() != before-want || next != nb || !done {
		t.Errorf("Drop(1, MaxInt): dropped %d (want %d), next %d, done %v", before-tb.Len(), want, next, done)
	}
}

// TestForgedRSTRanksLowest: one forged RST (blind spoofer knowing
// the 5-tuple) turns an idle established connection into a closing entry
// of rank 0 (Live, but the least valuable class), so a single new flow in
// a full bucket evicts it, where an established entry is never evicted by
// a SYN.
func TestForgedRSTRanksLowest(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Capacity = 8 // one bucket
	tb, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var keys []flow.Tuple
	for i := range 8 {
		k := tuple4(i)
		keys = append(keys, k)
		packetIn(tb, &k, packet.TCPSyn, 0)
		packetIn(tb, &k, packet.TCPAck, 1)
	}
	victim := &keys[3]
	e := tb.Lookup(testHasher.Hash(victim), victim, 2)
	tb.Touch(e, 2, packet.TCPRst) // forged
	if !e.Live() {
		t.Fatal("RST-closed entry should be Live")
	}
	syn := tuple4(100)
	if packetIn(tb, &syn, packet.TCPSyn, 3) == nil {
		t.Fatal("SYN refused")
	}
	if tb.Lookup(testHasher.Hash(victim), victim, 3) != nil {
		t.Fatal("the RST-closed connection survived")
	}
	// One forged RST and one SYN landing in the bucket end the pin of a
	// live, idle connection (README, "Status and known limits", as for a
	// forged FIN).
}

// --- Randomized model-based test ---------------------------------------------

// TestModel drives the table with random operations against a
// reference: states (modelEntry.touch), pins, lastSeen, the eviction
// choice (least rank, then least recently seen, in the own bucket), and
// the per-backend counts (BackendFlows of each id's newest generation is
// the number of entries pinned to it; never negative).
func TestModel(t *testing.T) {
	for _, gstart := range []uint32{1, 1<<31 - 3, math.MaxUint32 - 3} {
		for seed := int64(1); seed <= 400; seed++ {
			modelRun(t, seed, gstart, 0)
			if seed == 400 {
				t.Logf("gstart %#x: %v", gstart, modelStats)
			}
			if t.Failed() {
				return
			}
		}
	}
}

// TestModelLimits is TestModel with every timeout at its
// limits: all 1 ms (Resolution), and all MaxTimeout with clock steps of
// hours, from a clock just before its wrap.
func TestModelLimits(t *testing.T) {
	for _, prof := range []int{1, 2} {
		for seed := int64(1); seed <= 300; seed++ {
			modelRun(t, seed, 1, prof)
			if t.Failed() {
				return
			}
		}
	}
}

func modelRun(t *testing.T, seed int64, gstart uint32, prof int) {
	rng := rand.New(rand.NewSource(seed))
	const nBackends = 4
	cfg := Config{Capacity: 8 << rng.Intn(3), TCPNewTimeout: time.Second, TCPEstablishedTimeout: 5 * time.Second,
		TCPClosingTimeout: 2 * time.Second, OtherTimeout: 3 * time.Second, Backends: nBackends}
	scale := Time(1)
	switch prof {
	case 1:
		cfg.TCPNewTimeout, cfg.TCPEstablishedTimeout, cfg.TCPClosingTimeout, cfg.OtherTimeout = Resolution, Resolution, Resolution, Resolution
	case 2:
		cfg.TCPNewTimeout, cfg.TCPEstablishedTimeout, cfg.TCPClosingTimeout, cfg.OtherTimeout = MaxTimeout, MaxTimeout, MaxTimeout, MaxTimeout
		scale = 3_600_000 / 700 * 24 // a default step up to a day
	}
	tb, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if gstart > 1 {
		// A table that has followed the ids' generations up to here (a
		// fresh one takes 2^31 and up for older than 0: Table.count).
		for i := range tb.per {
			tb.per[i].gen = gstart - 1
		}
	}
	nkeys := 12 + rng.Intn(30)
	keys := make([]flow.Tuple, nkeys)
	hashes := make([]uint64, nkeys)
	for i := range keys {
		if i%3 == 0 {
			keys[i] = tuple6(i)
		} else {
			keys[i] = tuple4(i)
		}
		// Few signatures, so signature collisions between keys are common.
		hashes[i] = uint64(rng.Intn(3))<<56 | uint64(rng.Intn(8))<<48 | uint64(rng.Intn(1<<10))
	}
	holder := make([]uint32, nBackends+2) // current generation of each id (ids >= nBackends uncounted)
	for i := range holder {
		holder[i] = gstart + uint32(i)
	}
	model := map[flow.Tuple]*modelEntry{}
	now := Time(rng.Uint32())
	if prof != 0 {
		now = ^Time(0) - Time(rng.Intn(1<<20))*scale
	}
	expired := func(m *modelEntry) bool { return int32(now-m.seen) > int32(tb.Timeout(m.state)) }
	fail := func(step int, op string, f string, a ...any) {
		t.Helper()
		t.Fatalf("seed %d gstart %#x step %d op %s: "+f, append([]any{seed, gstart, step, op}, a...)...)
	}
	for step := 0; step < 600; step++ {
		ki := rng.Intn(nkeys)
		k, h := &keys[ki], hashes[ki]
		op := rng.Intn(14)
		if op == 0 && seed%2 == 0 {
			op = 3 + rng.Intn(3) // more packets
		}
		opn := ""
		// Live entries of the model before the op (to account for vanishing).
		allowed := map[flow.Tuple]bool{} // may vanish in this op
		switch op {
		case 0, 1, 2: // insert
			opn = "insert"
			st := Initial(k.Proto, []uint8{packet.TCPSyn, packet.TCPAck, packet.TCPFin, packet.TCPRst, 0}[rng.Intn(5)])
			if rng.Intn(20) == 0 {
				st = State(rng.Intn(4))
			}
			id := uint32(rng.Intn(nBackends + 2))
			gen := holder[id]
			if rng.Intn(10) == 0 {
				gen-- // a stale snapshot's older incarnation
			}
			m, had := model[*k]
			// Expected eviction from the reference.
			var wantVictim *flow.Tuple
			own := h & tb.mask
			alt := tb.alt(h)
			if !(had && !expired(m)) && tb.occupied(own) == laneHigh && tb.occupied(alt) == laneHigh && tb.find(h, k) < 0 {
				anyExpired := false
				var vr uint8
				var va int32
				for s := int(own) * bucketSlots; s < int(own+1)*bucketSlots; s++ {
					mk := tb.entries[s].key
					me := model[mk]
					if expired(me) {
						anyExpired = true
						allowed[mk] = true
						continue
					}
					r, age := me.modelRank(now), int32(now-me.seen)
					if r > newcomerRank(st) {
						continue
					}
					if wantVictim == nil || r < vr || r == vr && age > va {
						kk := mk
						wantVictim, vr, va = &kk, r, age
					}
				}
				if anyExpired {
					wantVictim = nil
				}
			}
			if had && expired(m) {
				allowed[*k] = true
			}
			ev := tb.Evictions()
			e := tb.Insert(h, k, st, 1, id, gen, now)
			if had && !expired(m) {
				if e == nil || e.backend != m.backend || e.gen != m.gen || e.lastSeen != m.seen {
					fail(step, opn, "existing live entry not returned unchanged: %+v vs %+v", e, m)
				}
				break
			}
			if wantVictim != nil && e == nil {
				fail(step, opn, "insert failed though %v (rank %d) could be evicted", *wantVictim, model[*wantVictim].modelRank(now))
			}
			if e != nil {
				if wantVictim != nil {
					if tb.Evictions() != ev+1 {
						fail(step, opn, "evictions %d -> %d", ev, tb.Evictions())
					}
					if tb.Peek(hashes[keyIndex(keys, *wantVictim)], wantVictim, now) != nil {
						fail(step, opn, "expected victim %v still present", *wantVictim)
					}
					allowed[*wantVictim] = true
					modelStats["evict"]++
				}
				modelStats["insert"]++
				model[*k] = &modelEntry{vip: 1, backend: id, gen: gen, seen: now, state: st, once: st == StateOther}
			}
		case 3, 4, 5: // a packet: lookup then touch (or keep for a SYN on a live entry)
			opn = "packet"
			flags := []uint8{packet.TCPSyn, packet.TCPAck, packet.TCPAck | packet.TCPFin, packet.TCPRst, packet.TCPAck | packet.TCPRst,
				packet.TCPSyn | packet.TCPAck, 0, packet.TCPAck | packet.TCPPsh}[rng.Intn(8)]
			if k.Proto != packet.ProtoTCP {
				flags = 0
			}
			data := rng.Intn(3) == 0
			m, had := model[*k]
			if had && expired(m) {
				allowed[*k] = true
			}
			e := tb.Lookup(h, k, now)
			if (e != nil) != (had && !expired(m)) {
				fail(step, opn, "lookup %v, model %+v present %v", e, m, had)
			}
			if e == nil {
				break
			}
			if flags&(packet.TCPSyn|packet.TCPAck) == packet.TCPSyn && e.Live() && rng.Intn(2) == 0 {
				tb.Keep(e, now)
				m.seen = now
				break
			}
			was := e.state
			modelStats["touch-"+was.String()]++
			reopened := tb.TouchSegment(e, now, flags, data)
			m.seen = now
			m.touch(flags, data)
			if reopened != (m.state == StateNew && was != StateNew) {
				fail(step, opn, "reopened %v, %v -> %v", reopened, was, m.state)
			}
			if rng.Intn(4) == 0 {
				id := uint32(rng.Intn(nBackends + 2))
				tb.Repin(e, id, holder[id])
				m.backend, m.gen = id, holder[id]
			}
		case 6: // time passes
			opn = "time"
			switch rng.Intn(10) {
			case 0:
				now -= Time(rng.Intn(50)) * scale // stale clock
			case 1:
				now += Time(rng.Intn(20000)) * scale
			default:
				if prof == 1 {
					now += Time(rng.Intn(3))
				} else {
					now += Time(rng.Intn(700>>(seed%4))) * scale
				}
			}
			for mk, m := range model {
				if expired(m) {
					allowed[mk] = true
				}
			}
			_ = allowed
		case 7:
			opn = "sweep"
			tb.Sweep(now, rng.Intn(5))
		case 8:
			opn = "sweeppaced"
			tb.SweepPaced(now)
		case 9:
			opn = "delete"
			tb.Delete(h, k)
			allowed[*k] = true
		case 10:
			opn = "remove"
			if e := tb.Lookup(h, k, now); e != nil {
				if !tb.Remove(e) {
					fail(step, opn, "Remove of a live entry false")
				}
				if tb.Remove(e) {
					fail(step, opn, "second Remove true")
				}
			}
			allowed[*k] = true
		case 11: // a burst, with duplicates
			opn = "burst"
			var hs [6]uint64
			var ks [6]*flow.Tuple
			var out [6]*Entry
			for j := range hs {
				kj := ki
				if rng.Intn(2) == 0 {
					kj = rng.Intn(nkeys)
				}
				hs[j], ks[j] = hashes[kj], &keys[kj]
			}
			if rng.Intn(2) == 0 {
				tb.LookupBurst(hs[:], ks[:], now, out[:])
			} else {
				tb.ProbeBurst(hs[:], ks[:], now, out[:])
			}
			for j := range out {
				m, had := model[*ks[j]]
				if (out[j] != nil) != (had && !expired(m)) || out[j] != nil && out[j].key != *ks[j] {
					fail(step, opn, "burst %d: %v, model %+v %v", j, out[j], m, had)
				}
			}
		case 12: // backend id reuse: a new incarnation
			opn = "newgen"
			id := rng.Intn(nBackends + 2)
			holder[id]++
		case 13: // drop a backend
			opn = "drop"
			id := uint32(rng.Intn(nBackends + 2))
			for next, done := 0, false; !done; {
				next, done = tb.Drop(ByBackend(id), next, 1+rng.Intn(3))
			}
			for mk, m := range model {
				if m.backend == id {
					allowed[mk] = true
				}
			}
		}
		// Reconcile.
		seen := map[flow.Tuple]bool{}
		tb.ForEach(func(e *Entry) {
			if seen[e.key] {
				fail(step, opn, "key %v twice", e.key)
			}
			seen[e.key] = true
			m, ok := model[e.key]
			if !ok || m.backend != e.backend || m.gen != e.gen || m.seen != e.lastSeen || m.state != e.state ||
				(m.state == StateClosing && m.reset != e.Live()) {
				fail(step, opn, "table %+v, model %+v (%v)", *e, m, ok)
			}
		})
		if len(seen) != tb.Len() {
			fail(step, opn, "Len %d, ForEach %d", tb.Len(), len(seen))
		}
		for mk := range model {
			if !seen[mk] {
				if !allowed[mk] && !expired(model[mk]) {
					fail(step, opn, "live %v %+v vanished", mk, *model[mk])
				}
				delete(model, mk)
			}
		}
		// Counts: each id's current holder.
		for id := range nBackends {
			want, wantActive := int32(0), int32(0)
			for _, m := range model {
				if m.backend == uint32(id) && m.gen == holder[id] {
					want++
					if m.state != StateClosing {
						wantActive++
					}
				}
			}
			if got := tb.BackendActive(uint32(id), holder[id]); got != wantActive {
				fail(step, opn, "backend %d gen %#x: BackendActive %d, entries not closing %d (per %+v)", id, holder[id], got, wantActive, tb.per[id])
			}
			got := tb.BackendFlows(uint32(id), holder[id])
			if tb.per[id].n < 0 {
				fail(step, opn, "backend %d count negative %d", id, tb.per[id].n)
			}
			// The table may not have seen the holder yet (0) only when no entry has it.
			if got != want {
				fail(step, opn, "backend %d gen %#x: BackendFlows %d, entries %d (per %+v)", id, holder[id], got, want, tb.per[id])
			}
		}
	}
}

var modelStats = map[string]int{}

func keyIndex(keys []flow.Tuple, k flow.Tuple) int {
	for i := range keys {
		if keys[i] == k {
			return i
		}
	}
	panic("no key")
}

// TestForgedRSTStaysInUse: a blind spoofer's one RST on an
// idle established connection takes it out of a drain's flow count
// (Entry.InUse, dataplane opCountFlows) for good: at once (closing, not
// acknowledging), and after the client's next segment makes it
// established again (README: "its next segment shows a forged RST and
// makes the entry established again") it is marked revived, which counts
// only while the client sent within HalfClosedIdle. A connection whose
// client is quiet for over 10 s (an idle SSH or database connection) is
// then never counted again, though it is established and open. The README
// says so of data after a FIN (a late retransmission), not of an RST.
func TestForgedRSTStaysInUse(t *testing.T) {
	tb := newTable(t, 64)
	k := tuple4(1)
	packetIn(tb, &k, packet.TCPSyn, 0)
	e := packetIn(tb, &k, packet.TCPAck, 10)
	if e.State() != StateEstablished || !e.InUse(20_000) {
		t.Fatal("setup")
	}
	tb.Touch(e, 1000, packet.TCPRst|packet.TCPAck) // forged
	if e.InUse(1000) {
		t.Log("counted right after the RST")
	}
	tb.TouchSegment(e, 2000, packet.TCPAck|packet.TCPPsh, true) // the client's next request
	if e.State() != StateEstablished {
		t.Fatalf("state %v after the client's segment", e.State())
	}
	quiet := Time(2000 + 11_000) // 11 s later, well inside the 300 s established timeout
	if tb.Expired(e, quiet) {
		t.Fatal("expired")
	}
	if !e.InUse(quiet) {
		t.Errorf("an open established connection, quiet for 11 s, is not in use after one forged RST (flags %#x)", e.flags)
	}
}

// TestSweepPacedJitter: a clock whose reads go back a little now
// and then (stale reads, the package doc allows them) must not keep the
// paced sweep from removing expired entries within about one pass of
// their expiry.
func TestSweepPacedJitter(t *testing.T) {
	tb := newTable(t, 4096)
	rng := rand.New(rand.NewSource(7))
	now := ^Time(0) - 20_000
	tb.SweepPaced(now)
	to := tb.Timeout(StateNew)
	pass := Time(tb.pass)
	born := map[flow.Tuple]Time{}
	for i := 0; i < 1500; i++ {
		k := tuple4(i)
		if tb.Insert(testHasher.Hash(&k), &k, StateNew, 1, 1, 1, now) != nil {
			born[k] = now
		}
		now += Time(rng.Intn(20))
		tb.SweepPaced(now)
	}
	for step := 0; step < 400_000; step++ {
		if rng.Intn(5) == 0 {
			now -= Time(rng.Intn(3))
		} else {
			now += Time(rng.Intn(2))
		}
		tb.SweepPaced(now)
		if step%1000 == 0 {
			tb.ForEach(func(e *Entry) {
				if age := int32(now - e.lastSeen); age > int32(to+pass+50) {
					t.Fatalf("entry idle %d ms (timeout %d, pass %d) still held", age, to, pass)
				}
			})
		}
	}
	if tb.Len() != 0 {
		t.Errorf("%d entries left", tb.Len())
	}
}
