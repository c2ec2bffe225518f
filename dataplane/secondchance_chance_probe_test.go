package dataplane

// Probes of the second chance (docs/second-chance.md) from a legitimate
// operator's and fleet's side: several changes inside the window, every
// scheduler, both paths, IPv4 and IPv6, GRE/GUE/IPIP, fleet agreement byte
// for byte, the MTU edge, the window's edges on a test clock, and effects
// within one receive burst. The attack side is chance_attack_test.go.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/flow"
	"github.com/fulcrumlb/fulcrum/maglev"
	"github.com/fulcrumlb/fulcrum/sched"
)

const (
	pcClient  = "198.51.100.77"
	pcClient6 = "2001:db8:77::9"
	pcVIP6    = "2001:db8:ffff::50"
)

// pcBE is one backend of a probe VIP: name, address, effective weight
// (0: drained or down), down.
type pcBE struct {
	name, addr string
	w          int
	down       bool
	ramp       bool // w is a slow start's step (Effective.Ramping)
}

func pcSet(n int, v6 bool) []pcBE {
	var s []pcBE
	for i := 1; i <= n; i++ {
		a := fmt.Sprintf("10.0.9.%d", i)
		if v6 {
			a = fmt.Sprintf("2001:db8:9::%d", i)
		}
		s = append(s, pcBE{name: fmt.Sprintf("be%d", i), addr: a, w: 100})
	}
	return s
}

// with returns s with backend name's weight and down state replaced (or
// it removed when w < 0).
func with(s []pcBE, name string, w int, down bool) []pcBE {
	var out []pcBE
	for _, b := range s {
		if b.name == name {
			if w < 0 {
				continue
			}
			b.w, b.down = w, down
		}
		out = append(out, b)
	}
	return out
}

func pcSpec(vip string, kind encap.Kind, win time.Duration, k sched.Kind, bes []pcBE) []VIPSpec {
	a := netip.MustParseAddr(vip)
	v := VIPSpec{Key: flow.VIPKey{Addr: a, Port: 80, Proto: 6}, Name: "pc", Addr: a, Port: 80, Proto: 6, Encap: kind, Sched: k,
		TableSize: maglev.DefaultSize, SecondChance: win}
	for _, b := range bes {
		v.Backends = append(v.Backends, BackendSpec{Name: b.name, Addr: netip.MustParseAddr(b.addr), Config: 100, Eff: Effective{Weight: b.w, Down: b.down, Ramping: b.ramp}})
	}
	return []VIPSpec{v}
}

// pcStep is one published snapshot of a history: the backend set at
// offset at from the history's start.
type pcStep struct {
	at  time.Duration
	bes []pcBE
	win time.Duration // 0: chanceWindow
}

var pcT0 = time.Unix(2_000_000, 0)

// pcHistory publishes the steps in order, each built from the one before,
// and returns the last snapshot.
func pcHistory(t *testing.T, r *rig, vip string, kind encap.Kind, k sched.Kind, steps []pcStep) *Services {
	t.Helper()
	nh := NextHop{MAC4: gwMAC, MAC6: gwMAC, Has4: true, Has6: true}
	var s *Services
	for _, st := range steps {
		w := st.win
		if w == 0 {
			w = chanceWindow
		}
		n, err := NewServicesAt(s, r.enc, nh, pcSpec(vip, kind, w, k, st.bes), pcT0.Add(st.at))
		if err != nil {
			t.Fatal(err)
		}
		s = n
	}
	r.shared.Services.Store(s)
	return s
}

// pcOracle is the Maglev choice among the backends of weight > 0, built
// independently of the dataplane.
func pcOracle(t *testing.T, bes []pcBE) func(h uint64) pcBE {
	var mb []maglev.Backend
	by := map[string]pcBE{}
	for _, b := range bes {
		by[b.name] = b
		if b.w > 0 {
			mb = append(mb, maglev.Backend{Key: b.name, Weight: uint32(b.w)})
		}
	}
	tb, err := maglev.Build(mb, maglev.DefaultSize)
	if err != nil {
		t.Fatal(err)
	}
	return func(h uint64) pcBE { return by[tb.Backend(tb.Lookup(h)).Key] }
}

func pcHash(r *rig, src, dst string, port uint16) uint64 {
	tp, _ := flow.TupleFrom(netip.MustParseAddr(src), netip.MustParseAddr(dst), port, 80, 6)
	return flow.NewHasher(r.key).Hash(&tp)
}

