package dataplane

// Differential probe: random bursts (1..MaxBurst packets) mixing every kind
// of traffic the dataplane meets, with snapshot swaps between bursts, run
// through a worker with the fused path and one with the general path only
// (same hash key, same snapshot object, same random source, same loads).
// After every burst the frames, verdicts, counters and conntrack tables
// must be equal.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/flow"
	"github.com/fulcrumlb/fulcrum/packet"
	"github.com/fulcrumlb/fulcrum/sched"
)

type bdVIP struct {
	name  string
	addr  string
	port  uint16
	proto uint8
	sk    sched.Kind
	hash  flow.Mode
	quic  bool
	kind  encap.Kind
	nbe   int
	sc    bool // second chance
}

var bdVIPs = []bdVIP{
	{"web", "203.0.113.7", 80, 6, sched.Maglev, flow.FiveTuple, false, encap.GRE, 4, true},
	{"web6", "2001:db8:ffff::7", 443, 6, sched.Maglev, flow.FiveTuple, false, encap.IPIP, 3, false},
	{"aff", "203.0.113.21", 80, 6, sched.Maglev, flow.SrcIP, false, encap.GUE, 3, true},
	{"lc", "203.0.113.22", 80, 6, sched.LeastConn, flow.FiveTuple, false, encap.GRE, 3, false},
	{"p2c", "203.0.113.22", 81, 6, sched.P2C, flow.FiveTuple, false, encap.GRE, 3, false},
	{"ewma", "203.0.113.22", 82, 6, sched.PeakEWMA, flow.FiveTuple, false, encap.GRE, 3, false},
	{"rr", "2001:db8:ffff::22", 83, 6, sched.RoundRobin, flow.FiveTuple, false, encap.IPIP, 3, false},
	{"rnd", "203.0.113.22", 84, 6, sched.Random, flow.FiveTuple, false, encap.GRE, 3, false},
	{"dns", "203.0.113.7", 53, 17, sched.Maglev, flow.SrcIP, false, encap.GRE, 3, false},
	{"udplc", "203.0.113.22", 53, 17, sched.LeastConn, flow.FiveTuple, false, encap.GRE, 3, false},
	{"quic", "203.0.113.11", 443, 17, sched.Maglev, flow.FiveTuple, true, encap.GUE, 3, false},
	{"any", "203.0.113.9", 0, 6, sched.Maglev, flow.FiveTuple, false, encap.GRE, 2, false},
}

// bdState is what the control plane decided between bursts.
type bdState struct {
	eff     map[string]Effective // "vip/be" -> effective
	removed map[string]bool      // "vip/be" not in the snapshot
	extra   map[string]bool      // vip -> an extra backend added
	hashAlt bool                 // aff hashes 3-tuple instead of src-ip
}

func bdBackendAddr(vi, b int) netip.Addr {
	if b == 2 { // one IPv6 outer per VIP
		return netip.MustParseAddr(fmt.Sprintf("2001:db8:%x::%x", 0x10+vi, b+1))
	}
	return netip.MustParseAddr(fmt.Sprintf("10.%d.0.%d", 10+vi, b+1))
}

func bdSpecs(st *bdState) []VIPSpec {
	var specs []VIPSpec
	for vi, v := range bdVIPs {
		a := netip.MustParseAddr(v.addr)
		s := VIPSpec{Key: flow.VIPKey{Addr: a, Port: v.port, Proto: v.proto}, Name: v.name, Addr: a, Port: v.port, Proto: v.proto,
			Encap: v.kind, Sched: v.sk, TableSize: 509, Hash: flow.Fields{Mode: v.hash}}
		if v.name == "aff" && st.hashAlt {
			s.Hash = flow.Fields{Mode: flow.ThreeTuple}
		}
		if v.sc {
			s.SecondChance = 5 * time.Minute
		}
		if v.quic {
			q := packet.QUICConfig{}.WithDefaults()
			s.QUIC = &q
		}
		n := v.nbe
		if st.extra[v.name] {
			n++
		}
		for b := 0; b < n; b++ {
			name := fmt.Sprintf("b%d", b+1)
			ref := v.name + "/" + name
			if st.removed[ref] {
				continue
			}
			eff, ok := st.eff[ref]
			if !ok {
				eff = Effective{Weight: 1 + b%2}
			}
			bs := BackendSpec{Name: name, Addr: bdBackendAddr(vi, b), Config: 1 + b%2, Eff: eff}
			if v.quic {
				bs.QUICID, bs.HasQUICID = uint64(b+1), true
			}
			s.Backends = append(s.Backends, bs)
		}
		specs = append(specs, s)
	}
	return specs
}

