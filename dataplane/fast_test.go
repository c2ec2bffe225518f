package dataplane

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"testing"

	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/gen"
	"github.com/fulcrumlb/fulcrum/sched"
)

// fastTestConfig is testConfig plus a UDP VIP and an every-port VIP, so
// that the fused path meets UDP flows and the general path's other VIPs.
var fastTestConfig = testConfig + `
[[vip]]
name = "dns"
address = "203.0.113.7"
port = 53
protocol = "udp"
  [[vip.backend]]
  name = "d1"
  address = "10.0.2.1"
  [[vip.backend]]
  name = "d2"
  address = "2001:db8:2::2"

[[vip]]
name = "any"
address = "203.0.113.9"
port = 0
  [[vip.backend]]
  name = "a1"
  address = "10.0.3.1"
  [[vip.backend]]
  name = "a2"
  address = "10.0.3.2"
`

// twin is two workers over the same configuration: one with the fused
// path, one with every packet through the general stages.
type twin struct {
	t          *testing.T
	fast, slow *rig
}

func newTwin(t *testing.T, toml string) *twin {
	tw := &twin{t: t, fast: newRig(t, toml), slow: newRig(t, toml)}
	tw.slow.w.generalOnly = true
	// The same random source: load-based schedulers draw from it.
	tw.fast.w.rng, tw.slow.w.rng = sched.NewRand(7), sched.NewRand(7)
	return tw
}

// burst runs the same frames through both workers at the same time and
// fails on the first difference in output bytes or verdicts.
func (tw *twin) burst(step string, frames [][]byte) {
	tw.t.Helper()
	out := [2][][]byte{}
	verd := [2][]Verdict{}
	for k, r := range []*rig{tw.fast, tw.slow} {
		pkts := make([]Pkt, len(frames))
		for i, f := range frames {
			b := make([]byte, headroom+len(f)+64)
			copy(b[headroom:], f)
			pkts[i] = Pkt{Buf: b, Off: headroom, Len: len(f)}
		}
		r.w.Process(pkts, r.now)
		for i := range pkts {
			out[k] = append(out[k], pkts[i].Buf[pkts[i].Off:pkts[i].Off+pkts[i].Len])
			verd[k] = append(verd[k], r.w.Verdicts[i])
		}
	}
	for i := range frames {
		if verd[0][i] != verd[1][i] {
			tw.t.Fatalf("%s: packet %d of %d: verdict %v with the fused path, %v without", step, i, len(frames), verd[0][i], verd[1][i])
		}
		if verd[0][i] != Drop && !bytes.Equal(out[0][i], out[1][i]) {
			tw.t.Fatalf("%s: packet %d of %d: frames differ\nfused   % x\ngeneral % x", step, i, len(frames), out[0][i], out[1][i])
		}
	}
}

// same fails unless both workers' counters and conntrack tables are equal.
func (tw *twin) same(step string) {
	tw.t.Helper()
	a, b := &tw.fast.w.c, &tw.slow.w.c
	if !reflect.DeepEqual(a, b) {
		tw.t.Fatalf("%s: counters differ:\nfused   %s\ngeneral %s", step, summary(a), summary(b))
	}
	if ca, cb := tw.fast.w.ct.Counters(), tw.slow.w.ct.Counters(); ca != cb {
		tw.t.Fatalf("%s: conntrack counters differ:\nfused   %+v\ngeneral %+v", step, ca, cb)
	}
	if ea, eb := entries(tw.fast.w.ct), entries(tw.slow.w.ct); !reflect.DeepEqual(ea, eb) {
		tw.t.Fatalf("%s: conntrack tables differ: %d and %d entries", step, len(ea), len(eb))
	}
}

func summary(c *Counters) string {
	return fmt.Sprintf("rx %d/%d hits %d misses %d moved %d punted %d frags %d icmp %d echo %d encap %v parse %v drops %v",
		c.RxPackets, c.RxBytes, c.CTHits, c.CTMisses, c.Moved, c.Punted, c.Fragments, c.ICMPErrors, c.EchoReplies, c.Encap, c.Parse, c.Drops)
}

func entries(t *conntrack.Table) map[conntrack.Entry]int {
	m := map[conntrack.Entry]int{}
	t.ForEach(func(e *conntrack.Entry) { m[*e]++ })
	return m
}