// pcOut is a decoded tunnel frame.
type pcOut struct {
	dst, chance netip.Addr
	kind        uint8 // outer protocol / next header
	inner       []byte
	udpSumOK    bool // GUE over IPv6: the UDP checksum verifies (true otherwise)
}

// pcDecode decodes an Ethernet + IPv4/IPv6 + GRE/GUE/IPIP frame by hand.
func pcDecode(t *testing.T, b []byte) pcOut {
	t.Helper()
	var o pcOut
	o.udpSumOK = true
	var l4 []byte
	var src, dst []byte
	switch binary.BigEndian.Uint16(b[12:]) {
	case 0x0800:
		ip := b[14:]
		o.kind = ip[9]
		src, dst = ip[12:16], ip[16:20]
		o.dst = netip.AddrFrom4([4]byte(dst))
		l4 = ip[20:binary.BigEndian.Uint16(ip[2:])]
	case 0x86dd:
		ip := b[14:]
		o.kind = ip[6]
		src, dst = ip[8:24], ip[24:40]
		o.dst = netip.AddrFrom16([16]byte(dst))
		l4 = ip[40 : 40+int(binary.BigEndian.Uint16(ip[4:]))]
	default:
		t.Fatalf("not a tunnel frame: % x", b[:min(len(b), 40)])
	}
	switch o.kind {
	case 47:
		fl := binary.BigEndian.Uint16(l4)
		n := 4
		if fl&0x2000 != 0 {
			o.chance = netip.AddrFrom4([4]byte(l4[4:8]))
			n = 8
		}
		if fl&^0x2000 != 0 {
			t.Fatalf("GRE flags %#x", fl)
		}
		o.inner = l4[n:]
	case 17:
		g := l4[8:]
		hl := int(g[0]&0x1f) * 4
		if hl > 0 {
			if binary.BigEndian.Uint16(g[4:]) != encap.GUEChanceType || g[7] != 0 {
				t.Fatalf("GUE private block % x", g[4:4+hl])
			}
			switch g[6] {
			case 4:
				if hl != 8 {
					t.Fatalf("GUE hlen %d for IPv4", hl)
				}
				o.chance = netip.AddrFrom4([4]byte(g[8:12]))
			case 6:
				if hl != 20 {
					t.Fatalf("GUE hlen %d for IPv6", hl)
				}
				o.chance = netip.AddrFrom16([16]byte(g[8:24]))
			default:
				t.Fatalf("GUE family %d", g[6])
			}
		}
		o.inner = g[4+hl:]
		if len(src) == 16 {
			if binary.BigEndian.Uint16(l4[6:]) == 0 {
				o.udpSumOK = false
			} else {
				var s uint32
				add := func(p []byte) {
					for i := 0; i+1 < len(p); i += 2 {
						s += uint32(binary.BigEndian.Uint16(p[i:]))
					}
					if len(p)%2 == 1 {
						s += uint32(p[len(p)-1]) << 8
					}
				}
				add(src)
				add(dst)
				s += uint32(len(l4)) + 17
				add(l4)
				for s>>16 != 0 {
					s = s&0xffff + s>>16
				}
				o.udpSumOK = s == 0xffff
			}
		}
	case 4, 41:
		o.inner = l4
	default:
		t.Fatalf("outer protocol %d", o.kind)
	}
	return o
}

func pcAddr(b pcBE) netip.Addr { return netip.MustParseAddr(b.addr) }

// pcScenario is a history of changes and the state after it: which
// backends' previous-table choices still count (the same incarnation,
// not down).
type pcScenario struct {
	name  string
	steps []pcStep
	prev  []pcBE          // the table that must be the previous one
	live  map[string]bool // previous choices that may be named
}

