package dataplane

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
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
			t := &testing.T{}
			cfg := testConfig
			r := newRig(t, cfgWithCapacity(cfg, 2*flows))
			r.w.generalOnly = bc.general
			rng := rand.New(rand.NewPCG(1, 2))
			// 4096 distinct frames stand for the flow population: each
			// burst rewrites the source address and port of its frames
			// to a random flow, so conntrack sees `flows` flows.
			const burst = 32
			base := frame(t, "198.51.100.10", "203.0.113.7", 1, 80, layers.IPProtocolTCP, flags, 0, true)
			bufs := make([][]byte, burst)
			for i := range bufs {
				bufs[i] = make([]byte, headroom+len(base))
			}
			pkts := make([]Pkt, burst)
			src := make([]netip.Addr, flows)
			for i := range src {
				src[i] = netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
			}
			// Warm the table: every flow seen twice (its first ACK makes
			// an entry, its second establishes it).
			fill := func(i, f int) {
				copy(bufs[i][headroom:], base)
				a := src[f].As4()
				copy(bufs[i][headroom+26:], a[:])
				pkts[i] = Pkt{Buf: bufs[i], Off: headroom, Len: len(base)}
			}
			for range 2 {
				for f := 0; f < flows; f += burst {
					for i := 0; i < burst; i++ {
						fill(i, (f+i)%flows)
					}
					r.w.Process(pkts, r.now)
				}
			}
			// Pre-resolve the flows' addresses so the loop only copies bytes.
			src4 := make([][4]byte, flows)
			for i := range src {
				src4[i] = src[i].As4()
			}
			fill = func(i, f int) {
				copy(bufs[i][headroom:headroom+14], base[:14]) // encapsulation overwrote the Ethernet header
				copy(bufs[i][headroom+26:headroom+30], src4[f][:])
				pkts[i] = Pkt{Buf: bufs[i], Off: headroom, Len: len(base)}
			}
			hits0, misses0 := r.w.c.CTHits, r.w.c.CTMisses
			b.ReportAllocs()
			cpu := startCPU(b)
			n := 0
			for n < b.N {
				for i := 0; i < burst; i++ {
					fill(i, int(rng.Uint64N(uint64(flows))))
				}
				r.w.Process(pkts, r.now) // the clock stands still: no flow times out
				n += burst
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
			t := &testing.T{}
			r := newRig(t, cfgWithCapacity(testConfig, 1<<18))
			r.w.generalOnly = general
			const burst = 32
			base := frame(t, "198.51.100.10", "203.0.113.7", 1, 80, layers.IPProtocolTCP, "S", 0, true)
			bufs := make([][]byte, burst)
			for i := range bufs {
				bufs[i] = make([]byte, headroom+len(base))
			}
			pkts := make([]Pkt, burst)
			rng := rand.New(rand.NewPCG(3, 4))
			fill := func() {
				for i := range pkts {
					x := rng.Uint64()
					f := bufs[i][headroom:]
					copy(f, base)
					f[26], f[27], f[28], f[29] = byte(x), byte(x>>8), byte(x>>16), byte(x>>24)
					f[34], f[35] = byte(x>>32), byte(x>>40) // source port
					p := &pkts[i]
					p.Buf, p.Off, p.Len = bufs[i], headroom, len(base)
				}
				r.now++
				r.w.Process(pkts, r.now)
			}
			// Fill the table: three inserts per slot leave few buckets
			// with a free slot (the clock advances 1 ms a burst, far from
			// the half-open timeout).
			for k := 0; k < 3*r.w.ct.Slots(); k += burst {
				fill()
			}
			b.ReportAllocs()
			cpu := startCPU(b)
			n := 0
			for ; n < b.N; n += burst {
				fill()
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