// bdFlow is one client flow of the probe.
type bdFlow struct {
	src   string
	sport uint16
	v     int // index in bdVIPs
	dport uint16
}

type bdGen struct {
	t     *testing.T
	rng   *rand.Rand
	flows []bdFlow
}

func (g *bdGen) newFlow() bdFlow {
	r := g.rng
	v := r.IntN(len(bdVIPs))
	var src string
	if netip.MustParseAddr(bdVIPs[v].addr).Is6() {
		src = fmt.Sprintf("2001:db8:c%x::%x", r.IntN(4), 1+r.IntN(40))
	} else {
		src = fmt.Sprintf("198.51.100.%d", 1+r.IntN(40))
	}
	dp := bdVIPs[v].port
	if dp == 0 {
		dp = uint16(1 + r.IntN(3000))
	}
	f := bdFlow{src: src, sport: uint16(1024 + r.IntN(60000)), v: v, dport: dp}
	g.flows = append(g.flows, f)
	if len(g.flows) > 400 {
		g.flows = g.flows[len(g.flows)-400:]
	}
	return f
}

func (g *bdGen) oldFlow() bdFlow {
	if len(g.flows) == 0 || g.rng.IntN(6) == 0 {
		return g.newFlow()
	}
	return g.flows[g.rng.IntN(len(g.flows))]
}

// seg is a packet of f with TCP flags (ignored for UDP) and payload.
func (g *bdGen) seg(f bdFlow, flags string, payload int) []byte {
	v := bdVIPs[f.v]
	if v.proto == 17 {
		if v.quic {
			return g.quicDatagram(f)
		}
		return frame(g.t, f.src, v.addr, f.sport, f.dport, layers.IPProtocolUDP, "", payload, true)
	}
	return frame(g.t, f.src, v.addr, f.sport, f.dport, layers.IPProtocolTCP, flags, payload, true)
}

func (g *bdGen) quicDatagram(f bdFlow) []byte {
	v := bdVIPs[f.v]
	var pl []byte
	switch g.rng.IntN(3) {
	case 0: // a client's Initial (version 1)
		pl = make([]byte, 1200)
		pl[0] = 0xc0
		binary.BigEndian.PutUint32(pl[1:], 1)
	case 1: // a short header naming a server id
		pl = quicShort(0, uint16(g.rng.IntN(5)), 20)
	default: // a handshake long header
		pl = []byte{0xe0, 0, 0, 0, 1, 8, 1, 2, 3, 4, 5, 6, 7, 8}
	}
	fr := frame(g.t, f.src, v.addr, f.sport, f.dport, layers.IPProtocolUDP, "", len(pl), true)
	copy(fr[len(fr)-len(pl):], pl)
	return fr
}

// icmpErr is an ICMP error from a router about a packet the backend sent
// from the VIP to f's client.
func (g *bdGen) icmpErr(f bdFlow) []byte {
	v := bdVIPs[f.v]
	a := netip.MustParseAddr(v.addr)
	var l4 []byte
	if v.proto == 6 {
		l4 = tcpSeg(f.dport, f.sport, 0x10, 0)[:8]
	} else {
		l4 = udpDgram(f.dport, f.sport, 8, 0)
	}
	if a.Is4() {
		q := raw4(v.addr, f.src, v.proto, 1, 0x4000, l4)[14:]
		return raw4("198.18.0.1", v.addr, 1, 2, 0, icmpMsg(3, 4, 1400, q))
	}
	q := raw6(v.addr, f.src, v.proto, l4)[14:]
	return raw6("2001:db8:99::1", v.addr, 58, icmpMsg(2, 0, 1280, q))
}

// frag is a fragment of one of f's packets (IPv4 VIPs only).
func (g *bdGen) frag(f bdFlow) []byte {
	v := bdVIPs[f.v]
	if netip.MustParseAddr(v.addr).Is6() {
		return g.seg(f, "A", 0)
	}
	if g.rng.IntN(2) == 0 {
		var l4 []byte
		if v.proto == 6 {
			l4 = tcpSeg(f.sport, f.dport, 0x10, 24)
		} else {
			l4 = udpDgram(f.sport, f.dport, 100, 24)
		}
		return raw4(f.src, v.addr, v.proto, uint16(f.sport), 0x2000, l4)
	}
	return raw4(f.src, v.addr, v.proto, uint16(f.sport), 3, make([]byte, 40))
}