// The fused path gives the general path's results exactly: the same frames
// (byte for byte), verdicts, counters and conntrack state, over generated
// traffic (SYNs, established flows, UDP, IPv4 and IPv6, malformed frames,
// non-VIP traffic, ARP, too-big frames) and hand-made frames the fused path
// must leave alone or split a flow on (VLAN tags, fragments, ICMP errors,
// FIN and RST, a SYN reusing an established tuple, an every-port VIP), with
// backends going down and the clock jumping past the timeouts, under every
// scheduler.
func TestFastPathMatchesGeneral(t *testing.T) {
	vips, err := gen.ParseVIPs("203.0.113.7:80,[2001:db8:ffff::7]:443")
	if err != nil {
		t.Fatal(err)
	}
	udpVIPs, _ := gen.ParseVIPs("203.0.113.7:53")
	anyVIPs, _ := gen.ParseVIPs("203.0.113.9:8080")
	gens := []struct {
		cfg    gen.Config
		weight int
	}{
		{gen.Config{VIPs: vips, Mode: gen.ModeMix, SYNShare: 0.1, IPv6: 0.4, Flows: 300, Malformed: 0.02, NonVIP: 0.02, ARP: 0.01, Seed: 1}, 60},
		{gen.Config{VIPs: vips, Mode: gen.ModeEstablished, IPv6: 0.5, Flows: 300, Size: 1518, Seed: 1}, 3}, // too big: ICMP replies
		{gen.Config{VIPs: vips, Mode: gen.ModeEstablished, IPv6: 0.5, Flows: 300, Size: 1400, Seed: 2}, 5},
		{gen.Config{VIPs: udpVIPs, Mode: gen.ModeUDP, Flows: 100, Seed: 3}, 15},
		{gen.Config{VIPs: anyVIPs, Mode: gen.ModeMix, Flows: 50, Seed: 4}, 5},
	}
	for _, k := range sched.Kinds() {
		t.Run(k.String(), func(t *testing.T) {
			tw := newTwin(t, fastConfig(k))
			var gs []*gen.Generator
			var weights []int
			for _, g := range gens {
				gg, err := gen.New(g.cfg)
				if err != nil {
					t.Fatal(err)
				}
				gs = append(gs, gg)
				weights = append(weights, g.weight)
			}
			extra := handFrames(t)
			rng := rand.New(rand.NewPCG(5, uint64(k)))
			pick := func() []byte {
				if rng.IntN(20) == 0 {
					return extra[rng.IntN(len(extra))]
				}
				n := rng.IntN(88)
				for i, w := range weights {
					if n < w {
						b, _ := gs[i].Next(nil)
						return b
					}
					n -= w
				}
				b, _ := gs[0].Next(nil)
				return b
			}
			for step := 0; step < 400; step++ {
				switch step {
				case 200: // a backend goes down: its flows move
					for _, r := range []*rig{tw.fast, tw.slow} {
						r.publish(Overrides{{"web", "be1"}: {Weight: 0, Down: true}, {"dns", "d1"}: {Weight: 0, Down: true}})
					}
				case 300: // and comes back
					for _, r := range []*rig{tw.fast, tw.slow} {
						r.publish(nil)
					}
				case 350: // every flow times out
					tw.fast.now += 3_600_000
					tw.slow.now += 3_600_000
				}
				n := 1 + rng.IntN(MaxBurst)
				if rng.IntN(4) == 0 {
					n = 32
				}
				frames := make([][]byte, n)
				for i := range frames {
					frames[i] = pick()
				}
				tw.fast.now += conntrack.Time(rng.IntN(50))
				tw.slow.now = tw.fast.now
				name := fmt.Sprintf("burst %d", step)
				tw.burst(name, frames)
				tw.same(name)
			}
			c := &tw.fast.w.c
			if c.Encap[0] == 0 || c.CTHits == 0 || c.Moved == 0 || c.Encap[1] == 0 || c.Punted == 0 || c.Fragments == 0 {
				t.Fatalf("the traffic missed a path: %s", summary(c))
			}
		})
	}
}