func pcScenarios() []pcScenario {
	a := pcSet(3, false)
	b := append(pcSet(3, false), pcBE{name: "be4", addr: "10.0.9.4", w: 100})
	h := time.Hour
	return []pcScenario{
		{
			// add, then a weight change 1 s later (a ramp step): A stays previous
			name:  "two changes",
			steps: []pcStep{{0, a, 0}, {h, with(b, "be4", 10, false), 0}, {h + time.Second, b, 0}},
			prev:  a, live: map[string]bool{"be1": true, "be2": true, "be3": true},
		},
		{
			// add, drain be2, health-down be3 (each 1 s apart): be2 drained still counts, be3 down does not
			name: "three changes: add, drain, down",
			steps: []pcStep{{0, a, 0}, {h, b, 0}, {h + time.Second, with(b, "be2", 0, false), 0},
				{h + 2*time.Second, with(with(b, "be2", 0, false), "be3", 0, true), 0}},
			prev: a, live: map[string]bool{"be1": true, "be2": true},
		},
		{
			// remove be1, add be4, weight be2, be3 weight 0 and back: four changes in 3 s
			name: "four changes",
			steps: []pcStep{{0, a, 0}, {h, with(a, "be1", -1, false), 0}, {h + time.Second, with(b, "be1", -1, false), 0},
				{h + 2*time.Second, with(with(b, "be1", -1, false), "be2", 300, false), 0},
				{h + 2500*time.Millisecond, with(with(with(b, "be1", -1, false), "be2", 300, false), "be3", 0, false), 0},
				{h + 2900*time.Millisecond, with(with(b, "be1", -1, false), "be2", 300, false), 0}},
			prev: a, live: map[string]bool{"be2": true, "be3": true},
		},
		{
			// a change that stood for 10 s is the previous table of the next one
			name:  "reload after a stable change",
			steps: []pcStep{{0, a, 0}, {h, b, 0}, {h + 10*time.Second, append(pcSet(4, false), pcBE{name: "be5", addr: "10.0.9.5", w: 100}), 0}},
			prev:  b, live: map[string]bool{"be1": true, "be2": true, "be3": true, "be4": true},
		},
	}
}

// TestChanceProbeSeveralChanges: two, three and four changes inside the
// window, on both paths and for GRE and GUE: every moved flow's first and
// later packets go to the current choice and name the previous table's
// choice exactly when it differs and still counts; the flows given one are
// counted once each.
func TestChanceProbeSeveralChanges(t *testing.T) {
	for _, sc := range pcScenarios() {
		for _, kind := range []encap.Kind{encap.GRE, encap.GUE} {
			t.Run(sc.name+"/"+kind.String(), func(t *testing.T) {
				bothPaths(t, testConfig, func(t *testing.T, r *rig) {
					s := pcHistory(t, r, chanceVIP, kind, sched.Maglev, sc.steps)
					if s.VIPs[0].Prev == nil {
						t.Fatal("no previous table")
					}
					cur := pcOracle(t, sc.steps[len(sc.steps)-1].bes)
					prev := pcOracle(t, sc.prev)
					given := 0
					for port := uint16(30000); port < 30300; port++ {
						h := pcHash(r, pcClient, chanceVIP, port)
						c, p := cur(h), prev(h)
						var want netip.Addr
						if p.name != c.name && sc.live[p.name] {
							want = pcAddr(p)
						}
						if want.IsValid() {
							given++
						}
						for k := range 3 { // a miss, then hits (fused where allowed)
							out, v := r.run(frame(t, pcClient, chanceVIP, port, 80, layers.IPProtocolTCP, "A", 10, true))
							if v[0] != Tx {
								t.Fatalf("port %d packet %d: verdict %v", port, k, v[0])
							}
							o := pcDecode(t, out[0])
							if o.dst != pcAddr(c) || o.chance != want {
								t.Fatalf("port %d packet %d: to %v naming %v, want to %v (%s) naming %v (previous choice %s)",
									port, k, o.dst, o.chance, pcAddr(c), c.name, want, p.name)
							}
						}
					}
					if given == 0 {
						t.Fatal("no flow expected a second chance: the scenario tests nothing")
					}
					if r.w.c.SecondChanceFlows != uint64(given) || r.w.c.SecondChance != uint64(3*given) {
						t.Errorf("SecondChanceFlows %d, SecondChance %d; want %d, %d", r.w.c.SecondChanceFlows, r.w.c.SecondChance, given, 3*given)
					}
				})
			})
		}
	}
}