func (g *bdGen) packet(out [][]byte) [][]byte {
	r := g.rng
	switch n := r.IntN(100); {
	case n < 12:
		return append(out, g.seg(g.newFlow(), "S", 0))
	case n < 17: // SYN retransmit / reuse
		return append(out, g.seg(g.oldFlow(), "S", 0))
	case n < 45:
		return append(out, g.seg(g.oldFlow(), "A", r.IntN(3)*100))
	case n < 50:
		return append(out, g.seg(g.oldFlow(), "FA", 0))
	case n < 53:
		return append(out, g.seg(g.oldFlow(), "R", 0))
	case n < 57: // data after FIN
		f := g.oldFlow()
		return append(out, g.seg(f, "FA", 0), g.seg(f, "PA", 50))
	case n < 62: // the same tuple several times
		f := g.oldFlow()
		return append(out, g.seg(f, "S", 0), g.seg(f, "PA", 20), g.seg(f, "R", 0), g.seg(f, "S", 0), g.seg(f, "A", 0))
	case n < 66:
		return append(out, g.seg(g.oldFlow(), "S", 0), g.seg(g.oldFlow(), "A", 0))
	case n < 70:
		return append(out, g.icmpErr(g.oldFlow()))
	case n < 74:
		return append(out, g.frag(g.oldFlow()))
	case n < 76: // martian source
		f := g.oldFlow()
		v := bdVIPs[f.v]
		if netip.MustParseAddr(v.addr).Is6() {
			return append(out, frame(g.t, "::1", v.addr, 1, f.dport, layers.IPProtocolTCP, "S", 0, true))
		}
		return append(out, frame(g.t, "127.0.0.1", v.addr, 1, f.dport, layers.IPProtocolTCP, "S", 0, true))
	case n < 78: // no VIP
		return append(out, frame(g.t, "198.51.100.9", "192.0.2.10", 5, 179, layers.IPProtocolTCP, "A", 0, true))
	case n < 80: // too big
		return append(out, g.seg(g.oldFlow(), "PA", 1480))
	default:
		return append(out, g.seg(g.oldFlow(), "PA", 10+r.IntN(200)))
	}
}

// bdTwin is the two workers and their shared control plane.
type bdTwin struct {
	t          *testing.T
	fast, slow *rig
	st         bdState
	svc        *Services
	wall       time.Time
}

func newBDTwin(t *testing.T, capacity int) *bdTwin {
	cfg := configtest.New().
		Dataplane(`lb_ipv6 = "2001:db8:100::10"`, `next_hop_mac = "02:00:00:00:00:fe"`, "mtu = 1500").
		Section("conntrack", fmt.Sprintf("capacity = %d", capacity)).Web(1).String()
	tw := &bdTwin{t: t, fast: newRig(t, cfg), slow: newRig(t, cfg)}
	tw.slow.w.generalOnly = true
	tw.fast.w.rng, tw.slow.w.rng = sched.NewRand(11), sched.NewRand(11)
	tw.st = bdState{eff: map[string]Effective{}, removed: map[string]bool{}, extra: map[string]bool{}}
	tw.wall = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tw.svc = nil
	tw.publish()
	return tw
}

func (tw *bdTwin) publish() {
	tw.t.Helper()
	s, err := NewServicesAt(tw.svc, tw.fast.enc, NextHop{MAC4: gwMAC, MAC6: gwMAC, Has4: true, Has6: true}, bdSpecs(&tw.st), tw.wall)
	if err != nil {
		tw.t.Fatal(err)
	}
	tw.svc = s
	tw.fast.shared.Services.Store(s)
	tw.slow.shared.Services.Store(s)
}

