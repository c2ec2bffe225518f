package conntrack

import (
	"math/rand/v2"
	"testing"

	"github.com/fulcrumlb/fulcrum/flow"
	"github.com/fulcrumlb/fulcrum/packet"
)

// Benchmarks run at two sizes: 10k entries (the table fits in L2/L3, the
// best case) and 4M entries (256 MiB of entries: nearly every lookup misses
// every cache, the case that decides the forwarding rate). Keys are random
// IPv4 TCP flows, so buckets and entry lines are visited in random order.
// Keys and hashes are computed before the timer starts and fixtures are
// built once per process.

var benchSizes = []struct {
	name    string
	entries int
}{
	{"10k", 10_000},
	{"4M", 4 << 20},
}

const benchBurst = 32

// benchKeys is n random flows and their hashes, with pointers for bursts.
type benchKeys struct {
	keys   []flow.Tuple
	ptrs   []*flow.Tuple
	hashes []uint64
}

func newBenchKeys(n int, rng *rand.Rand) benchKeys {
	bk := benchKeys{make([]flow.Tuple, n), make([]*flow.Tuple, n), make([]uint64, n)}
	for i := range bk.keys {
		k := &bk.keys[i]
		x := rng.Uint64()
		k.SetV4([4]byte{byte(x), byte(x >> 8), byte(x >> 16), byte(x >> 24)}, [4]byte{203, 0, 113, byte(x >> 32 & 7)})
		k.SrcPort, k.DstPort, k.Proto = uint16(x>>40), 443, packet.ProtoTCP
		bk.ptrs[i] = k
		bk.hashes[i] = testHasher.Hash(k)
	}
	return bk
}

// lookupFixture is a table with capacity entries filled with that many
// established flows (those that fit: about 86% at a full power of two),
// the flows present (hits) and flows never inserted (misses).
type lookupFixture struct {
	tb           *Table
	hits, misses benchKeys
}

var lookupFixtures = map[int]*lookupFixture{}

func getLookupFixture(b *testing.B, n int) *lookupFixture {
	if f, ok := lookupFixtures[n]; ok {
		return f
	}
	rng := rand.New(rand.NewPCG(1, uint64(n)))
	tb := newTable(b, n)
	all := newBenchKeys(n, rng)
	for i := range all.keys {
		tb.Insert(all.hashes[i], &all.keys[i], StateEstablished, 1, uint32(i), 1, 0)
	}
	var hits benchKeys // what is present (an established insert may evict an earlier one)
	for i := range all.keys {
		if tb.Lookup(all.hashes[i], &all.keys[i], 0) != nil {
			hits.keys = append(hits.keys, all.keys[i])
			hits.hashes = append(hits.hashes, all.hashes[i])
		}
	}
	for i := range hits.keys {
		hits.ptrs = append(hits.ptrs, &hits.keys[i])
	}
	f := &lookupFixture{tb: tb, hits: hits, misses: newBenchKeys(min(n, 1<<20), rng)}
	lookupFixtures[n] = f
	return f
}

func BenchmarkLookup(b *testing.B) {
	for _, size := range benchSizes {
		for _, kind := range []string{"hit", "miss"} {
			b.Run(size.name+"/"+kind, func(b *testing.B) {
				f := getLookupFixture(b, size.entries)
				ks := f.hits
				if kind == "miss" {
					ks = f.misses
				}
				n, found := len(ks.keys), 0
				b.ResetTimer()
				for i, j := 0, 0; i < b.N; i++ {
					if f.tb.Lookup(ks.hashes[j], &ks.keys[j], 1) != nil {
						found++
					}
					if j++; j == n {
						j = 0
					}
				}
				b.StopTimer()
				reportTable(b, f.tb)
				if (kind == "hit") != (found == b.N) || (kind == "miss" && found != 0) {
					b.Fatalf("%s: %d of %d found", kind, found, b.N)
				}
			})
		}
	}
}