// TestChanceProbeSchedulers: under every scheduler, on both paths, a
// mid-connection packet of a moved flow after a change: Maglev names the
// previous choice; a load-based scheduler keeps no previous table and
// its frames carry no field (no GRE key).
func TestChanceProbeSchedulers(t *testing.T) {
	a, b := pcSet(3, false), pcSet(4, false)
	for _, k := range sched.Kinds() {
		t.Run(k.String(), func(t *testing.T) {
			bothPaths(t, testConfig, func(t *testing.T, r *rig) {
				s := pcHistory(t, r, chanceVIP, encap.GRE, k, []pcStep{{0, a, 0}, {time.Hour, b, 0}})
				if (s.VIPs[0].Prev != nil) != (k == sched.Maglev) {
					t.Fatalf("previous table held: %v", s.VIPs[0].Prev != nil)
				}
				cur, prev := pcOracle(t, b), pcOracle(t, a)
				named := 0
				for port := uint16(31000); port < 31100; port++ {
					h := pcHash(r, pcClient, chanceVIP, port)
					for range 2 {
						out, v := r.run(frame(t, pcClient, chanceVIP, port, 80, layers.IPProtocolTCP, "A", 0, true))
						if v[0] != Tx {
							t.Fatalf("verdict %v", v[0])
						}
						o := pcDecode(t, out[0])
						// an untracked segment follows the table under every scheduler
						if o.dst != pcAddr(cur(h)) {
							t.Fatalf("port %d to %v, want %v", port, o.dst, pcAddr(cur(h)))
						}
						want := netip.Addr{}
						if k == sched.Maglev && prev(h).name != cur(h).name {
							want = pcAddr(prev(h))
						}
						if o.chance != want {
							t.Fatalf("port %d names %v, want %v", port, o.chance, want)
						}
						if o.chance.IsValid() {
							named++
						}
					}
				}
				if k == sched.Maglev && named == 0 {
					t.Fatal("Maglev named nothing")
				}
			})
		})
	}
}

// TestChanceProbeIPv6: an IPv6 VIP (inner IPv6) and an IPv4 VIP, each
// with IPv6 backends, on both paths: GUE names the IPv6 previous choice in
// a 20-byte block and the outer UDP checksum over IPv6 verifies; GRE cannot
// name it and carries no key; IPIP never carries anything.
func TestChanceProbeIPv6(t *testing.T) {
	for _, vip := range []string{pcVIP6, chanceVIP} {
		client := pcClient
		if netip.MustParseAddr(vip).Is6() {
			client = pcClient6
		}
		for _, kind := range []encap.Kind{encap.GUE, encap.GRE, encap.IPIP} {
			t.Run(vip+"/"+kind.String(), func(t *testing.T) {
				bothPaths(t, testConfig, func(t *testing.T, r *rig) {
					a, b := pcSet(3, true), pcSet(4, true)
					pcHistory(t, r, vip, kind, sched.Maglev, []pcStep{{0, a, 0}, {time.Hour, b, 0}})
					cur, prev := pcOracle(t, b), pcOracle(t, a)
					named := 0
					for port := uint16(32000); port < 32100; port++ {
						h := pcHash(r, client, vip, port)
						f := frame(t, client, vip, port, 80, layers.IPProtocolTCP, "PA", 33, true)
						for range 2 {
							out, v := r.run(f)
							if v[0] != Tx {
								t.Fatalf("verdict %v", v[0])
							}
							o := pcDecode(t, out[0])
							want := netip.Addr{}
							if kind == encap.GUE && prev(h).name != cur(h).name {
								want = pcAddr(prev(h))
							}
							if o.dst != pcAddr(cur(h)) || o.chance != want {
								t.Fatalf("port %d: to %v naming %v, want %v naming %v", port, o.dst, o.chance, pcAddr(cur(h)), want)
							}
							if !o.udpSumOK {
								t.Fatalf("port %d: outer UDP checksum over IPv6 does not verify", port)
							}
							if !bytes.Equal(o.inner, ipPacket(f)) {
								t.Fatalf("port %d: inner packet changed", port)
							}
							if o.chance.IsValid() {
								named++
							}
						}
					}
					if kind == encap.GUE && named == 0 {
						t.Fatal("GUE named nothing")
					}
					if kind != encap.GUE && (named != 0 || r.w.c.SecondChanceFlows != 0) {
						t.Errorf("%s: %d named, %d flows counted", kind, named, r.w.c.SecondChanceFlows)
					}
				})
			})
		}
	}
}

