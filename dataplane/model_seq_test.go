package dataplane

// Model-based random sequences through the Worker: seeded bursts of 1..64
// packets mixing many flows, with control-plane snapshots and clock jumps
// between bursts, checked after each burst against a small reference model
// of what the README promises:
//
//  1. no packet is tunnelled unless its destination is a configured VIP
//     (port, or the fragment policy's VIP, or the quoted flow's VIP);
//  2. every tunnelled packet reaches a backend of that VIP that is in the
//     snapshot and not down, and a new flow (or a packet placed by the
//     table) one whose weight is above 0; the inner packet is the input
//     IP packet byte for byte;
//  3. a tracked flow keeps its backend while that backend stays in its VIP
//     and is not down (drained, weight changes, hash changes included);
//  4. conservation: rx = tx + drops + punts in the counters, per burst;
//  6. the fused path and the general path give the same bytes.
//
// (5, order within a flow, holds by construction in Process: verdicts and
// frames are positional.)

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

type msVIP struct {
	name  string
	addr  string
	port  uint16
	proto uint8
	sk    sched.Kind
	kind  encap.Kind
	nbe   int
	sc    bool
}

var msVIPs = []msVIP{
	{"web", "203.0.113.7", 80, 6, sched.Maglev, encap.GRE, 4, true},
	{"dns", "203.0.113.7", 53, 17, sched.Maglev, encap.GRE, 3, false},
	{"lc", "203.0.113.22", 80, 6, sched.LeastConn, encap.GRE, 3, false},
	{"rr", "203.0.113.22", 81, 6, sched.RoundRobin, encap.GUE, 3, false},
	{"udplc", "203.0.113.22", 53, 17, sched.LeastConn, encap.GRE, 3, false},
	{"web6", "2001:db8:ffff::7", 443, 6, sched.Maglev, encap.IPIP, 3, false},
	{"p2c6", "2001:db8:ffff::7", 444, 6, sched.P2C, encap.GRE, 3, false},
	{"any", "203.0.113.9", 0, 6, sched.Maglev, encap.GRE, 3, false},
	{"x443", "203.0.113.9", 443, 6, sched.PeakEWMA, encap.GRE, 2, false},
	{"anyu", "203.0.113.9", 0, 17, sched.Random, encap.GRE, 2, false},
}

func msAddr(vi, b int) netip.Addr {
	if b == 2 {
		return netip.MustParseAddr(fmt.Sprintf("2001:db8:%x::%x", 0x10+vi, b+1))
	}
	return netip.MustParseAddr(fmt.Sprintf("10.%d.0.%d", 10+vi, b+1))
}

// msBE is the control plane's decision for one backend.
type msBE struct {
	weight          int
	down, unhealthy bool
	removed         bool
	inc             int  // incarnation: a new id (re-added, or its VIP re-added)
	alt             bool // at its other address
}

type msRef struct{ vi, b int }

// msFlow is the model's knowledge of one client flow.
type msFlow struct {
	vi             int // the VIP it was made for (address, protocol)
	src            string
	sport, dport   uint16
	proto          uint8
	st             int // msNone, msTracked, msUnknown
	pinKnown       bool
	pin            msRef
	pinInc, pinVIP int
	tcp            conntrack.State
	reset          bool
	last           conntrack.Time
	lastFrame      []byte
	hist           []string
}

const (
	msNone = iota
	msTracked
	msUnknown
)

type msRun struct {
	t          *testing.T
	rng        *rand.Rand
	fast, slow *rig
	svc        *Services
	wall       time.Time
	gone       []bool
	extra      []bool
	hashAlt    bool
	be         map[msRef]*msBE
	flows      []*msFlow
	log        []string
	used       map[string]bool
	ev         uint64
	schedAlt   []bool // Maglev <-> the VIP's other scheduler
	encapAlt   []bool // GRE <-> GUE
}

func newMSRun(t *testing.T, seed uint64) *msRun {
	capacity := 16384
	if v, err := strconv.Atoi(os.Getenv("MS_CAP")); err == nil {
		capacity = v
	}
	cfg := configtest.New().
		Dataplane(`lb_ipv6 = "2001:db8:100::10"`, `next_hop_mac = "02:00:00:00:00:fe"`, "mtu = 1500").
		Section("conntrack", fmt.Sprintf("capacity = %d", capacity)).Web(1).String()
	m := &msRun{t: t, rng: rand.New(rand.NewPCG(seed, 431)), fast: newRig(t, cfg), slow: newRig(t, cfg)}
	m.slow.w.generalOnly = true
	m.fast.w.rng, m.slow.w.rng = sched.NewRand(seed), sched.NewRand(seed)
	m.wall = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m.gone = make([]bool, len(msVIPs))
	m.extra = make([]bool, len(msVIPs))
	m.schedAlt = make([]bool, len(msVIPs))
	m.encapAlt = make([]bool, len(msVIPs))
	m.be = map[msRef]*msBE{}
	m.used = map[string]bool{}
	if v, err := strconv.ParseUint(os.Getenv("MS_CLOCK"), 0, 32); err == nil {
		m.fast.now, m.slow.now = conntrack.Time(v), conntrack.Time(v)
	}
	for vi, v := range msVIPs {
		for b := 0; b <= v.nbe; b++ {
			m.be[msRef{vi, b}] = &msBE{weight: 1 + b%2}
		}
	}
	m.publish()
	return m
}