// event changes the control plane's decisions between bursts.
func (tw *bdTwin) event(r *rand.Rand) string {
	vi := r.IntN(len(bdVIPs))
	v := bdVIPs[vi]
	ref := fmt.Sprintf("%s/b%d", v.name, 1+r.IntN(v.nbe))
	tw.wall = tw.wall.Add(time.Duration(r.IntN(120)) * time.Second)
	var what string
	switch r.IntN(9) {
	case 0:
		tw.st.eff[ref] = Effective{Weight: 0}
		what = "drain " + ref
	case 1:
		tw.st.eff[ref] = Effective{Weight: 0, Down: true, Unhealthy: true}
		what = "down " + ref
	case 2:
		tw.st.eff[ref] = Effective{Weight: 1, Unhealthy: true}
		what = "unhealthy keep " + ref
	case 3:
		delete(tw.st.eff, ref)
		what = "restore " + ref
	case 4:
		tw.st.removed[ref] = !tw.st.removed[ref]
		what = fmt.Sprintf("removed %s=%v", ref, tw.st.removed[ref])
	case 5:
		tw.st.extra[v.name] = !tw.st.extra[v.name]
		what = fmt.Sprintf("extra %s=%v", v.name, tw.st.extra[v.name])
	case 6:
		tw.st.hashAlt = !tw.st.hashAlt
		what = fmt.Sprintf("aff hash alt=%v", tw.st.hashAlt)
	case 7:
		// Loads for the load-based schedulers, the same for both.
		n := tw.svc.NumBackendIDs()
		l := &Loads{Active: make([]int64, n), Latency: make([]sched.EWMA, n)}
		for i := range l.Active {
			l.Active[i] = int64(r.IntN(20))
		}
		tw.fast.shared.Loads.Store(l)
		tw.slow.shared.Loads.Store(l)
		return "loads"
	default:
		d := conntrack.Time(r.IntN(3)) * 60_000
		tw.fast.now += d
		tw.slow.now += d
		return fmt.Sprintf("clock +%d", d)
	}
	tw.publish()
	return what
}

// burst runs frames through both and returns the first difference.
func (tw *bdTwin) burst(frames [][]byte) (diff string) {
	return tw.burstMode(frames, true)
}

func (tw *bdTwin) burstMode(frames [][]byte, strict bool) (diff string) {
	out := [2][][]byte{}
	verd := [2][]Verdict{}
	for k, r := range []*rig{tw.fast, tw.slow} {
		if len(frames) == 0 {
			break // compare the state only
		}
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
			return fmt.Sprintf("packet %d of %d: verdict %v fused, %v general", i, len(frames), verd[0][i], verd[1][i])
		}
		if verd[0][i] != Drop && !bytes.Equal(out[0][i], out[1][i]) {
			var ps, q packet.Parsed
			packet.Parse(frames[i], &ps)
			same := ""
			for j := 0; j <= i; j++ {
				packet.Parse(frames[j], &q)
				if q.Tuple == ps.Tuple {
					same += fmt.Sprintf(" [%d fl %02x -> %s/%s]", j, q.TCPFlags, bdOuter(out[0][j]), bdOuter(out[1][j]))
				}
			}
			return fmt.Sprintf("packet %d of %d: frames differ (outer %s fused, %s general); its flow's packets in the burst:%s", i, len(frames), bdOuter(out[0][i]), bdOuter(out[1][i]), same)
		}
	}
	if !strict {
		return ""
	}
	a, b := &tw.fast.w.c, &tw.slow.w.c
	if !reflect.DeepEqual(a, b) {
		return fmt.Sprintf("counters differ:\nfused   %s\ngeneral %s\n%s", summary(a), summary(b), counterDiff(a, b))
	}
	if ca, cb := tw.fast.w.ct.Counters(), tw.slow.w.ct.Counters(); ca != cb {
		return fmt.Sprintf("conntrack counters differ:\nfused   %+v\ngeneral %+v\n%s", ca, cb, entryDiff(entries(tw.fast.w.ct), entries(tw.slow.w.ct)))
	}
	if ea, eb := entries(tw.fast.w.ct), entries(tw.slow.w.ct); !reflect.DeepEqual(ea, eb) {
		return fmt.Sprintf("conntrack tables differ: %d and %d entries\n%s", len(ea), len(eb), entryDiff(ea, eb))
	}
	return ""
}

func counterDiff(a, b *Counters) string {
	var s string
	va, vb := reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem()
	for i := 0; i < va.NumField(); i++ {
		if !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			s += fmt.Sprintf("  %s: %v vs %v\n", va.Type().Field(i).Name, va.Field(i).Interface(), vb.Field(i).Interface())
		}
	}
	return s
}