// TestChanceProbeFleetHistories: two instances with different histories
// that end in the same tables (one saw a short health flap of be2, no-op
// reloads and the backends in another order; the other started later and
// saw only the addition) write byte-identical frames, chance field
// included, for the same packets: first packets and hits, both paths.
func TestChanceProbeFleetHistories(t *testing.T) {
	a, b := pcSet(3, false), pcSet(4, false)
	rev := func(s []pcBE) []pcBE {
		out := append([]pcBE(nil), s...)
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
		return out
	}
	h := time.Hour
	for _, kind := range []encap.Kind{encap.GRE, encap.GUE} {
		for _, fused := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/fused=%v", kind, fused), func(t *testing.T) {
				x, y := newRig(t, testConfig), newRig(t, testConfig)
				x.w.generalOnly, y.w.generalOnly = !fused, !fused
				pcHistory(t, x, chanceVIP, kind, sched.Maglev, []pcStep{
					{0, a, 0}, {10 * time.Minute, a, 0}, // a no-op reload
					{h, with(a, "be2", 0, true), 0}, {h + time.Second, a, 0}, // a 1 s health flap seen here only
					{h + 2*time.Second, b, 0}, {h + 3*time.Second, b, 0}})
				pcHistory(t, y, chanceVIP, kind, sched.Maglev, []pcStep{
					{30 * time.Minute, rev(a), 0}, {h + 2500*time.Millisecond, rev(b), 0}})
				named := 0
				for round := range 2 {
					for port := uint16(33000); port < 33300; port++ {
						f := frame(t, pcClient, chanceVIP, port, 80, layers.IPProtocolTCP, "A", 10, true)
						ox, vx := x.run(f)
						oy, vy := y.run(f)
						if vx[0] != vy[0] || !bytes.Equal(ox[0], oy[0]) {
							t.Fatalf("round %d port %d: frames differ\nx % x\ny % x", round, port, ox[0], oy[0])
						}
						if pcDecode(t, ox[0]).chance.IsValid() {
							named++
						}
					}
				}
				if named == 0 || x.w.c.SecondChance != y.w.c.SecondChance {
					t.Fatalf("named %d, SecondChance %d and %d", named, x.w.c.SecondChance, y.w.c.SecondChance)
				}
			})
		}
	}
}

// TestChanceProbeWindowReload: a reload that only lengthens the window
// (5m -> 10m) a minute after a change keeps the previous table: the
// operator gives the moved flows more time, not none. The instance that
// reloaded and one that did not yet must still agree byte for byte.
func TestChanceProbeWindowReload(t *testing.T) {
	a, b := pcSet(3, false), pcSet(4, false)
	x, y := newRig(t, testConfig), newRig(t, testConfig)
	sx := pcHistory(t, x, chanceVIP, encap.GRE, sched.Maglev, []pcStep{{0, a, 0}, {time.Hour, b, 0}, {time.Hour + time.Minute, b, 10 * time.Minute}})
	pcHistory(t, y, chanceVIP, encap.GRE, sched.Maglev, []pcStep{{0, a, 0}, {time.Hour, b, 0}})
	if sx.VIPs[0].Prev == nil {
		t.Errorf("a reload lengthening second_chance_window from 5m to 10m 60 s after a change dropped the previous table")
	}
	cur, prev := pcOracle(t, b), pcOracle(t, a)
	differ, moved := 0, 0
	for port := uint16(34000); port < 34200; port++ {
		h := pcHash(x, pcClient, chanceVIP, port)
		if cur(h).name == prev(h).name {
			continue
		}
		moved++
		f := frame(t, pcClient, chanceVIP, port, 80, layers.IPProtocolTCP, "A", 10, true)
		ox, _ := x.run(f)
		oy, _ := y.run(f)
		if !bytes.Equal(ox[0], oy[0]) {
			differ++
		}
	}
	if differ != 0 {
		t.Errorf("%d of %d moved flows: the instance that lengthened the window wrote other frames than the one that did not (no chance field)", differ, moved)
	}
}