func (m *msRun) present(r msRef) bool {
	if m.gone[r.vi] || m.be[r].removed {
		return false
	}
	return r.b < msVIPs[r.vi].nbe || r.b == msVIPs[r.vi].nbe && m.extra[r.vi]
}

func (m *msRun) specs() []VIPSpec {
	var specs []VIPSpec
	for vi, v := range msVIPs {
		if m.gone[vi] {
			continue
		}
		a := netip.MustParseAddr(v.addr)
		s := VIPSpec{Key: flow.VIPKey{Addr: a, Port: v.port, Proto: v.proto}, Name: v.name, Addr: a, Port: v.port, Proto: v.proto,
			Encap: v.kind, Sched: m.sched(vi), TableSize: 509, Hash: flow.Fields{Mode: flow.FiveTuple}}
		if m.encapAlt[vi] {
			switch v.kind {
			case encap.GRE:
				s.Encap = encap.GUE
			case encap.GUE:
				s.Encap = encap.GRE
			}
		}
		if v.name == "web6" && m.hashAlt {
			s.Hash = flow.Fields{Mode: flow.ThreeTuple}
		}
		if v.sc {
			s.SecondChance = 5 * time.Minute
		}
		for b := 0; b <= v.nbe; b++ {
			r := msRef{vi, b}
			if !m.present(r) {
				continue
			}
			st := m.be[r]
			s.Backends = append(s.Backends, BackendSpec{Name: fmt.Sprintf("b%d", b+1), Addr: m.beAddr(r), Config: 1 + b%2,
				Eff: Effective{Weight: st.weight, Down: st.down, Unhealthy: st.unhealthy}})
		}
		specs = append(specs, s)
	}
	return specs
}

func (m *msRun) sched(vi int) sched.Kind {
	k := msVIPs[vi].sk
	if m.schedAlt[vi] {
		if k == sched.Maglev {
			return sched.LeastConn
		}
		return sched.Maglev
	}
	return k
}

func (m *msRun) beAddr(r msRef) netip.Addr {
	if m.be[r].alt {
		if r.b == 2 {
			return netip.MustParseAddr(fmt.Sprintf("2001:db8:%x:1::%x", 0x10+r.vi, r.b+1))
		}
		return netip.MustParseAddr(fmt.Sprintf("10.%d.1.%d", 10+r.vi, r.b+1))
	}
	return msAddr(r.vi, r.b)
}

func (m *msRun) publish() {
	m.t.Helper()
	s, err := NewServicesAt(m.svc, m.fast.enc, NextHop{MAC4: gwMAC, MAC6: gwMAC, Has4: true, Has6: true}, m.specs(), m.wall)
	if err != nil {
		m.t.Fatal(err)
	}
	m.svc = s
	m.fast.shared.Services.Store(s)
	m.slow.shared.Services.Store(s)
}

// event is one control-plane change or clock advance between bursts.
func (m *msRun) event() string {
	r := m.rng
	vi := r.IntN(len(msVIPs))
	v := msVIPs[vi]
	ref := msRef{vi, r.IntN(v.nbe + 1)}
	st := m.be[ref]
	name := fmt.Sprintf("%s/b%d", v.name, ref.b+1)
	m.wall = m.wall.Add(time.Duration(r.IntN(30)) * time.Second)
	var what string
	switch r.IntN(16) {
	case 13:
		if v.sc || v.name == "web6" {
			return "nothing"
		}
		m.schedAlt[vi] = !m.schedAlt[vi]
		what = fmt.Sprintf("scheduler %s %v", v.name, m.sched(vi))
	case 14:
		m.encapAlt[vi] = !m.encapAlt[vi]
		what = fmt.Sprintf("encap alt %s %v", v.name, m.encapAlt[vi])
	case 15:
		st.alt = !st.alt
		st.inc++ // another server under the same name
		what = fmt.Sprintf("readdress %s", name)
	case 0:
		st.weight, st.down, st.unhealthy = 0, false, false
		what = "drain " + name
	case 1:
		st.weight, st.down, st.unhealthy = 0, true, true
		what = "down " + name
	case 2:
		st.weight, st.down, st.unhealthy = 0, false, true
		what = "unhealthy(keep) " + name
	case 3:
		st.weight, st.down, st.unhealthy = 1+ref.b%2, false, false
		what = "restore " + name
	case 4:
		st.weight = 1 + r.IntN(4)
		st.down, st.unhealthy = false, false
		what = fmt.Sprintf("weight %s %d", name, st.weight)
	case 5:
		st.removed = !st.removed
		if !st.removed {
			st.inc++
		}
		what = fmt.Sprintf("removed %s=%v", name, st.removed)
	case 6:
		m.extra[vi] = !m.extra[vi]
		if m.extra[vi] {
			m.be[msRef{vi, v.nbe}].inc++
		}
		what = fmt.Sprintf("extra %s=%v", v.name, m.extra[vi])
	case 7:
		m.gone[vi] = !m.gone[vi]
		if !m.gone[vi] {
			for b := 0; b <= v.nbe; b++ {
				m.be[msRef{vi, b}].inc++
			}
		}
		what = fmt.Sprintf("vip %s gone=%v", v.name, m.gone[vi])
	case 8:
		m.hashAlt = !m.hashAlt
		what = fmt.Sprintf("web6 3-tuple=%v", m.hashAlt)
	case 9:
		n := m.svc.NumBackendIDs()
		l := &Loads{Active: make([]int64, n), Latency: make([]sched.EWMA, n)}
		for i := range l.Active {
			l.Active[i] = int64(r.IntN(20))
		}
		m.fast.shared.Loads.Store(l)
		m.slow.shared.Loads.Store(l)
		return "loads"
	case 10, 11:
		d := conntrack.Time(r.IntN(5000))
		m.fast.now += d
		m.slow.now += d
		return fmt.Sprintf("clock +%dms", d)
	default:
		d := conntrack.Time(r.IntN(400_000))
		m.fast.now += d
		m.slow.now += d
		return fmt.Sprintf("clock +%dms", d)
	}
	m.publish()
	return what
}

