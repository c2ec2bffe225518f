package dataplane

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/conntrack"
)

// BenchmarkProcess measures the whole per-packet pipeline (parse, VIP
// lookup, flow hash, batched conntrack, Maglev on a miss, GRE
// encapsulation) on 64-byte TCP packets of established flows, bursts of 32,
// without any I/O. ns/op is per packet.
//
// path=general runs every packet through the general stages (the fused
// path off), for comparison in the same run. The /syn cases send pure SYNs
// of known flows instead of ACKs (the bench's syn-1m replay once warm:
// retransmissions, or new connections on reused tuples), each of which
// takes the VIP's table's current choice: the fleet hash and a Maglev
// lookup beside the conntrack hit.
func BenchmarkProcess(b *testing.B) {
	for _, bc := range []struct {
		flows   int
		general bool
		syn     bool
	}{{10_000, false, false}, {10_000, true, false}, {1_000_000, false, false}, {1_000_000, true, false},
		{10_000, false, true}, {1_000_000, false, true}} {
		flows := bc.flows
		path := "fused"
		if bc.general {
			path = "general"
		}
		name := fmt.Sprintf("flows=%d/path=%s", flows, path)
		flags := "A"
		if bc.syn {
			name, flags = name+"/syn", "S"
		}
		b.Run(name, func(b *testing.B) {
			l := newEstLoad(&testing.T{}, flows, flags, bc.general)
			r := l.r
			hits0, misses0 := r.w.c.CTHits, r.w.c.CTMisses
			b.ReportAllocs()
			cpu := startCPU(b)
			n := 0
			for n < b.N {
				l.burst()
				n += estBurst
			}
			cpu.stop(b, n)
			if r.w.c.Encap[0] == 0 {
				b.Fatal("nothing forwarded")
			}
			hits, misses := r.w.c.CTHits-hits0, r.w.c.CTMisses-misses0
			b.ReportMetric(float64(hits)/float64(hits+misses), "hit-ratio")
		})
	}
}

// BenchmarkProcessNewFlows measures the miss path: bursts of 32 SYNs, each
// of a flow never seen before (a SYN flood, or a flash crowd), so every
// packet is a conntrack miss, a Maglev choice and an insert (evicting once
// the table is full). ns/op is per packet.
func BenchmarkProcessNewFlows(b *testing.B) {
	t := &testing.T{}
	r := newRig(t, cfgWithCapacity(testConfig, 1<<20))
	const burst = 32
	base := frame(t, "198.51.100.10", "203.0.113.7", 1, 80, layers.IPProtocolTCP, "S", 0, true)
	bufs := make([][]byte, burst)
	for i := range bufs {
		bufs[i] = make([]byte, headroom+len(base))
	}
	pkts := make([]Pkt, burst)
	next := uint32(0)
	b.ReportAllocs()
	cpu := startCPU(b)
	n := 0
	for ; n < b.N; n += burst {
		for i := range pkts {
			next++
			f := bufs[i][headroom:]
			copy(f, base)
			f[26], f[27], f[28], f[29] = 10, byte(next>>16), byte(next>>8), byte(next)
			f[34], f[35] = byte(next>>24), 1 // source port
			pkts[i] = Pkt{Buf: bufs[i], Off: headroom, Len: len(base)}
		}
		r.now++
		r.w.Process(pkts, r.now)
	}
	cpu.stop(b, n)
	if r.w.c.Encap[0] == 0 {
		b.Fatal("nothing forwarded")
	}
}

func cfgWithCapacity(cfg string, capacity int) string {
	return replaceOnce(cfg, "capacity = 4096", fmt.Sprintf("capacity = %d", capacity))
}

func replaceOnce(s, old, new string) string {
	for i := 0; i+len(old) <= len(s); i++ {
		if s[i:i+len(old)] == old {
			return s[:i] + new + s[i+len(old):]
		}
	}
	return s
}

// BenchmarkSYNFlood measures a SYN flood against a full table: bursts of
// 32 SYNs, each from a random source address and port never seen before,
// into a conntrack table already full of half-open flows, so every packet
// is a miss, a Maglev choice and an insert that evicts the least recently
// seen half-open entry of its bucket. ns/op is per packet; new-flows/s is
// what one core sustains by its CPU time.
func BenchmarkSYNFlood(b *testing.B) {
	for _, general := range []bool{false, true} {
		path := "fused"
		if general {
			path = "general"
		}
		b.Run("path="+path, func(b *testing.B) {
			l := newFloodLoad(&testing.T{}, 1<<18, general)
			r := l.r
			b.ReportAllocs()
			cpu := startCPU(b)
			n := 0
			for ; n < b.N; n += estBurst {
				l.burst()
			}
			ns := cpu.stop(b, n)
			if ns > 0 {
				b.ReportMetric(1e9/ns, "new-flows/s")
			}
			if r.w.ct.Counters().Evicted[conntrack.StateNew] == 0 {
				b.Fatal("nothing evicted: the table was not full")
			}
		})
	}
}