// TestChanceProbeRampOutlivesWindow: docs/second-chance.md: "A window may
// end in a slow-start ramp longer than itself; the ramp's later steps then
// leave the VIP without a previous table." A 10 s window, a 30 s ramp of
// be4 rebuilt every second (weights as the control plane's ramp: 10% of
// 100, then linear): once the window has passed, no step may hold a
// previous table, and a moved flow must not be named a ramp step's choice.
func TestChanceProbeRampOutlivesWindow(t *testing.T) {
	r := newRig(t, testConfig)
	const win = 10 * time.Second
	a := pcSet(3, false)
	steps := []pcStep{{0, a, win}}
	h := time.Hour
	for el := 0; el <= 30; el++ {
		w := max(10, (100*el+29)/30)
		steps = append(steps, pcStep{h + time.Duration(el)*time.Second, append(pcSet(3, false), pcBE{name: "be4", addr: "10.0.9.4", w: w, ramp: el < 30}), win})
	}
	nh := NextHop{MAC4: gwMAC, MAC6: gwMAC, Has4: true, Has6: true}
	var s *Services
	var bad []string
	for _, st := range steps {
		n, err := NewServicesAt(s, r.enc, nh, pcSpec(chanceVIP, encap.GRE, st.win, sched.Maglev, st.bes), pcT0.Add(st.at))
		if err != nil {
			t.Fatal(err)
		}
		s = n
		if st.at >= h+win && s.VIPs[0].Prev != nil {
			bad = append(bad, fmt.Sprintf("t+%v: previous table since t+%v", st.at-h, s.VIPs[0].Prev.Since.Sub(pcT0.Add(h))))
		}
	}
	if len(bad) > 0 {
		t.Errorf("%d ramp steps after the window hold a previous table: %v", len(bad), bad)
	}
}

// TestChanceProbeWindowEdges: at the window's limits (1 ns, 24 h) the
// previous table is kept at Since+window-1ns and gone at Since+window,
// exactly when ChanceExpired turns true; a flow arriving in the snapshot
// republished at the edge gets no field, a flow given one keeps it.
func TestChanceProbeWindowEdges(t *testing.T) {
	for _, win := range []time.Duration{time.Nanosecond, time.Second, 24 * time.Hour} {
		t.Run(win.String(), func(t *testing.T) {
			r := newRig(t, testConfig)
			a, b := pcSet(3, false), pcSet(4, false)
			ch := pcT0.Add(time.Hour)
			nh := NextHop{MAC4: gwMAC, MAC6: gwMAC, Has4: true, Has6: true}
			s0, _ := NewServicesAt(nil, r.enc, nh, pcSpec(chanceVIP, encap.GRE, win, sched.Maglev, a), pcT0)
			s1, err := NewServicesAt(s0, r.enc, nh, pcSpec(chanceVIP, encap.GRE, win, sched.Maglev, b), ch)
			if err != nil || s1.VIPs[0].Prev == nil {
				t.Fatalf("no previous table: %v", err)
			}
			if s1.ChanceExpired(ch.Add(win-1)) || !s1.ChanceExpired(ch.Add(win)) {
				t.Fatalf("ChanceExpired edges wrong")
			}
			sBefore, _ := NewServicesAt(s1, r.enc, nh, pcSpec(chanceVIP, encap.GRE, win, sched.Maglev, b), ch.Add(win-1))
			sAt, _ := NewServicesAt(s1, r.enc, nh, pcSpec(chanceVIP, encap.GRE, win, sched.Maglev, b), ch.Add(win))
			if sBefore.VIPs[0].Prev != s1.VIPs[0].Prev || sAt.VIPs[0].Prev != nil {
				t.Fatalf("kept at edge-1ns: %v; dropped at the edge: %v", sBefore.VIPs[0].Prev != nil, sAt.VIPs[0].Prev == nil)
			}
			cur, prev := pcOracle(t, b), pcOracle(t, a)
			var moved []uint16
			for port := uint16(35000); len(moved) < 2; port++ {
				if h := pcHash(r, pcClient, chanceVIP, port); cur(h).name != prev(h).name {
					moved = append(moved, port)
				}
			}
			r.shared.Services.Store(sBefore)
			f0 := frame(t, pcClient, chanceVIP, moved[0], 80, layers.IPProtocolTCP, "A", 1, true)
			f1 := frame(t, pcClient, chanceVIP, moved[1], 80, layers.IPProtocolTCP, "A", 1, true)
			out, _ := r.run(f0)
			if !pcDecode(t, out[0]).chance.IsValid() {
				t.Fatal("no chance 1 ns before the window's end")
			}
			r.shared.Services.Store(sAt)
			out, _ = r.run(f1, f0) // one burst: the new flow after the window, the flow given one before
			if o := pcDecode(t, out[0]); o.chance.IsValid() {
				t.Errorf("a flow first seen at the window's end named %v", o.chance)
			}
			if o := pcDecode(t, out[1]); o.chance != pcAddr(prev(pcHash(r, pcClient, chanceVIP, moved[0]))) {
				t.Errorf("the flow given a chance lost it at the window's end: %v", o.chance)
			}
		})
	}
}