// ---- traffic ----

func (m *msRun) newFlow() *msFlow {
	r := m.rng
	vi := r.IntN(len(msVIPs))
	v := msVIPs[vi]
	var src string
	if netip.MustParseAddr(v.addr).Is6() {
		src = fmt.Sprintf("2001:db8:c%x::%x", r.IntN(4), 1+r.IntN(40))
	} else {
		src = fmt.Sprintf("198.51.100.%d", 1+r.IntN(40))
	}
	dp := v.port
	if dp == 0 {
		dp = uint16(1 + r.IntN(1000))
		if r.IntN(3) == 0 {
			dp = 443 // the exact-port VIP beside the every-port one
		}
	}
	f := &msFlow{vi: vi, src: src, sport: uint16(1024 + r.IntN(60000)), dport: dp, proto: v.proto}
	k := fmt.Sprintf("%s:%d", src, f.sport)
	if m.used[k] {
		return m.newFlow() // one model flow a tuple
	}
	m.used[k] = true
	m.flows = append(m.flows, f)
	if len(m.flows) > 300 {
		m.flows = m.flows[len(m.flows)-300:]
	}
	return f
}

func (m *msRun) oldFlow() *msFlow {
	if len(m.flows) == 0 || m.rng.IntN(8) == 0 {
		return m.newFlow()
	}
	return m.flows[m.rng.IntN(len(m.flows))]
}

// msPkt is one generated packet and what it means to the model.
type msPkt struct {
	b     []byte
	f     *msFlow // nil: not a flow packet
	kind  int
	flags uint8
	data  bool
	fport uint16 // first fragment's port (kFragFirst)
}

const (
	kSeg = iota
	kICMPErr
	kFragFirst
	kFragLater
	kJunk
	kEcho
)

func (m *msRun) seg(f *msFlow, flags string, payload int) msPkt {
	v := msVIPs[f.vi]
	var b []byte
	var fl uint8
	if f.proto == 17 {
		b = frame(m.t, f.src, v.addr, f.sport, f.dport, layers.IPProtocolUDP, "", payload, true)
	} else {
		b = frame(m.t, f.src, v.addr, f.sport, f.dport, layers.IPProtocolTCP, flags, payload, true)
		var ps packet.Parsed
		packet.Parse(b, &ps)
		fl = ps.TCPFlags
	}
	r := m.rng
	if f.proto == 6 && netip.MustParseAddr(v.addr).Is6() && r.IntN(6) == 0 {
		// a hop-by-hop options header before TCP
		hbh := []byte{6, 0, 1, 4, 0, 0, 0, 0}
		b = raw6(f.src, v.addr, 0, cat(hbh, tcpSeg(f.sport, f.dport, fl, payload)))
	}
	if r.IntN(4) == 0 { // Ethernet padding after the IP packet
		b = append(b, make([]byte, 1+r.IntN(20))...)
	}
	if r.IntN(8) == 0 { // an 802.1Q tag
		b = cat(b[:12], []byte{0x81, 0x00, 0, byte(r.IntN(3))}, b[12:])
	}
	f.lastFrame = b
	return msPkt{b: b, f: f, kind: kSeg, flags: fl, data: payload > 0}
}