// estBurst is the burst size of the benchmarks' loads.
const estBurst = 32

// estLoad is BenchmarkProcess's input: bursts of 64-byte TCP packets
// (flags: "A" for ACKs, "S" for SYNs) of random flows among `flows`, all
// to 203.0.113.7:80, into a table of twice their capacity warmed by two
// packets of every flow.
type estLoad struct {
	r     *rig
	flows int
	base  []byte
	bufs  [][]byte
	pkts  []Pkt
	src4  [][4]byte
	rng   *rand.Rand
}

func newEstLoad(t *testing.T, flows int, flags string, general bool) *estLoad {
	l := &estLoad{r: newRig(t, cfgWithCapacity(testConfig, 2*flows)), flows: flows}
	l.r.w.generalOnly = general
	l.rng = rand.New(rand.NewPCG(1, 2))
	// 4096 distinct frames stand for the flow population: each burst
	// rewrites the source address of its frames to a random flow, so
	// conntrack sees `flows` flows.
	l.base = frame(t, "198.51.100.10", "203.0.113.7", 1, 80, layers.IPProtocolTCP, flags, 0, true)
	l.bufs = make([][]byte, estBurst)
	for i := range l.bufs {
		l.bufs[i] = make([]byte, headroom+len(l.base))
		copy(l.bufs[i][headroom:], l.base)
	}
	l.pkts = make([]Pkt, estBurst)
	l.src4 = make([][4]byte, flows)
	for i := range l.src4 {
		l.src4[i] = [4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}
	}
	// Warm the table: every flow seen twice (its first ACK makes an
	// entry, its second establishes it).
	for range 2 {
		for f := 0; f < flows; f += estBurst {
			for i := 0; i < estBurst; i++ {
				l.fill(i, (f+i)%flows)
			}
			l.r.w.Process(l.pkts, l.r.now)
		}
	}
	return l
}

// fill makes packet i one of flow f's.
func (l *estLoad) fill(i, f int) {
	b := l.bufs[i]
	copy(b[headroom:headroom+14], l.base[:14]) // encapsulation overwrote the Ethernet header
	copy(b[headroom+26:headroom+30], l.src4[f][:])
	l.pkts[i] = Pkt{Buf: b, Off: headroom, Len: len(l.base)}
}

// refill makes the burst one of random flows.
func (l *estLoad) refill() {
	for i := 0; i < estBurst; i++ {
		l.fill(i, int(l.rng.Uint64N(uint64(l.flows))))
	}
}

// burst refills and processes one burst; the clock stands still, so no
// flow times out.
func (l *estLoad) burst() {
	l.refill()
	l.r.w.Process(l.pkts, l.r.now)
}

// floodLoad is BenchmarkSYNFlood's input: bursts of SYNs, each from a
// random source address and port never seen before, into a table of
// `capacity` filled with half-open flows by three inserts per slot (the
// clock advances 1 ms a burst, far from the half-open timeout), so that
// every packet is a miss, a Maglev choice and an insert that evicts.
type floodLoad struct {
	r    *rig
	base []byte
	bufs [][]byte
	pkts []Pkt
	rng  *rand.Rand
}

func newFloodLoad(t *testing.T, capacity int, general bool) *floodLoad {
	l := &floodLoad{r: newRig(t, cfgWithCapacity(testConfig, capacity))}
	l.r.w.generalOnly = general
	l.base = frame(t, "198.51.100.10", "203.0.113.7", 1, 80, layers.IPProtocolTCP, "S", 0, true)
	l.bufs = make([][]byte, estBurst)
	for i := range l.bufs {
		l.bufs[i] = make([]byte, headroom+len(l.base))
	}
	l.pkts = make([]Pkt, estBurst)
	l.rng = rand.New(rand.NewPCG(3, 4))
	for k := 0; k < 3*l.r.w.ct.Slots(); k += estBurst {
		l.burst()
	}
	return l
}

// refill makes the burst one of new random flows.
func (l *floodLoad) refill() {
	for i := range l.pkts {
		x := l.rng.Uint64()
		f := l.bufs[i][headroom:]
		copy(f, l.base)
		f[26], f[27], f[28], f[29] = byte(x), byte(x>>8), byte(x>>16), byte(x>>24)
		f[34], f[35] = byte(x>>32), byte(x>>40) // source port
		p := &l.pkts[i]
		p.Buf, p.Off, p.Len = l.bufs[i], headroom, len(l.base)
	}
}

// burst refills and processes one burst, 1 ms after the last.
func (l *floodLoad) burst() {
	l.refill()
	l.r.now++
	l.r.w.Process(l.pkts, l.r.now)
}