// The fused path takes the established traffic it is for: after a flow's
// handshake, its packets leave by the fused path (observed as the general
// stages' parse scratch left untouched).
func TestFastPathTakesEstablishedFlows(t *testing.T) {
	r := newRig(t, fastTestConfig)
	tcp := layers.IPProtocolTCP
	r.run(frame(t, "198.51.100.10", "203.0.113.7", 5000, 80, tcp, "S", 0, true))
	r.run(frame(t, "198.51.100.10", "203.0.113.7", 5000, 80, tcp, "A", 0, true))
	r.run(frame(t, "198.51.100.11", "203.0.113.7", 53, 53, layers.IPProtocolUDP, "", 10, true))
	hits := r.w.ct.Counters().Hits
	r.w.fastIdle = 0           // the bursts above fused nothing: no back-off for this one
	r.w.parsed[0].NumVLANs = 2 // Parse zeroes it; ParseFlow leaves it
	_, v := r.run(
		frame(t, "198.51.100.10", "203.0.113.7", 5000, 80, tcp, "PA", 100, true),
		frame(t, "198.51.100.11", "203.0.113.7", 53, 53, layers.IPProtocolUDP, "", 10, true))
	if v[0] != Tx || v[1] != Tx {
		t.Fatalf("verdicts %v", v)
	}
	if r.w.parsed[0].NumVLANs != 2 {
		t.Fatal("the general stages parsed an established flow's packet")
	}
	if got := r.w.ct.Counters().Hits - hits; got != 2 {
		t.Fatalf("%d conntrack hits, want 2", got)
	}
	_ = netip.Addr{}
}

// A packet the fused path cannot parse (here a SYN behind a VLAN tag,
// reopening an established tuple) sends the rest of its burst to the
// general path: the ACK after it must see the reopened entry, as the
// general path alone would have it.
func TestFastPathKeepsFlowOrder(t *testing.T) {
	tw := newTwin(t, fastTestConfig)
	tcp := layers.IPProtocolTCP
	f := func(flags string) []byte {
		return frame(t, "198.51.100.10", "203.0.113.7", 5000, 80, tcp, flags, 0, true)
	}
	tag := func(b []byte) []byte { return append(append(append([]byte(nil), b[:12]...), 0x81, 0, 0, 7), b[12:]...) }
	tw.burst("syn", [][]byte{f("S")})
	tw.burst("ack", [][]byte{f("A")})
	tw.same("established")
	tw.burst("tagged syn, ack", [][]byte{f("PA"), tag(f("S")), f("A"), f("PA")})
	tw.same("reopened")
	tw.burst("syn, ack", [][]byte{f("PA"), f("S"), f("A"), f("PA")})
	tw.same("reopened again")
	if tw.fast.w.c.Backends[0].SYNs+tw.fast.w.c.Backends[1].SYNs+tw.fast.w.c.Backends[2].SYNs == 0 {
		t.Fatal("no SYN counted")
	}
}

// handFrames are hand-made frames the fused path must take, leave alone or
// split a flow on: each TCP flag of one IPv4 flow, an IPv6 flow, a frame
// too big without DF, an every-port VIP, a VLAN tag, a first fragment.
func handFrames(t *testing.T) [][]byte {
	tcp := layers.IPProtocolTCP
	f := [][]byte{
		frame(t, "198.51.100.200", "203.0.113.7", 4000, 80, tcp, "S", 0, true),
		frame(t, "198.51.100.200", "203.0.113.7", 4000, 80, tcp, "A", 0, true),
		frame(t, "198.51.100.200", "203.0.113.7", 4000, 80, tcp, "PA", 20, true),
		frame(t, "198.51.100.200", "203.0.113.7", 4000, 80, tcp, "FA", 0, true),
		frame(t, "198.51.100.200", "203.0.113.7", 4000, 80, tcp, "R", 0, true),
		frame(t, "2001:db8:aaaa::9", "2001:db8:ffff::7", 4001, 443, tcp, "A", 0, true),
		frame(t, "2001:db8:aaaa::9", "2001:db8:ffff::7", 4001, 443, tcp, "S", 0, true),
		frame(t, "192.0.2.99", "203.0.113.7", 4002, 80, tcp, "PA", 3000, false), // too big without DF
		frame(t, "198.51.100.201", "203.0.113.9", 4003, 22, tcp, "A", 0, true),  // every-port VIP
	}
	// The same flow behind a VLAN tag: the rest of its burst is general.
	v := frame(t, "198.51.100.200", "203.0.113.7", 4000, 80, tcp, "A", 0, true)
	tagged := append(append(append([]byte(nil), v[:12]...), 0x81, 0, 0, 7), v[12:]...)
	f = append(f, tagged)
	// A first IPv4 fragment of a tracked flow.
	fr := frame(t, "198.51.100.200", "203.0.113.7", 4000, 80, tcp, "A", 40, false)
	fr[20] |= 0x20 // MF
	f = append(f, fixIPv4Checksum(fr))
	return f
}

// fastConfig is fastTestConfig with the web VIPs under scheduler k.
func fastConfig(k sched.Kind) string {
	if k == sched.Maglev {
		return fastTestConfig
	}
	return withScheduler(k) + fastTestConfig[len(testConfig):]
}