func (m *msRun) icmpErr(f *msFlow) msPkt {
	v := msVIPs[f.vi]
	var l4 []byte
	if f.proto == 6 {
		l4 = tcpSeg(f.dport, f.sport, 0x10, 0)[:8]
	} else {
		l4 = udpDgram(f.dport, f.sport, 8, 0)
	}
	if netip.MustParseAddr(v.addr).Is4() {
		q := raw4(v.addr, f.src, f.proto, 1, 0x4000, l4)[14:]
		return msPkt{b: raw4("198.18.0.1", v.addr, 1, 2, 0, icmpMsg(3, 4, 1400, q)), f: f, kind: kICMPErr}
	}
	q := raw6(v.addr, f.src, f.proto, l4)[14:]
	return msPkt{b: raw6("2001:db8:99::1", v.addr, 58, icmpMsg(2, 0, 1280, q)), f: f, kind: kICMPErr}
}

func (m *msRun) frag(f *msFlow) msPkt {
	v := msVIPs[f.vi]
	first := m.rng.IntN(2) == 0
	var l4 []byte
	if first {
		if f.proto == 6 {
			l4 = tcpSeg(f.sport, f.dport, 0x10, 24)
		} else {
			l4 = udpDgram(f.sport, f.dport, 100, 24)
		}
	} else {
		l4 = make([]byte, 40)
	}
	if netip.MustParseAddr(v.addr).Is4() {
		if first {
			return msPkt{b: raw4(f.src, v.addr, f.proto, f.sport, 0x2000, l4), f: f, kind: kFragFirst, fport: f.dport}
		}
		return msPkt{b: raw4(f.src, v.addr, f.proto, f.sport, 3, l4), f: f, kind: kFragLater}
	}
	if first {
		return msPkt{b: raw6(f.src, v.addr, 44, cat(frag6(f.proto, 0, true, uint32(f.sport)), l4)), f: f, kind: kFragFirst, fport: f.dport}
	}
	return msPkt{b: raw6(f.src, v.addr, 44, cat(frag6(f.proto, 24, false, uint32(f.sport)), l4)), f: f, kind: kFragLater}
}

func (m *msRun) junk() msPkt {
	r := m.rng
	switch r.IntN(8) {
	case 0: // not a VIP
		return msPkt{b: frame(m.t, "198.51.100.9", "192.0.2.10", 5, 80, layers.IPProtocolTCP, "S", 0, true), kind: kJunk}
	case 1: // a VIP's address, no such port
		return msPkt{b: frame(m.t, "198.51.100.9", "203.0.113.7", 5, 8080, layers.IPProtocolTCP, "S", 0, true), kind: kJunk}
	case 2: // a VIP's address and port, the other protocol
		return msPkt{b: frame(m.t, "198.51.100.9", "203.0.113.22", 5, 81, layers.IPProtocolUDP, "", 10, true), kind: kJunk}
	case 3: // total length beyond the frame
		b := frame(m.t, "198.51.100.9", "203.0.113.7", 7, 80, layers.IPProtocolTCP, "A", 20, true)
		binary.BigEndian.PutUint16(b[16:], 200)
		return msPkt{b: fixIPv4Checksum(b), kind: kJunk}
	case 4: // martian source
		return msPkt{b: frame(m.t, "127.0.0.1", "203.0.113.22", 7, 80, layers.IPProtocolTCP, "S", 0, true), kind: kJunk}
	case 5: // truncated TCP
		b := frame(m.t, "198.51.100.9", "203.0.113.7", 7, 80, layers.IPProtocolTCP, "A", 0, true)
		b = b[:14+20+10]
		binary.BigEndian.PutUint16(b[16:], 30)
		return msPkt{b: fixIPv4Checksum(b), kind: kJunk}
	case 6: // ping a VIP
		return msPkt{b: raw4("198.51.100.33", "203.0.113.9", 1, 9, 0, icmpMsg(8, 0, 0x00010001, make([]byte, 16))), kind: kEcho}
	default: // IPv6 to a VIP address, no such port
		return msPkt{b: frame(m.t, "2001:db8:c1::5", "2001:db8:ffff::7", 5, 80, layers.IPProtocolTCP, "S", 0, true), kind: kJunk}
	}
}

