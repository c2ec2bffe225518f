package dataplane

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/flow"
	"github.com/fulcrumlb/fulcrum/maglev"
)

const chanceVIP = "203.0.113.50"

// chanceWindow is the previous table's window in these tests (the
// config's default).
const chanceWindow = 5 * time.Minute

// chanceSpecs is one TCP VIP on port 80 with backends be1..beN at
// 10.0.9.1..N, tunnelled with kind, the second chance's window w.
func chanceSpecs(n int, kind encap.Kind, w time.Duration, over map[string]Effective) []VIPSpec {
	v := VIPSpec{Key: flow.VIPKey{Addr: netip.MustParseAddr(chanceVIP), Port: 80, Proto: 6}, Name: "sc", Addr: netip.MustParseAddr(chanceVIP),
		Port: 80, Proto: 6, Encap: kind, TableSize: maglev.DefaultSize, SecondChance: w}
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("be%d", i)
		eff, ok := over[name]
		if !ok {
			eff = Effective{Weight: 1}
		}
		v.Backends = append(v.Backends, BackendSpec{Name: name, Addr: netip.MustParseAddr(fmt.Sprintf("10.0.9.%d", i)), Config: 1, Eff: eff})
	}
	return []VIPSpec{v}
}

// chanceTable is the spec's table built independently: the backend name
// Maglev gives hash among be1..beN (equal weights).
func chanceTable(t testing.TB, n int) *maglev.Table {
	var mb []maglev.Backend
	for i := 1; i <= n; i++ {
		mb = append(mb, maglev.Backend{Key: fmt.Sprintf("be%d", i), Weight: 1})
	}
	tb, err := maglev.Build(mb, maglev.DefaultSize)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// chanceFlows finds client ports whose slot moved from one backend to
// another when be4 joined be1..be3 (moved: old -> new name), and ports
// whose slot kept its backend.
func chanceFlows(t testing.TB, key flow.Key, count int) (moved, kept []uint16, old, cur map[uint16]string) {
	return chanceFlowsProto(t, key, count, 6)
}

func chanceFlowsProto(t testing.TB, key flow.Key, count int, proto uint8) (moved, kept []uint16, old, cur map[uint16]string) {
	h := flow.NewHasher(key)
	t3, t4 := chanceTable(t, 3), chanceTable(t, 4)
	old, cur = map[uint16]string{}, map[uint16]string{}
	for p := uint16(20000); len(moved) < count || len(kept) < count; p++ {
		tp, _ := flow.TupleFrom(netip.MustParseAddr("198.51.100.9"), netip.MustParseAddr(chanceVIP), p, 80, proto)
		hs := h.Hash(&tp)
		a, b := t3.Backend(t3.Lookup(hs)).Key, t4.Backend(t4.Lookup(hs)).Key
		old[p], cur[p] = a, b
		if a != b && len(moved) < count {
			moved = append(moved, p)
		} else if a == b && len(kept) < count {
			kept = append(kept, p)
		}
	}
	return moved, kept, old, cur
}

// tunnelChance decodes a tunnelled frame with gopacket and returns its
// outer destination and the second chance it names: the GRE key read as
// an IPv4 address, or the GUE private block's address (the zero Addr for
// none).
func tunnelChance(t *testing.T, b []byte) (dst, chance netip.Addr) {
	t.Helper()
	pk := gopacket.NewPacket(b, layers.LayerTypeEthernet, gopacket.Default)
	ip4, ok := pk.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	if !ok {
		t.Fatalf("no outer IPv4: %v", pk)
	}
	dst = netip.AddrFrom4([4]byte(ip4.DstIP.To4()))
	switch ip4.Protocol {
	case layers.IPProtocolGRE:
		g := pk.Layer(layers.LayerTypeGRE).(*layers.GRE)
		if g.KeyPresent {
			var k [4]byte
			binary.BigEndian.PutUint32(k[:], g.Key)
			chance = netip.AddrFrom4(k)
		}
	case layers.IPProtocolUDP:
		u := pk.Layer(layers.LayerTypeUDP).(*layers.UDP)
		g := u.Payload
		if hlen := int(g[0]&0x1f) * 4; hlen >= 8 && g[4] == 0x53 && g[5] == 0x43 {
			if g[6] == 4 {
				chance = netip.AddrFrom4([4]byte(g[8:12]))
			} else {
				chance = netip.AddrFrom16([16]byte(g[8:24]))
			}
		}
	}
	return dst, chance
}

func beAddr(name string) netip.Addr {
	return netip.MustParseAddr("10.0.9." + name[2:])
}

// TestSecondChance: after be4 joins be1..be3, a mid-connection packet of a
// flow this instance never saw whose slot moved goes to the new choice
// naming the old one; the flow's next packets (conntrack hits, fused path)
// name it too; a SYN never does, nor a flow whose slot kept its backend,
// nor a UDP flow; after the window, a new flow is not given one while the
// flow that has one keeps it.
func TestSecondChance(t *testing.T) {
	for _, kind := range []encap.Kind{encap.GRE, encap.GUE, encap.IPIP} {
		t.Run(kind.String(), func(t *testing.T) {
			r := newRig(t, testConfig)
			nh := NextHop{MAC4: gwMAC, MAC6: gwMAC, Has4: true, Has6: true}
			t0 := time.Unix(1_000_000, 0)
			s0, err := NewServicesAt(nil, r.enc, nh, chanceSpecs(3, kind, chanceWindow, nil), t0)
			if err != nil {
				t.Fatal(err)
			}
			s1, err := NewServicesAt(s0, r.enc, nh, chanceSpecs(4, kind, chanceWindow, nil), t0.Add(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if p := s1.VIPs[0].Prev; p == nil || p.Table != s0.VIPs[0].Table || !p.Since.Equal(t0.Add(time.Second)) {
				t.Fatalf("previous table %+v, want s0's since t0+1s", p)
			}
			r.shared.Services.Store(s1)
			moved, kept, old, cur := chanceFlows(t, r.key, 4)
			const client = "198.51.100.9"
			want := func(kind encap.Kind, name string) netip.Addr {
				if kind == encap.IPIP {
					return netip.Addr{} // no room: never carried
				}
				return beAddr(name)
			}
			check := func(what string, f []byte, to string, chance netip.Addr) {
				t.Helper()
				out, v := r.run(f)
				if v[0] != Tx {
					t.Fatalf("%s: verdict %v", what, v[0])
				}
				if kind == encap.IPIP {
					dst, _, _ := decodeTunnel(t, out[0])
					if dst != beAddr(to) || len(out[0]) != 14+20+len(ipPacket(f)) {
						t.Fatalf("%s: to %v (%d bytes), want %v with no field", what, dst, len(out[0]), beAddr(to))
					}
					return
				}
				dst, ch := tunnelChance(t, out[0])
				if dst != beAddr(to) || ch != chance {
					t.Fatalf("%s: to %v chance %v, want to %v chance %v", what, dst, ch, beAddr(to), chance)
				}
			}
			before := r.w.c.SecondChance
			// A mid-connection packet of a moved flow, then two more: the
			// second chance is sticky (the later ones hit conntrack; the
			// third takes the fused path).
			p := moved[0]
			for k := range 3 {
				check(fmt.Sprintf("ack %d of moved flow %d", k, p), frame(t, client, chanceVIP, p, 80, layers.IPProtocolTCP, "AP", 10, true), cur[p], want(kind, old[p]))
			}
			// A SYN of a moved flow never names one.
			check("syn of a moved flow", frame(t, client, chanceVIP, moved[1], 80, layers.IPProtocolTCP, "S", 0, true), cur[moved[1]], netip.Addr{})
			check("ack after that syn", frame(t, client, chanceVIP, moved[1], 80, layers.IPProtocolTCP, "A", 0, true), cur[moved[1]], netip.Addr{})
			// A flow whose slot kept its backend never names one.
			check("ack of a kept flow", frame(t, client, chanceVIP, kept[0], 80, layers.IPProtocolTCP, "A", 5, true), cur[kept[0]], netip.Addr{})
			// A FIN or RST of a moved flow is mid-connection too.
			check("fin of a moved flow", frame(t, client, chanceVIP, moved[2], 80, layers.IPProtocolTCP, "FA", 0, true), cur[moved[2]], want(kind, old[moved[2]]))
			wantN := uint64(4)
			if kind == encap.IPIP {
				wantN = 0
			}
			if got := r.w.c.SecondChance - before; got != wantN {
				t.Errorf("SecondChance counted %d packets, want %d", got, wantN)
			}
			// IPIP cannot name one: its flows are not given one.
			if got, want := r.w.c.SecondChanceFlows, wantN/2; got != want {
				t.Errorf("SecondChanceFlows %d, want %d", got, want)
			}

			// A change replacing a table that was in force for less than
			// PrevMinAge (a slow-start step: be4 at weight 1, then 2)
			// keeps the previous table.
			s2, err := NewServicesAt(s1, r.enc, nh, chanceSpecs(4, kind, chanceWindow, map[string]Effective{"be4": {Weight: 2}}), t0.Add(2*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if !tableChanged(s1.VIPs[0], s2.VIPs[0]) || s2.VIPs[0].Prev != s1.VIPs[0].Prev {
				t.Errorf("a short-lived table replaced the previous one")
			}
			// One that was in force for PrevMinAge becomes the previous
			// table (a backend removed, then added back later).
			s2b, err := NewServicesAt(s2, r.enc, nh, chanceSpecs(3, kind, chanceWindow, nil), t0.Add(2*time.Second+PrevMinAge))
			if err != nil {
				t.Fatal(err)
			}
			if p := s2b.VIPs[0].Prev; p == nil || p.Table != s2.VIPs[0].Table || !p.Since.Equal(t0.Add(2*time.Second+PrevMinAge)) {
				t.Errorf("previous table after a stable one was replaced: %+v, want s2's", p)
			}
			if s1.ChanceExpired(t0.Add(time.Second+chanceWindow-time.Millisecond)) || !s1.ChanceExpired(t0.Add(time.Second+chanceWindow)) {
				t.Errorf("ChanceExpired: want false before the window's end, true at it")
			}
			// The window passes (s1 republished unchanged): the next
			// snapshot has no previous table.
			s3, err := NewServicesAt(s1, r.enc, nh, chanceSpecs(4, kind, chanceWindow, nil), t0.Add(time.Second+chanceWindow))
			if err != nil {
				t.Fatal(err)
			}
			if s3.VIPs[0].Prev != nil {
				t.Fatalf("previous table kept past its window")
			}
			r.shared.Services.Store(s3)
			check("ack of a moved flow after the window", frame(t, client, chanceVIP, moved[3], 80, layers.IPProtocolTCP, "A", 0, true), cur[moved[3]], netip.Addr{})
			check("the flow given a chance keeps it", frame(t, client, chanceVIP, p, 80, layers.IPProtocolTCP, "A", 0, true), cur[p], want(kind, old[p]))
		})
	}
}

// TestSecondChanceOffAndDown: with the window 0 no table is kept and
// nothing is named; a previous choice that is down is not named; a UDP
// flow never is.
func TestSecondChanceOffAndDown(t *testing.T) {
	r := newRig(t, testConfig)
	nh := NextHop{MAC4: gwMAC, Has4: true}
	t0 := time.Unix(1_000_000, 0)
	moved, _, old, cur := chanceFlows(t, r.key, 3)
	movedUDP, _, _, curUDP := chanceFlowsProto(t, r.key, 1, 17)
	moved[2] = movedUDP[0]
	cur[moved[2]] = curUDP[moved[2]]
	for _, c := range []struct {
		name   string
		window time.Duration
		down   string
		port   uint16
		proto  layers.IPProtocol
	}{
		{"off", 0, "", moved[0], layers.IPProtocolTCP},
		{"previous choice down", chanceWindow, old[moved[1]], moved[1], layers.IPProtocolTCP},
		{"udp", chanceWindow, "", moved[2], layers.IPProtocolUDP},
	} {
		t.Run(c.name, func(t *testing.T) {
			specs := func(n int, over map[string]Effective) []VIPSpec {
				s := chanceSpecs(n, encap.GRE, c.window, over)
				s[0].Proto, s[0].Key.Proto = uint8(c.proto), uint8(c.proto)
				return s
			}
			s0, err := NewServicesAt(nil, r.enc, nh, specs(3, nil), t0)
			if err != nil {
				t.Fatal(err)
			}
			over := map[string]Effective{}
			if c.down != "" {
				over[c.down] = Effective{Weight: 0, Down: true}
			}
			s1, err := NewServicesAt(s0, r.enc, nh, specs(4, over), t0.Add(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if (s1.VIPs[0].Prev != nil) != (c.window > 0) {
				t.Fatalf("previous table %v with window %v", s1.VIPs[0].Prev, c.window)
			}
			r.shared.Services.Store(s1)
			out, v := r.run(frame(t, "198.51.100.9", chanceVIP, c.port, 80, c.proto, "A", 0, true))
			if v[0] != Tx {
				t.Fatalf("verdict %v", v[0])
			}
			dst, ch := tunnelChance(t, out[0])
			if ch.IsValid() {
				t.Errorf("chance %v named (to %v)", ch, dst)
			}
			if c.down == "" && dst != beAddr(cur[c.port]) {
				t.Errorf("to %v, want %v", dst, beAddr(cur[c.port]))
			}
		})
	}
}

// TestSecondChanceFastMatchesGeneral: the fused path gives a flow's
// later packets the same second chance as the general path, byte for
// byte, with the same counters and conntrack entries.
func TestSecondChanceFastMatchesGeneral(t *testing.T) {
	tw := newTwin(t, testConfig)
	nh := NextHop{MAC4: gwMAC, MAC6: gwMAC, Has4: true, Has6: true}
	t0 := time.Unix(1_000_000, 0)
	for ki, kind := range []encap.Kind{encap.GRE, encap.GUE} {
		s0, err := NewServicesAt(nil, tw.fast.enc, nh, chanceSpecs(3, kind, chanceWindow, nil), t0)
		if err != nil {
			t.Fatal(err)
		}
		s1, err := NewServicesAt(s0, tw.fast.enc, nh, chanceSpecs(4, kind, chanceWindow, nil), t0.Add(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		tw.fast.shared.Services.Store(s1)
		tw.slow.shared.Services.Store(s1)
		moved, kept, _, _ := chanceFlows(t, tw.fast.key, 8)
		var frames [][]byte
		for _, p := range append(moved, kept...) {
			frames = append(frames, frame(t, "198.51.100.9", chanceVIP, p, 80, layers.IPProtocolTCP, "A", 20, true))
		}
		for step := range 3 { // misses, then hits (fused), then hits again
			tw.burst(fmt.Sprintf("%s step %d", kind, step), frames)
			tw.same(fmt.Sprintf("%s step %d", kind, step))
		}
		if tw.fast.w.c.SecondChance == 0 {
			t.Fatalf("%s: no packet carried a second chance", kind)
		}
		// A SYN on an established flow that has a chance keeps its pin
		// and the chance (it may be spoofed: the connection lives on);
		// after the flow's FIN, a SYN starts a new connection and clears
		// it. The same on both paths. (Each kind takes its own flow: the
		// twins' tables carry the first kind's entries into the second.)
		port := moved[ki]
		hasChance := func(r *rig) (has bool) {
			r.w.ct.ForEach(func(e *conntrack.Entry) {
				if k := e.Key(); k.SrcPort == port {
					_, has = e.Chance()
				}
			})
			return has
		}
		for _, r := range []*rig{tw.fast, tw.slow} {
			if !hasChance(r) {
				t.Fatalf("%s: the flow has no second chance to start with", kind)
			}
		}
		syn := frame(t, "198.51.100.9", chanceVIP, port, 80, layers.IPProtocolTCP, "S", 0, true)
		tw.burst(kind.String()+" syn", [][]byte{syn})
		tw.same(kind.String() + " syn")
		for _, r := range []*rig{tw.fast, tw.slow} {
			if !hasChance(r) {
				t.Errorf("%s: a SYN on the established flow took its second chance", kind)
			}
		}
		tw.burst(kind.String()+" fin, syn", [][]byte{frame(t, "198.51.100.9", chanceVIP, port, 80, layers.IPProtocolTCP, "FA", 0, true), syn})
		tw.same(kind.String() + " fin, syn")
		for _, r := range []*rig{tw.fast, tw.slow} {
			if hasChance(r) {
				t.Errorf("%s: the SYN after the FIN left the second chance in the entry", kind)
			}
		}
	}
}

// TestSecondChanceAllocatesNothing: bursts of mid-connection packets of
// moved flows (misses given a chance, then fused hits carrying it) allocate
// nothing.
func TestSecondChanceAllocatesNothing(t *testing.T) {
	r := newRig(t, testConfig)
	nh := NextHop{MAC4: gwMAC, Has4: true}
	t0 := time.Unix(1_000_000, 0)
	s0, err := NewServicesAt(nil, r.enc, nh, chanceSpecs(3, encap.GUE, chanceWindow, nil), t0)
	if err != nil {
		t.Fatal(err)
	}
	s1, err := NewServicesAt(s0, r.enc, nh, chanceSpecs(4, encap.GUE, chanceWindow, nil), t0.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	r.shared.Services.Store(s1)
	r.run() // the new snapshot's schedulers and counters, once
	moved, _, _, _ := chanceFlows(t, r.key, 32)
	var frames [][]byte
	for _, p := range moved {
		frames = append(frames, frame(t, "198.51.100.9", chanceVIP, p, 80, layers.IPProtocolTCP, "A", 100, true))
	}
	allocs := allocsPerBurst(frames, func(pkts []Pkt) {
		r.now++
		r.w.Process(pkts, r.now)
	})
	if allocs != 0 {
		t.Fatalf("Process allocates %v times per burst", allocs)
	}
	if r.w.c.SecondChance < 200*32 {
		t.Fatalf("SecondChance %d: the bursts did not carry second chances", r.w.c.SecondChance)
	}
}

// BenchmarkProcessSecondChance measures the cost of carrying a second
// chance: 64-byte ACKs of 4,096 established flows whose slot moved when be4
// joined, in bursts of 32, with the second chance on (every packet a fused
// hit naming its previous backend) and off (the same flows, no field).
// ns/op is per packet.
func BenchmarkProcessSecondChance(b *testing.B) {
	const flows, burst = 4096, 32
	for _, kind := range []encap.Kind{encap.GRE, encap.GUE} {
		for _, on := range []bool{false, true} {
			window := time.Duration(0)
			if on {
				window = chanceWindow
			}
			b.Run(fmt.Sprintf("encap=%s/chance=%v", kind, on), func(b *testing.B) {
				t := &testing.T{}
				r := newRig(t, cfgWithCapacity(testConfig, 1<<14))
				nh := NextHop{MAC4: gwMAC, Has4: true}
				t0 := time.Unix(1_000_000, 0)
				s0, err := NewServicesAt(nil, r.enc, nh, chanceSpecs(3, kind, window, nil), t0)
				if err != nil {
					b.Fatal(err)
				}
				s1, err := NewServicesAt(s0, r.enc, nh, chanceSpecs(4, kind, window, nil), t0.Add(time.Second))
				if err != nil {
					b.Fatal(err)
				}
				r.shared.Services.Store(s1)
				moved, _, _, _ := chanceFlows(b, r.key, flows)
				base := frame(t, "198.51.100.9", chanceVIP, 1, 80, layers.IPProtocolTCP, "A", 0, true)
				bufs := make([][]byte, burst)
				for i := range bufs {
					bufs[i] = make([]byte, headroom+len(base))
				}
				pkts := make([]Pkt, burst)
				fill := func(i, f int) {
					copy(bufs[i][headroom:], base)
					bufs[i][headroom+34], bufs[i][headroom+35] = byte(moved[f]>>8), byte(moved[f])
					pkts[i] = Pkt{Buf: bufs[i], Off: headroom, Len: len(base)}
				}
				for range 2 { // every flow seen twice: an entry, then established
					for f := 0; f < flows; f += burst {
						for i := range burst {
							fill(i, f+i)
						}
						r.w.Process(pkts, r.now)
					}
				}
				c0 := r.w.c.SecondChance
				b.ReportAllocs()
				cpu := startCPU(b)
				n, f := 0, 0
				for n < b.N {
					for i := range burst {
						fill(i, f)
						f = (f + 1) % flows
					}
					r.w.Process(pkts, r.now)
					n += burst
				}
				cpu.stop(b, n)
				if carried := r.w.c.SecondChance - c0; on != (carried > 0) {
					b.Fatalf("second chance on %v, %d packets carried one", on, carried)
				}
			})
		}
	}
}