// BenchmarkLookupBurst times one burst of 32 lookups per op; ns/pkt is the
// figure to compare with BenchmarkLookup.
func BenchmarkLookupBurst(b *testing.B) {
	for _, size := range benchSizes {
		for _, kind := range []string{"hit", "miss", "hit+sweep"} {
			b.Run(size.name+"/"+kind, func(b *testing.B) {
				f := getLookupFixture(b, size.entries)
				ks := f.hits
				if kind == "miss" {
					ks = f.misses
				}
				sweep := kind == "hit+sweep" // one bucket a burst, as the forwarding loop swept before SweepPaced
				var out [benchBurst]*Entry
				n, found := len(ks.keys)/benchBurst*benchBurst, 0
				b.ResetTimer()
				for i, j := 0, 0; i < b.N; i++ {
					found += f.tb.LookupBurst(ks.hashes[j:j+benchBurst], ks.ptrs[j:j+benchBurst], 1, out[:])
					if sweep {
						f.tb.Sweep(1, 1)
					}
					if j += benchBurst; j == n {
						j = 0
					}
				}
				b.StopTimer()
				reportTable(b, f.tb)
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchBurst), "ns/pkt")
				if (kind != "miss") != (found == b.N*benchBurst) || (kind == "miss" && found != 0) {
					b.Fatalf("%s: %d of %d found", kind, found, b.N*benchBurst)
				}
			})
		}
	}
}

// insertFixture is a table of capacity entries and a pool of fresh flows
// twice its size.
type insertFixture struct {
	tb   *Table
	pool benchKeys
	next int
	now  Time
}

var insertFixtures = map[string]*insertFixture{}

// BenchmarkInsert measures two cases at each size:
//
//   - evict: every bucket is full of new (SYN) entries, so each insert
//     evicts the least recently seen one: the steady state of a SYN flood.
//     The clock advances 1 ms per insert and the SYN timeout is raised to
//     MaxTimeout, so LRU order is exact and nothing expires.
//   - free: the table is half full and each op inserts a fresh flow and
//     removes it again (Remove finds the entry in cache), so nearly every
//     insert takes a free slot (5% of buckets are full at half load).
func BenchmarkInsert(b *testing.B) {
	for _, size := range benchSizes {
		for _, kind := range []string{"evict", "free"} {
			b.Run(size.name+"/"+kind, func(b *testing.B) {
				name := size.name + kind
				f, ok := insertFixtures[name]
				if !ok {
					cfg := DefaultConfig()
					cfg.Capacity, cfg.TCPNewTimeout = size.entries, MaxTimeout
					tb, err := New(cfg)
					if err != nil {
						b.Fatal(err)
					}
					rng := rand.New(rand.NewPCG(2, uint64(size.entries)))
					f = &insertFixture{tb: tb, pool: newBenchKeys(2*size.entries, rng)}
					n := tb.Slots() / 2
					if kind == "evict" {
						n = 3 * tb.Slots()
					}
					fill := newBenchKeys(n, rng)
					for i := range fill.keys {
						f.now++
						tb.Insert(fill.hashes[i], &fill.keys[i], StateNew, 1, 1, 1, f.now)
					}
					for kind == "evict" && tb.Len() < tb.Slots() { // the last few buckets
						k := newBenchKeys(1, rng)
						f.now++
						tb.Insert(k.hashes[0], &k.keys[0], StateNew, 1, 1, 1, f.now)
					}
					insertFixtures[name] = f
				}
				tb, pool, j, now := f.tb, f.pool, f.next, f.now
				before := tb.Counters()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					e := tb.Insert(pool.hashes[j], &pool.keys[j], StateNew, 1, 2, 3, now)
					if kind == "free" {
						tb.Remove(e)
					}
					if j++; j == len(pool.keys) {
						j = 0
					}
					now++
				}
				b.StopTimer()
				reportTable(b, tb)
				f.next, f.now = j, now
				c := tb.Counters()
				if c.InsertFailed != before.InsertFailed {
					b.Fatal("a new entry failed to replace a new entry")
				}
			})
		}
	}
}

func reportTable(b *testing.B, tb *Table) {
	b.ReportMetric(float64(tb.Bytes())/float64(tb.Slots()), "B/slot")
	b.ReportMetric(float64(tb.Len()), "entries")
}