// TestChanceProbeMTU: a packet of a moved flow whose IP length fits the
// MTU exactly with the field is forwarded with it (a frame of 14 + MTU
// bytes); one byte more gets a too-big reply quoting MTU - overhead -
// field, counted as an ICMP reply and not as carrying; GRE and GUE, IPv4
// and IPv6 backends and VIPs, first packet and hits, both paths.
func TestChanceProbeMTU(t *testing.T) {
	for _, kind := range []encap.Kind{encap.GRE, encap.GUE} {
		for _, v6be := range []bool{false, true} {
			for _, vip := range []string{chanceVIP, pcVIP6} {
				if kind == encap.GRE && v6be {
					continue // cannot carry: covered by the attack probe
				}
				name := fmt.Sprintf("%s/be6=%v/%s", kind, v6be, vip)
				t.Run(name, func(t *testing.T) {
					bothPaths(t, testConfig, func(t *testing.T, r *rig) {
						a, b := pcSet(3, v6be), pcSet(4, v6be)
						pcHistory(t, r, vip, kind, sched.Maglev, []pcStep{{0, a, 0}, {time.Hour, b, 0}})
						cur, prev := pcOracle(t, b), pcOracle(t, a)
						client := pcClient
						innerHdr := 40
						if netip.MustParseAddr(vip).Is6() {
							client, innerHdr = pcClient6, 60
						}
						var moved []uint16
						for port := uint16(36000); len(moved) < 2; port++ {
							if h := pcHash(r, client, vip, port); cur(h).name != prev(h).name {
								moved = append(moved, port)
							}
						}
						mtu := r.enc.Config().MTU
						pb := prev(pcHash(r, client, vip, moved[0]))
						tgt, _ := r.enc.Backend(pcAddr(pb))
						ovh := encap.Overhead(kind, v6be) + encap.ChanceLen(kind, &tgt)
						fit := mtu - ovh // IP length that fits exactly with the field
						c := &r.w.c
						for k := range 3 {
							sc := c.SecondChance
							out, v := r.run(frame(t, client, vip, moved[0], 80, layers.IPProtocolTCP, "A", fit-innerHdr, true))
							if v[0] != Tx || len(out[0]) != 14+mtu {
								t.Fatalf("exact fit, packet %d: verdict %v, %d bytes, want tx of %d", k, v[0], len(out[0]), 14+mtu)
							}
							if o := pcDecode(t, out[0]); o.chance != pcAddr(pb) || c.SecondChance != sc+1 {
								t.Fatalf("exact fit, packet %d: names %v (want %v), SecondChance +%d", k, o.chance, pcAddr(pb), c.SecondChance-sc)
							}
						}
						pb1 := prev(pcHash(r, client, vip, moved[1]))
						tgt1, _ := r.enc.Backend(pcAddr(pb1))
						ovh1 := encap.Overhead(kind, v6be) + encap.ChanceLen(kind, &tgt1)
						for k := range 3 {
							sc, icmp := c.SecondChance, c.Encap[encap.ICMPReply]
							out, v := r.run(frame(t, client, vip, moved[1], 80, layers.IPProtocolTCP, "A", mtu-ovh1+1-innerHdr, true))
							if v[0] != Tx || c.Encap[encap.ICMPReply] != icmp+1 || c.SecondChance != sc {
								t.Fatalf("one over, packet %d: verdict %v, ICMP +%d, SecondChance +%d", k, v[0], c.Encap[encap.ICMPReply]-icmp, c.SecondChance-sc)
							}
							pk := gopacket.NewPacket(out[0], layers.LayerTypeEthernet, gopacket.Default)
							var quoted int
							if l, ok := pk.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4); ok {
								if l.TypeCode != layers.CreateICMPv4TypeCode(3, 4) {
									t.Fatalf("ICMP %v", l.TypeCode)
								}
								quoted = int(l.Seq)
							} else if l, ok := pk.Layer(layers.LayerTypeICMPv6).(*layers.ICMPv6); ok {
								if l.TypeCode.Type() != 2 {
									t.Fatalf("ICMPv6 %v", l.TypeCode)
								}
								quoted = int(binary.BigEndian.Uint32(l.Payload[0:4]))
							} else {
								t.Fatalf("no ICMP reply: %v", pk)
							}
							if quoted != mtu-ovh1 {
								t.Fatalf("one over, packet %d: quotes MTU %d, want %d", k, quoted, mtu-ovh1)
							}
							// the client then sends at the quoted MTU: it goes, with the field
							out, v = r.run(frame(t, client, vip, moved[1], 80, layers.IPProtocolTCP, "A", quoted-innerHdr, true))
							if v[0] != Tx || pcDecode(t, out[0]).chance != pcAddr(pb1) {
								t.Fatalf("at the quoted MTU: verdict %v, names %v", v[0], pcDecode(t, out[0]).chance)
							}
						}
					})
				})
			}
		}
	}
}