func (m *msRun) packets(out []msPkt) []msPkt {
	r := m.rng
	switch n := r.IntN(100); {
	case n < 14:
		return append(out, m.seg(m.newFlow(), "S", 0))
	case n < 20:
		return append(out, m.seg(m.oldFlow(), "S", 0))
	case n < 44:
		return append(out, m.seg(m.oldFlow(), "A", r.IntN(3)*100))
	case n < 48:
		return append(out, m.seg(m.oldFlow(), "FA", 0))
	case n < 51:
		return append(out, m.seg(m.oldFlow(), "R", 0))
	case n < 53:
		return append(out, m.seg(m.oldFlow(), "RA", 0))
	case n < 55:
		return append(out, m.seg(m.oldFlow(), "SA", 0))
	case n < 60: // a whole connection, maybe reordered
		f := m.newFlow()
		ps := []msPkt{m.seg(f, "S", 0), m.seg(f, "A", 0), m.seg(f, "PA", 40), m.seg(f, "FA", 0), m.seg(f, "A", 0)}
		if r.IntN(3) == 0 {
			i := r.IntN(len(ps) - 1)
			ps[i], ps[i+1] = ps[i+1], ps[i]
		}
		return append(out, ps...)
	case n < 63: // a duplicate
		f := m.oldFlow()
		if prev := f.lastFrame; prev != nil {
			p := m.seg(f, "A", 0)
			f.lastFrame = prev
			var ps packet.Parsed
			packet.Parse(prev, &ps)
			p.b, p.flags, p.data = prev, ps.TCPFlags, hasData(&ps)
			return append(out, p, p)
		}
		return append(out, m.seg(f, "A", 0))
	case n < 68:
		return append(out, m.icmpErr(m.oldFlow()))
	case n < 72:
		return append(out, m.frag(m.oldFlow()))
	case n < 79:
		return append(out, m.junk())
	case n < 80:
		return append(out, m.seg(m.oldFlow(), "PA", 1480)) // too big for the tunnel
	default:
		return append(out, m.seg(m.oldFlow(), "PA", 10+r.IntN(200)))
	}
}

// ---- the model ----

// lookup is the VIP index a destination belongs to now, or -1.
func (m *msRun) lookup(addr string, port uint16, proto uint8) int {
	any := -1
	for vi, v := range msVIPs {
		if m.gone[vi] || v.addr != addr || v.proto != proto {
			continue
		}
		if v.port == port {
			return vi
		}
		if v.port == 0 {
			any = vi
		}
	}
	return any
}

// fragVIP is the fragment policy's VIP of an address and protocol.
func (m *msRun) fragVIP(addr string, proto uint8) int {
	best := -1
	for vi, v := range msVIPs {
		if m.gone[vi] || v.addr != addr || v.proto != proto {
			continue
		}
		if v.port == 0 {
			return vi
		}
		if best < 0 || v.port < msVIPs[best].port {
			best = vi
		}
	}
	return best
}

func (m *msRun) hasWeight(vi int) bool {
	for b := 0; b <= msVIPs[vi].nbe; b++ {
		if r := (msRef{vi, b}); m.present(r) && m.be[r].weight > 0 {
			return true
		}
	}
	return false
}

func msTimeout(f *msFlow) conntrack.Time {
	if f.proto != 6 {
		return 30_000
	}
	switch f.tcp {
	case conntrack.StateNew:
		return 10_000
	case conntrack.StateClosing:
		return 120_000
	}
	return 300_000
}

// age settles what the model knows of f's entry at now.
func (m *msRun) age(f *msFlow, now conntrack.Time) {
	switch f.st {
	case msTracked:
		a, to := now-f.last, msTimeout(f)
		switch {
		case a > to+2:
			f.st = msNone
		case a+2 >= to:
			f.st = msUnknown
		}
	case msUnknown:
		if now-f.last > 300_000+2 {
			f.st = msNone
		}
	}
}

func msTouch(st conntrack.State, reset bool, fl uint8, data bool) (conntrack.State, bool) {
	const syn, ack, fin, rst = packet.TCPSyn, packet.TCPAck, packet.TCPFin, packet.TCPRst
	if fl&syn != 0 && fl&(ack|fin|rst) != 0 {
		return st, reset
	}
	next := st.Next(fl)
	if next == conntrack.StateClosing || reset {
		switch {
		case st == conntrack.StateClosing && fl&(fin|rst|syn) == 0 && (data || reset):
			next = conntrack.StateEstablished
		case next == conntrack.StateClosing && fl&(fin|rst) == rst && (st != conntrack.StateClosing || reset):
			return next, true
		}
		reset = false
	}
	return next, reset
}

// expectation of one packet.
type msExp struct {
	vi       int  // VIP that must own the backend; -1: must not be tunnelled
	pin      bool // must go to want
	want     msRef
	newFlow  bool // must go to a backend with weight > 0
	learn    bool // the backend it reaches becomes the flow's pin
	unknown  bool // after it the flow's pin is unknown
	fromNone bool // the flow had no entry: a drop for want of a backend inserts none
	why      string
}

func (m *msRun) pinValid(f *msFlow, vi int) bool {
	if f.st != msTracked || !f.pinKnown || f.pinVIP != vi || !m.present(f.pin) {
		return false
	}
	return m.be[f.pin].inc == f.pinInc
}

