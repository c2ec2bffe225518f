package dataplane

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/flow"
)

// A new flow's insert that evicts a half-open flow whose next packet comes
// later in the same burst must not hand that packet the new flow's entry:
// the burst's lookups ran before the insert, and the evicted flow's hit
// now points at a slot that holds another flow. The packet is then a miss
// (it re-chooses by the table: the same backend as its SYN), and the new
// flow's entry (if no later insert evicts it in turn) keeps its own state,
// New, instead of being advanced by the other flow's ACK to Established
// (which a SYN flood could otherwise use to make its entries
// unevictable). Both paths.
func TestEvictionInsideABurstMissesTheEvictedFlow(t *testing.T) {
	tcp := layers.IPProtocolTCP
	for _, general := range []bool{false, true} {
		t.Run(fmt.Sprintf("general=%v", general), func(t *testing.T) {
			// Two buckets of 8: every flow has both as its buckets.
			r := newRig(t, cfgWithCapacity(testConfig, 16))
			r.w.generalOnly = general
			half := func(k int) []byte {
				return frame(t, fmt.Sprintf("198.51.100.%d", 10+k), "203.0.113.7", uint16(5000+k), 80, tcp, "S", 0, true)
			}
			ack := func(k int) []byte {
				return frame(t, fmt.Sprintf("198.51.100.%d", 10+k), "203.0.113.7", uint16(5000+k), 80, tcp, "A", 0, true)
			}
			// Fill the table with half-open flows, one a millisecond, and
			// note where each SYN went.
			first := map[int]netip.Addr{}
			for k := 0; k < r.w.ct.Slots(); k++ {
				r.now++
				out, v := r.run(half(k))
				if v[0] != Tx {
					t.Fatalf("half-open flow %d: verdict %v", k, v[0])
				}
				first[k], _, _ = decodeTunnel(t, out[0])
			}
			if got := r.w.ct.Len(); got != r.w.ct.Slots() {
				t.Fatalf("table holds %d of %d", got, r.w.ct.Slots())
			}
			// One burst: a new flow's SYN (its insert evicts the least
			// recently seen half-open flow of its bucket), then every
			// half-open flow's ACK.
			r.now++
			r.w.fastIdle = 0
			syn := frame(t, "192.0.2.77", "203.0.113.7", 7777, 80, tcp, "S", 0, true)
			burst := [][]byte{syn}
			for k := 0; k < len(first); k++ {
				burst = append(burst, ack(k))
			}
			ev0 := r.w.ct.Counters().Evicted[conntrack.StateNew]
			out, v := r.run(burst...)
			if r.w.ct.Counters().Evicted[conntrack.StateNew] == ev0 {
				t.Fatal("the new flow's insert evicted nothing: the test proves nothing")
			}
			for k := 0; k < len(first); k++ {
				if v[1+k] != Tx {
					t.Fatalf("ACK %d: verdict %v", k, v[1+k])
				}
				if dst, _, _ := decodeTunnel(t, out[1+k]); dst != first[k] {
					t.Errorf("ACK of half-open flow %d went to %v, its SYN to %v", k, dst, first[k])
				}
			}
			// The new flow's entry saw a SYN only. It may be gone: the
			// evicted flow's ACK inserts again, and may evict it (on
			// the fused path, whose hits commit before the general
			// path's misses, the other ACKs have made it the bucket's
			// only half-open flow).
			key, ok := flow.TupleFrom(netip.MustParseAddr("192.0.2.77"), netip.MustParseAddr("203.0.113.7"), 7777, 80, 6)
			if !ok {
				t.Fatal("tuple")
			}
			var st conntrack.State = 255
			r.w.ct.ForEach(func(e *conntrack.Entry) {
				if e.Key() == key {
					st = e.State()
				}
			})
			if st != conntrack.StateNew && st != 255 {
				t.Errorf("the new flow's entry is in state %v after its SYN alone, want %v", st, conntrack.StateNew)
			}
		})
	}
}

// Under a SYN flood against a full table the fused path takes the new
// flows itself (fuseNew) and gives the general path's results exactly:
// frames, verdicts, counters and the table, with every insert evicting,
// some SYNs retransmitted (of flows still tracked, or evicted since), and
// the clock moving past the half-open timeout once.
func TestFastPathMatchesGeneralUnderSYNFlood(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) { synFloodTwin(t, seed) })
	}
}

func synFloodTwin(t *testing.T, seed uint64) {
	tw := newTwin(t, cfgWithCapacity(testConfig, 64))
	tcp := layers.IPProtocolTCP
	rng := rand.New(rand.NewPCG(seed, 12))
	var sent [][]byte
	for step := 0; step < 300; step++ {
		if step == 200 {
			tw.fast.now += 600_000
			tw.slow.now = tw.fast.now
		}
		n := 1 + rng.IntN(MaxBurst)
		frames := make([][]byte, n)
		for i := range frames {
			if len(sent) > 0 && rng.IntN(5) == 0 {
				frames[i] = sent[rng.IntN(len(sent))] // a retransmission
				continue
			}
			x := rng.Uint32()
			frames[i] = frame(t, netip.AddrFrom4([4]byte{198, 18, byte(x >> 8), byte(x)}).String(), "203.0.113.7", uint16(x>>16)|1, 80, tcp, "S", 0, true)
			sent = append(sent, frames[i])
		}
		tw.fast.now++
		tw.slow.now = tw.fast.now
		tw.fast.w.fastIdle = 0 // every burst through the fused path
		name := fmt.Sprintf("burst %d", step)
		tw.burst(name, frames)
		tw.same(name)
	}
	c := tw.fast.w.ct.Counters()
	if c.Evicted[conntrack.StateNew] == 0 || c.Hits == 0 || c.Expired == 0 {
		t.Fatalf("the flood missed a case: %+v", c)
	}
	// One more burst of new SYNs: the fused path takes them all, so the
	// general stages' Parse (which zeroes NumVLANs) never runs.
	tw.fast.w.parsed[0].NumVLANs = 3
	tw.fast.w.fastIdle = 0
	frames := [][]byte{
		frame(t, "198.19.0.1", "203.0.113.7", 1111, 80, tcp, "S", 0, true),
		frame(t, "198.19.0.2", "203.0.113.7", 1112, 80, tcp, "S", 0, true),
	}
	tw.burst("new flows", frames)
	if tw.fast.w.parsed[0].NumVLANs != 3 {
		t.Fatal("the general stages parsed a new flow's SYN: the fused path did not take it")
	}
	tw.same("new flows")
}