// TestChanceProbeOneBurst: effects within one receive burst, fused and
// general (twins, byte for byte) and against each packet in a burst of
// its own: a moved flow's miss and its later packets in the same burst all
// name the previous choice (FIN included); a SYN then an ACK of another
// moved flow in one burst name nothing; a kept flow names nothing.
func TestChanceProbeOneBurst(t *testing.T) {
	for _, kind := range []encap.Kind{encap.GRE, encap.GUE} {
		t.Run(kind.String(), func(t *testing.T) {
			tw := newTwin(t, testConfig)
			single := newRig(t, testConfig)
			a, b := pcSet(3, false), pcSet(4, false)
			steps := []pcStep{{0, a, 0}, {time.Hour, b, 0}}
			for _, r := range []*rig{tw.fast, tw.slow, single} {
				pcHistory(t, r, chanceVIP, kind, sched.Maglev, steps)
			}
			cur, prev := pcOracle(t, b), pcOracle(t, a)
			var moved, kept []uint16
			for port := uint16(37000); len(moved) < 3 || len(kept) < 1; port++ {
				if h := pcHash(single, pcClient, chanceVIP, port); cur(h).name != prev(h).name {
					moved = append(moved, port)
				} else {
					kept = append(kept, port)
				}
			}
			f := func(p uint16, fl string) []byte {
				return frame(t, pcClient, chanceVIP, p, 80, layers.IPProtocolTCP, fl, 12, true)
			}
			frames := [][]byte{f(moved[0], "A"), f(moved[0], "PA"), f(moved[1], "S"), f(moved[1], "A"), f(kept[0], "A"),
				f(moved[2], "PA"), f(moved[0], "FA"), f(moved[2], "A"), f(moved[0], "A")}
			wantCh := []bool{true, true, false, false, false, true, true, true, true}
			for round := range 2 { // all misses first, then all hits
				tw.burst(fmt.Sprintf("round %d", round), frames)
				tw.same(fmt.Sprintf("round %d", round))
				tw.fast.now += 10
				tw.slow.now += 10
				for i, fr := range frames {
					out, v := single.run(fr)
					if v[0] != Tx {
						t.Fatalf("verdict %v", v[0])
					}
					o := pcDecode(t, out[0])
					h := pcHash(single, pcClient, chanceVIP, binary.BigEndian.Uint16(fr[34:]))
					want := netip.Addr{}
					if wantCh[i] {
						want = pcAddr(prev(h))
					}
					if o.dst != pcAddr(cur(h)) || o.chance != want {
						t.Fatalf("round %d packet %d alone: to %v naming %v, want %v naming %v", round, i, o.dst, o.chance, pcAddr(cur(h)), want)
					}
				}
			}
			// The burst's frames equal the one-packet bursts' frames.
			pkts := make([]Pkt, len(frames))
			for i, fr := range frames {
				buf := make([]byte, headroom+len(fr)+64)
				copy(buf[headroom:], fr)
				pkts[i] = Pkt{Buf: buf, Off: headroom, Len: len(fr)}
			}
			tw.fast.now += 10
			tw.fast.w.Process(pkts, tw.fast.now)
			for i, fr := range frames {
				alone, _ := single.run(fr)
				if got := pkts[i].Buf[pkts[i].Off : pkts[i].Off+pkts[i].Len]; !bytes.Equal(got, alone[0]) {
					t.Fatalf("packet %d: in the burst % x\nalone % x", i, got, alone[0])
				}
			}
			if tw.fast.w.c.SecondChanceFlows != 2 || single.w.c.SecondChanceFlows != 2 {
				t.Errorf("SecondChanceFlows %d (burst) and %d (alone), want 2", tw.fast.w.c.SecondChanceFlows, single.w.c.SecondChanceFlows)
			}
		})
	}
}