// expect decides what the worker must do with p, and advances the model
// of p's flow as the worker's conntrack does (the learning of the backend
// waits for the output: apply).
func (m *msRun) expect(p *msPkt, now conntrack.Time) msExp {
	f := p.f
	if p.kind == kJunk || p.kind == kEcho {
		return msExp{vi: -1}
	}
	addr := msVIPs[f.vi].addr
	switch p.kind {
	case kFragFirst, kFragLater:
		vi := m.fragVIP(addr, f.proto)
		if vi >= 0 && p.kind == kFragFirst && m.lookup(addr, p.fport, f.proto) < 0 {
			vi = -1
		}
		return msExp{vi: vi, newFlow: true, why: "fragment"}
	case kICMPErr:
		vi := m.lookup(addr, f.dport, f.proto)
		if vi < 0 {
			return msExp{vi: -1}
		}
		m.age(f, now)
		switch {
		case f.st == msNone:
			return msExp{vi: vi, newFlow: true, why: "icmp untracked"}
		case f.st == msUnknown || !f.pinKnown:
			return msExp{vi: vi, why: "icmp unknown"}
		case m.pinValid(f, vi) && !m.be[f.pin].down:
			return msExp{vi: vi, pin: true, want: f.pin, why: "icmp to the pin"}
		}
		return msExp{vi: vi, newFlow: true, learn: true, why: "icmp moved"}
	}
	vi := m.lookup(addr, f.dport, f.proto)
	if vi < 0 {
		return msExp{vi: -1}
	}
	m.age(f, now)
	picker := m.sched(vi).IsPicker()
	if f.proto != 6 {
		switch {
		case f.st == msNone:
			f.st, f.last, f.pinKnown = msTracked, now, false
			return msExp{vi: vi, newFlow: true, learn: true, fromNone: true, why: "udp new"}
		case f.st == msUnknown || !f.pinKnown:
			f.last = now
			return msExp{vi: vi, why: "udp unknown"}
		case m.pinValid(f, vi) && !m.be[f.pin].down:
			f.last = now
			return msExp{vi: vi, pin: true, want: f.pin, why: "udp pinned"}
		}
		f.last = now
		return msExp{vi: vi, newFlow: true, learn: true, why: "udp moved"}
	}
	syn := p.flags&(packet.TCPSyn|packet.TCPAck) == packet.TCPSyn
	switch f.st {
	case msNone:
		f.st, f.last, f.pinKnown, f.reset = msTracked, now, false, false
		f.tcp = conntrack.Initial(6, p.flags)
		return msExp{vi: vi, newFlow: true, learn: true, fromNone: true, why: "tcp new"}
	case msUnknown:
		f.last = now
		return msExp{vi: vi, why: "tcp unknown"}
	}
	was, wasReset := f.tcp, f.reset
	live := was == conntrack.StateEstablished || was == conntrack.StateClosing && wasReset
	pv := m.pinValid(f, vi)
	var pb *msBE
	if pv {
		pb = m.be[f.pin]
	}
	f.last = now
	sc := msVIPs[vi].sc
	if syn && live && !f.pinKnown {
		f.st = msUnknown // kept or not: depends on the pin the model lost
		return msExp{vi: vi, why: "tcp unknown"}
	}
	if syn && live && pv && !pb.down && !pb.unhealthy {
		if sc {
			return msExp{vi: vi, why: "kept syn (second chance)"}
		}
		return msExp{vi: vi, pin: true, want: f.pin, why: "kept syn"}
	}
	f.tcp, f.reset = msTouch(was, wasReset, p.flags, p.data)
	if !f.pinKnown {
		return msExp{vi: vi, why: "tcp pin unknown"}
	}
	if syn {
		if picker && was == conntrack.StateNew && pv && !pb.down && !pb.unhealthy {
			return msExp{vi: vi, pin: true, want: f.pin, why: "syn retransmit"}
		}
		return msExp{vi: vi, newFlow: true, learn: true, why: "syn new connection"}
	}
	if sc && (was == conntrack.StateClosing || !pv || pb.down) {
		// closingChance / reopened / firstChance settle it
		return msExp{vi: vi, unknown: true, why: "second chance"}
	}
	if pv && !pb.down {
		return msExp{vi: vi, pin: true, want: f.pin, why: fmt.Sprintf("tracked (%v->%v)", was, f.tcp)}
	}
	return msExp{vi: vi, newFlow: true, learn: true, why: "moved"}
}

// ---- running ----

// outDst is the outer destination of a tunnelled frame.
func outDst(b []byte) (netip.Addr, bool) {
	if len(b) < 34 {
		return netip.Addr{}, false
	}
	switch binary.BigEndian.Uint16(b[12:]) {
	case 0x0800:
		return netip.AddrFrom4([4]byte(b[30:34])), true
	case 0x86dd:
		if len(b) < 54 {
			return netip.Addr{}, false
		}
		return netip.AddrFrom16([16]byte(b[38:54])), true
	}
	return netip.Addr{}, false
}

func msIP(fr []byte) []byte {
	var ps packet.Parsed
	if packet.Parse(fr, &ps) != packet.OK {
		return nil
	}
	return fr[ps.L3Off : int(ps.L3Off)+int(ps.IPLen)]
}

func (m *msRun) addrRef() map[netip.Addr]msRef {
	a := map[netip.Addr]msRef{}
	for vi, v := range msVIPs {
		for b := 0; b <= v.nbe; b++ {
			r := msRef{vi, b}
			if m.present(r) {
				a[m.beAddr(r)] = r
			}
		}
	}
	return a
}