func entryDiff(a, b map[conntrack.Entry]int) string {
	var s string
	for e := range a {
		if _, ok := b[e]; !ok {
			k := e.Key()
			s += fmt.Sprintf("  only fused:   %v:%d->%v:%d/%d st %v be %d gen %d\n", netip.AddrFrom16(k.Src).Unmap(), k.SrcPort, netip.AddrFrom16(k.Dst).Unmap(), k.DstPort, k.Proto, e.State(), e.Backend(), e.Gen())
		}
	}
	for e := range b {
		if _, ok := a[e]; !ok {
			k := e.Key()
			s += fmt.Sprintf("  only general: %v:%d->%v:%d/%d st %v be %d gen %d\n", netip.AddrFrom16(k.Src).Unmap(), k.SrcPort, netip.AddrFrom16(k.Dst).Unmap(), k.DstPort, k.Proto, e.State(), e.Backend(), e.Gen())
		}
	}
	return s
}

func bdRun(t *testing.T, seed uint64, capacity, steps int) {
	bdRunMode(t, seed, capacity, steps, true)
}

func bdRunMode(t *testing.T, seed uint64, capacity, steps int, strict bool) {
	tw := newBDTwin(t, capacity)
	rng := rand.New(rand.NewPCG(seed, 40))
	g := &bdGen{t: t, rng: rng}
	var log []string
	for step := 0; step < steps; step++ {
		if rng.IntN(6) == 0 {
			log = append(log, fmt.Sprintf("step %d: %s", step, tw.event(rng)))
		}
		n := 1 + rng.IntN(MaxBurst)
		var frames [][]byte
		for len(frames) < n {
			frames = g.packet(frames)
		}
		if len(frames) > MaxBurst {
			frames = frames[:MaxBurst]
		}
		tw.fast.now += conntrack.Time(rng.IntN(200))
		tw.slow.now = tw.fast.now
		stateDiff := tw.burstMode(nil, true)
		if d := tw.burstMode(frames, strict); d != "" {
			t.Logf("state already differed before this burst: %q", stateDiff)
			if len(log) > 5 {
				log = log[len(log)-5:]
			}
			t.Fatalf("seed %d step %d: %s\nrecent events: %v", seed, step, d, log)
		}
	}
}

// TestBurstDiff: a table that never fills.
func TestBurstDiff(t *testing.T) {
	n := uint64(6)
	if v, err := strconv.Atoi(os.Getenv("BD_SEEDS")); err == nil {
		n = uint64(v)
	}
	for seed := uint64(1); seed <= n; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { bdRun(t, seed, 1<<14, 400) })
	}
}

func TestBurstDiffCoverage(t *testing.T) {
	tw := newBDTwin(t, 1<<14)
	rng := rand.New(rand.NewPCG(3, 40))
	g := &bdGen{t: t, rng: rng}
	fusedPk := 0
	for step := 0; step < 400; step++ {
		if rng.IntN(6) == 0 {
			tw.event(rng)
		}
		n := 1 + rng.IntN(MaxBurst)
		var frames [][]byte
		for len(frames) < n {
			frames = g.packet(frames)
		}
		if len(frames) > MaxBurst {
			frames = frames[:MaxBurst]
		}
		tw.fast.now += conntrack.Time(rng.IntN(200))
		tw.slow.now = tw.fast.now
		if d := tw.burst(frames); d != "" {
			t.Fatal(d)
		}
		if tw.fast.w.fastIdle == 0 && tw.fast.w.fastBackoff == 0 {
			fusedPk++
		}
	}
	c := &tw.fast.w.c
	ct := tw.fast.w.ct.Counters()
	t.Logf("bursts with fusion %d; %s; secondchance %d synkept %d quic %v; ct %+v", fusedPk, summary(c), c.SecondChance, c.SYNKept, c.QUIC, ct)
	if fusedPk < 100 || c.Moved == 0 || c.Fragments == 0 || c.ICMPErrors == 0 || c.SecondChance == 0 || c.SYNKept == 0 || c.QUIC[QUICRouted] == 0 || ct.Expired == 0 || ct.Reopened == 0 {
		t.Fatal("the probe's traffic missed a path")
	}
}

func bdOuter(b []byte) string {
	if len(b) < 14 {
		return "?"
	}
	switch binary.BigEndian.Uint16(b[12:]) {
	case 0x0800:
		return netip.AddrFrom4([4]byte(b[30:34])).String()
	case 0x86dd:
		return netip.AddrFrom16([16]byte(b[38:54])).String()
	}
	return "?"
}