func (m *msRun) step(step int) {
	t := m.t
	n := 1 + m.rng.IntN(MaxBurst)
	var ps []msPkt
	for len(ps) < n {
		ps = m.packets(ps)
	}
	if len(ps) > MaxBurst {
		ps = ps[:MaxBurst]
	}
	d := conntrack.Time(m.rng.IntN(200))
	m.fast.now += d
	m.slow.now = m.fast.now
	now := m.fast.now
	if ev := m.fast.w.ct.Evictions() + m.fast.w.ct.Counters().InsertFailed; ev != m.ev {
		// Entries were evicted: the model no longer knows which survive.
		m.ev = ev
		for _, f := range m.flows {
			if f.st == msTracked {
				f.st = msUnknown
			}
		}
	}
	frames := make([][]byte, len(ps))
	for i := range ps {
		frames[i] = ps[i].b
	}
	c0 := m.fast.w.c
	c0.VIPs, c0.Backends = append([]PacketBytes(nil), c0.VIPs...), append([]PacketBytes(nil), c0.Backends...)
	ev0 := m.ev
	sameBefore := reflect.DeepEqual(entries(m.fast.w.ct), entries(m.slow.w.ct)) && reflect.DeepEqual(m.fast.w.c, m.slow.w.c)
	out, verd := m.fast.runAtNow(frames...)
	evicting := m.fast.w.ct.Evictions()+m.fast.w.ct.Counters().InsertFailed != ev0
	gout, gverd := m.slow.runAtNow(frames...)
	fail := func(i int, format string, a ...any) {
		t.Helper()
		var desc string
		if i >= 0 {
			var q packet.Parsed
			packet.Parse(frames[i], &q)
			desc = fmt.Sprintf(" [packet %d of %d: %v:%d -> %v:%d/%d flags %02x frag %v]", i, len(frames),
				netip.AddrFrom16(q.Tuple.Src).Unmap(), q.Tuple.SrcPort, netip.AddrFrom16(q.Tuple.Dst).Unmap(), q.Tuple.DstPort, q.Proto, q.TCPFlags, q.Fragment)
		}
		if i >= 0 {
			var q packet.Parsed
			packet.Parse(frames[i], &q)
			m.fast.w.ct.ForEach(func(e *conntrack.Entry) {
				if k := e.Key(); k.SrcPort == q.Tuple.SrcPort && k.Src == q.Tuple.Src {
					desc += fmt.Sprintf("\n entry: state %v last %d (now %d) be %d", e.State(), e.LastSeen(), now, e.Backend())
				}
			})
			for j := range frames {
				var r packet.Parsed
				packet.Parse(frames[j], &r)
				if r.Tuple.SrcPort == q.Tuple.SrcPort && r.Tuple.Src == q.Tuple.Src {
					a, _ := outDst(out[j])
					desc += fmt.Sprintf("\n burst pkt %d: flags %02x frag %v proto %d verdict %v out %v", j, r.TCPFlags, r.Fragment, r.Proto, verd[j], a)
				}
			}
			if p := ps[i].f; p != nil {
				desc += fmt.Sprintf("\n model: st %d tcp %v reset %v last %d pinKnown %v pin %v\n hist: %v", p.st, p.tcp, p.reset, p.last, p.pinKnown, p.pin, p.hist)
			}
		}
		l := m.log
		if len(l) > 8 {
			l = l[len(l)-8:]
		}
		t.Fatalf("step %d: %s%s\nrecent: %v", step, fmt.Sprintf(format, a...), desc, l)
	}
	// 6: fused = general.
	for i := range frames {
		if (os.Getenv("MS_LOOSE") == "" || sameBefore) && (verd[i] != gverd[i] || verd[i] != Drop && !bytes.Equal(out[i], gout[i])) {
			fail(i, "fused and general paths differ: verdict %v/%v, outer %v / %v (state equal before the burst: %v)", verd[i], gverd[i], bdOuter(out[i]), bdOuter(gout[i]), sameBefore)
		}
	}
	if !reflect.DeepEqual(m.fast.w.c, m.slow.w.c) {
		if os.Getenv("MS_LOOSE") == "" {
			fail(-1, "counters differ:\n%s", counterDiff(&m.fast.w.c, &m.slow.w.c))
		}
	}
	// 4: conservation.
	c1 := &m.fast.w.c
	var nTx, nDrop, nPunt uint64
	for _, v := range verd {
		switch v {
		case Tx:
			nTx++
		case Drop:
			nDrop++
		case Punt:
			nPunt++
		}
	}
	fwd := c1.Encap[encap.Forward] - c0.Encap[encap.Forward]
	replies := c1.Encap[encap.ICMPReply] - c0.Encap[encap.ICMPReply] + c1.EchoReplies - c0.EchoReplies
	if c1.RxPackets-c0.RxPackets != uint64(len(frames)) || fwd+replies != nTx || c1.Dropped()-c0.Dropped() != nDrop || c1.Punted-c0.Punted != nPunt {
		fail(-1, "conservation: rx +%d of %d; tx %d = fwd %d + replies %d; drops %d = +%d; punts %d = +%d",
			c1.RxPackets-c0.RxPackets, len(frames), nTx, fwd, replies, nDrop, c1.Dropped()-c0.Dropped(), nPunt, c1.Punted-c0.Punted)
	}
	var vsum, bsum uint64
	for i := range c1.VIPs {
		vsum += c1.VIPs[i].Packets
		if i < len(c0.VIPs) && c0.VIPs[i].Gen == c1.VIPs[i].Gen {
			vsum -= c0.VIPs[i].Packets
		}
	}
	for i := range c1.Backends {
		bsum += c1.Backends[i].Packets
		if i < len(c0.Backends) && c0.Backends[i].Gen == c1.Backends[i].Gen {
			bsum -= c0.Backends[i].Packets
		}
	}
	if vsum != fwd || bsum != fwd {
		fail(-1, "forwarded %d, VIP counters +%d, backend counters +%d", fwd, vsum, bsum)
	}
	// 1-3: the model, packet by packet in order.
	refs := m.addrRef()
	for i := range ps {
		p := &ps[i]
		e := m.expect(p, now)
		if evicting && !e.fromNone {
			e.pin, e.newFlow = false, e.newFlow && p.kind >= kICMPErr && p.kind <= kFragLater && p.f.st == msNone
		}
		if p.f != nil {
			p.f.hist = append(p.f.hist, fmt.Sprintf("@%d k%d fl%02x %s v%d", now, p.kind, p.flags, e.why, verd[i]))
		}
		var dst netip.Addr
		tunnelled := false
		if verd[i] == Tx {
			a, ok := outDst(out[i])
			if !ok {
				fail(i, "unparseable output")
			}
			_, isBE := refs[a]
			if isBE {
				dst, tunnelled = a, true
			} else {
				// A reply to the client: to the packet's own source.
				var q packet.Parsed
				packet.Parse(frames[i], &q)
				if a != netip.AddrFrom16(q.Tuple.Src).Unmap() {
					fail(i, "sent to %v, neither a backend nor the client", a)
				}
			}
		}
		if verd[i] == Punt && p.kind != kJunk {
			fail(i, "VIP packet punted")
		}
		if !tunnelled {
			big := len(frames[i]) > 1400
			if f := p.f; f != nil && e.fromNone && verd[i] == Drop && !big {
				f.st = msNone // no backend: nothing inserted
			} else if f != nil && (e.learn || e.unknown) {
				f.pinKnown = false // selected (a too-big reply), unknown where; or no backend
			}
			if e.pin && verd[i] == Drop && !big {
				fail(i, "%s: dropped, want %s/b%d", e.why, msVIPs[e.want.vi].name, e.want.b+1)
			}
			continue
		}
		got := refs[dst]
		msStats[e.why]++
		if e.vi < 0 {
			fail(i, "open relay: tunnelled to %s/b%d, but no VIP takes it", msVIPs[got.vi].name, got.b+1)
		}
		if got.vi != e.vi {
			fail(i, "%s: tunnelled to %s/b%d, a backend of another VIP than %s", e.why, msVIPs[got.vi].name, got.b+1, msVIPs[e.vi].name)
		}
		if !m.present(got) || m.be[got].down {
			fail(i, "%s: tunnelled to %s/b%d, which is removed or down", e.why, msVIPs[got.vi].name, got.b+1)
		}
		if e.newFlow && m.be[got].weight == 0 {
			fail(i, "%s: new flow to %s/b%d, whose weight is 0", e.why, msVIPs[got.vi].name, got.b+1)
		}
		if e.pin && got != e.want {
			fail(i, "%s: tunnelled to %s/b%d, pinned to %s/b%d", e.why, msVIPs[got.vi].name, got.b+1, msVIPs[e.want.vi].name, e.want.b+1)
		}
		if ip := msIP(frames[i]); !bytes.HasSuffix(out[i], ip) {
			fail(i, "inner packet differs from the input")
		}
		if f := p.f; f != nil && e.learn && f.st == msTracked {
			f.pinKnown, f.pin, f.pinInc, f.pinVIP = true, got, m.be[got].inc, e.vi
		}
		if e.unknown && p.f != nil {
			p.f.pinKnown = false
		}
	}
}

func msRunSeed(t *testing.T, seed uint64, steps int) {
	m := newMSRun(t, seed)
	for s := 0; s < steps; s++ {
		if m.rng.IntN(5) == 0 {
			m.log = append(m.log, fmt.Sprintf("step %d: %s", s, m.event()))
		}
		m.step(s)
	}
}

var msStats = map[string]int{}

func TestModelSequences(t *testing.T) {
	defer func() { t.Logf("checked: %v", msStats) }()
	n := uint64(20)
	if v, err := strconv.Atoi(os.Getenv("MS_SEEDS")); err == nil {
		n = uint64(v)
	}
	for seed := uint64(1); seed <= n; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { msRunSeed(t, seed, 150) })
	}
}
