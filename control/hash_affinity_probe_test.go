package control

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/flow"
)

// Fleet probes of the per-VIP hash fields through the real control plane:
// two instances with the same configuration and backend health, one with
// a history of reloads that change the hash setting back and forth and of
// backends flapping, must send every new flow of a src-ip or src-ip-prefix
// VIP (IPv4 and IPv6 clients) to the same backend, with the same tunnel
// bytes; and fulcrumctl lookup must name the backend the worker uses.

// afVIPs writes three VIPs: "api" (IPv4, hash apiHash), "api6" (IPv6,
// hash api6Hash), "web" (IPv4, hash webHash); "" is the 5-tuple.
func afVIPs(apiHash, api6Hash, webHash string) string {
	line := func(h string) string {
		if h == "" {
			return ""
		}
		return h + "\n"
	}
	return `
[[vip]]
name = "api"
address = "203.0.113.8"
port = 443
encap = "gue"
` + line(apiHash) + `  [[vip.backend]]
  name = "a1"
  address = "10.0.2.1"
  [[vip.backend]]
  name = "a2"
  address = "10.0.2.2"
  weight = 3
  [[vip.backend]]
  name = "a3"
  address = "10.0.2.3"
  [[vip.backend]]
  name = "a4"
  address = "2001:db8:2::4"

[[vip]]
name = "api6"
address = "2001:db8:ffff::8"
port = 443
encap = "gue"
` + line(api6Hash) + `  [[vip.backend]]
  name = "s1"
  address = "2001:db8:3::1"
  [[vip.backend]]
  name = "s2"
  address = "2001:db8:3::2"
  [[vip.backend]]
  name = "s3"
  address = "10.0.3.3"
  weight = 2
  [[vip.backend]]
  name = "s4"
  address = "2001:db8:3::4"

[[vip]]
name = "web"
address = "203.0.113.7"
port = 80
` + line(webHash) + `  [[vip.backend]]
  name = "w1"
  address = "10.0.1.1"
  [[vip.backend]]
  name = "w2"
  address = "10.0.1.2"
  [[vip.backend]]
  name = "w3"
  address = "10.0.1.3"
`
}

// afWorker is a worker of our own reading an instance's published
// snapshots (the daemon's workers read them the same way), driven
// synchronously.
type afWorker struct {
	t   *testing.T
	w   *dataplane.Worker
	now conntrack.Time
}

func newAFWorker(t *testing.T, f *fixture) *afWorker {
	w, err := dataplane.NewWorker(1, f.shared, f.plane.Config().Conntrack, fixtureKey(t, f), [6]byte{2, 0, 0, 0, 0, 1})
	if err != nil {
		t.Fatal(err)
	}
	return &afWorker{t: t, w: w, now: 1000}
}

// run sends frames as bursts of at most 32 and returns each output frame
// (nil when not transmitted).
func (a *afWorker) run(frames [][]byte) [][]byte {
	var out [][]byte
	for len(frames) > 0 {
		n := min(len(frames), dataplane.MaxBurst)
		pkts := make([]dataplane.Pkt, n)
		for i, f := range frames[:n] {
			b := make([]byte, 128+len(f)+64)
			copy(b[128:], f)
			pkts[i] = dataplane.Pkt{Buf: b, Off: 128, Len: len(f)}
		}
		a.now += 10
		a.w.Process(pkts, a.now)
		for i := range pkts {
			if a.w.Verdicts[i] == dataplane.Tx {
				out = append(out, append([]byte(nil), pkts[i].Buf[pkts[i].Off:pkts[i].Off+pkts[i].Len]...))
			} else {
				out = append(out, nil)
			}
		}
		frames = frames[n:]
	}
	return out
}

// outerDst is a tunnelled frame's outer destination.
func outerDst(fr []byte) netip.Addr {
	switch {
	case len(fr) >= 34 && fr[12] == 0x08 && fr[13] == 0:
		return netip.AddrFrom4([4]byte(fr[30:34]))
	case len(fr) >= 54 && fr[12] == 0x86 && fr[13] == 0xdd:
		return netip.AddrFrom16([16]byte(fr[38:54]))
	}
	return netip.Addr{}
}

type afConn struct {
	src, dst     netip.Addr
	sport, dport uint16
}

func (c afConn) seg(t *testing.T, flags string) []byte {
	tcp := &layers.TCP{SrcPort: layers.TCPPort(c.sport), DstPort: layers.TCPPort(c.dport), Window: 100,
		SYN: strings.Contains(flags, "S"), ACK: strings.Contains(flags, "A"), FIN: strings.Contains(flags, "F")}
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 0xaa}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}}
	var ip gopacket.SerializableLayer
	if c.src.Is4() {
		eth.EthernetType = layers.EthernetTypeIPv4
		l := &layers.IPv4{Version: 4, IHL: 5, TTL: 60, Protocol: layers.IPProtocolTCP, Flags: layers.IPv4DontFragment, SrcIP: c.src.AsSlice(), DstIP: c.dst.AsSlice()}
		_ = tcp.SetNetworkLayerForChecksum(l)
		ip = l
	} else {
		eth.EthernetType = layers.EthernetTypeIPv6
		l := &layers.IPv6{Version: 6, HopLimit: 60, NextHeader: layers.IPProtocolTCP, SrcIP: c.src.AsSlice(), DstIP: c.dst.AsSlice()}
		_ = tcp.SetNetworkLayerForChecksum(l)
		ip = l
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, tcp, gopacket.Payload("hi")); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

func afSegs(t *testing.T, cs []afConn, flags string) [][]byte {
	out := make([][]byte, len(cs))
	for i, c := range cs {
		out[i] = c.seg(t, flags)
	}
	return out
}

// afConns: for each VIP of afVIPs, clients clients (IPv4 for api and
// web, IPv6 for api6, clients of one prefix share their /56 or /24 in
// pairs) with ports source ports each, from base.
func afConns(clients, ports int, base uint16) []afConn {
	var cs []afConn
	for c := 0; c < clients; c++ {
		s4 := netip.AddrFrom4([4]byte{198, 51, byte(c / 2), byte(1 + c)})
		s6 := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0xc0, byte(c / 2), 0, byte(c), 0, 0, 0, 0, 0, 0, byte(c >> 8), byte(c)})
		for p := 0; p < ports; p++ {
			sp := base + uint16(c*ports+p)
			cs = append(cs,
				afConn{s4, netip.MustParseAddr("203.0.113.8"), sp, 443},
				afConn{s6, netip.MustParseAddr("2001:db8:ffff::8"), sp, 443},
				afConn{s4, netip.MustParseAddr("203.0.113.7"), sp, 80})
		}
	}
	return cs
}

func TestAffinityFleetHistoryThroughPlane(t *testing.T) {
	final := fleetProbeBase(true, afVIPs(`hash = "src-ip"`, "hash = \"src-ip-prefix\"\nhash_prefix6 = 56", `hash = "3-tuple"`))
	other := []string{
		fleetProbeBase(true, afVIPs("", "", "")),
		fleetProbeBase(true, afVIPs(`hash = "3-tuple"`, `hash = "src-ip"`, `hash = "src-ip"`)),
		fleetProbeBase(true, afVIPs("hash = \"src-ip-prefix\"\nhash_prefix = 32", "hash = \"src-ip-prefix\"\nhash_prefix6 = 128", "")),
	}
	a := newFixture(t, final)
	a.allUp()
	b := newFixture(t, other[0])
	b.allUp()
	wb := newAFWorker(t, b)
	var closed []afConn
	traffic := func(step int) {
		cs := afConns(6, 2, uint16(2000+step*200))
		wb.run(afSegs(t, cs, "S"))
		wb.run(afSegs(t, cs, "A"))
		var fin []afConn
		for i := 0; i < len(cs); i += 2 {
			fin = append(fin, cs[i])
		}
		wb.run(afSegs(t, fin, "FA"))
		closed = append(closed, fin...)
	}
	traffic(0)
	steps := []func(){
		func() { b.apply(final); b.allUp() },
		func() { b.setHealthOf("api", "a2", false); b.setHealthOf("api6", "s1", false) },
		func() { b.apply(other[1]); b.allUp() },
		func() { b.setHealthOf("api", "a2", true); b.setHealthOf("api", "a3", false) },
		func() { b.apply(final); b.allUp() },
		func() {
			if err := b.plane.Drain("api", "a1"); err != nil {
				t.Fatal(err)
			}
		},
		func() { b.apply(other[2]); b.allUp() },
		func() { b.setHealthOf("api6", "s4", false); b.advance(time.Second); b.setHealthOf("api6", "s4", true) },
		func() {
			b.apply(final)
			b.allUp()
			if err := b.plane.Undrain("api", "a1"); err != nil {
				t.Fatal(err)
			}
		},
	}
	for i, s := range steps {
		s()
		b.advance(2 * time.Second)
		b.rebuild()
		traffic(i + 1)
	}
	a.advance(time.Minute)
	b.advance(time.Minute)
	a.rebuild()
	b.rebuild()
	sa, sb := a.shared.Services.Load(), b.shared.Services.Load()
	for _, n := range []string{"api", "api6", "web"} {
		for _, v := range sb.VIPs {
			if v != nil && v.Name == n && v.Hash != sa.LookupVIP(v.Addr, v.Port, v.Proto).Hash {
				t.Errorf("vip %s: hash %v on B, %v on A", n, v.Hash, sa.LookupVIP(v.Addr, v.Port, v.Proto).Hash)
			}
		}
	}
	wa := newAFWorker(t, a)
	probe := append(afConns(40, 3, 40000), closed...)
	oa := wa.run(afSegs(t, probe, "S"))
	ob := wb.run(afSegs(t, probe, "S"))
	differ := map[string]int{}
	for i, c := range probe {
		if oa[i] == nil || !bytes.Equal(oa[i], ob[i]) {
			kind := fmt.Sprintf("%v:%d", c.dst, c.dport)
			if i >= len(probe)-len(closed) {
				kind += " reused"
			}
			if differ[kind] == 0 {
				t.Errorf("%s: %v:%d -> fresh A %v, B with history %v", kind, c.src, c.sport, outerDst(oa[i]), outerDst(ob[i]))
			}
			differ[kind]++
		}
	}
	for k, n := range differ {
		t.Errorf("%s: %d flows differ between the instances", k, n)
	}
	// Source affinity holds on both: one client's three connections to
	// api share a backend.
	for i := 0; i+8 < 40*9; i += 9 {
		if outerDst(oa[i]) != outerDst(oa[i+3]) || outerDst(oa[i]) != outerDst(oa[i+6]) {
			t.Errorf("api client %v: connections on %v %v %v", probe[i].src, outerDst(oa[i]), outerDst(oa[i+3]), outerDst(oa[i+6]))
		}
	}
	// fulcrumctl lookup on B names what a fresh worker does, with the
	// hash of the VIP's setting.
	h := flow.NewHasher(fixtureKey(t, a))
	for i, c := range probe[:60] {
		res, err := b.plane.Lookup(c.src, c.dst, c.sport, c.dport, 6)
		if err != nil {
			t.Fatal(err)
		}
		v := sb.LookupVIP(c.dst, c.dport, 6)
		tu, _ := flow.TupleFrom(c.src, c.dst, c.sport, c.dport, 6)
		if want := fmt.Sprintf("%016x", h.HashFields(&tu, v.Hash)); res.Hash != want || res.HashFields != v.Hash.String() {
			t.Errorf("lookup %v: hash %s (%s), want %s (%v)", c, res.Hash, res.HashFields, want, v.Hash)
		}
		if res.Address != outerDst(oa[i]).String() {
			t.Errorf("lookup %v:%d -> %v:%d: %s %s (%s), the worker sent it to %v", c.src, c.sport, c.dst, c.dport, res.Reason, res.Address, res.Backend, outerDst(oa[i]))
		}
	}
}

// A reload that only changes a VIP's hash setting reaches the dataplane
// and the status, and keeps the VIP's table (slots) as it was.
func TestAffinityHashOnlyReloadPublished(t *testing.T) {
	f := newFixture(t, fleetProbeBase(false, afVIPs("", "", "")))
	before := f.shared.Services.Load()
	f.apply(fleetProbeBase(false, afVIPs(`hash = "src-ip"`, "hash = \"src-ip-prefix\"\nhash_prefix6 = 64", `hash = "3-tuple"`)))
	after := f.shared.Services.Load()
	want := map[string]flow.Fields{
		"api":  {Mode: flow.SrcIP},
		"api6": {Mode: flow.SrcIPPrefix, Prefix4: 24, Prefix6: 64},
		"web":  {Mode: flow.ThreeTuple},
	}
	for _, v := range after.VIPs {
		if v == nil {
			continue
		}
		if v.Hash != want[v.Name] {
			t.Errorf("vip %s: published hash %+v, want %+v", v.Name, v.Hash, want[v.Name])
		}
		old := before.LookupVIP(v.Addr, v.Port, v.Proto)
		for s := range v.Table.Size() {
			if after.Backends[v.Backends[v.Table.Slot(s)]].Addr != before.Backends[old.Backends[old.Table.Slot(s)]].Addr {
				t.Errorf("vip %s: slot %d changed with a hash-only reload", v.Name, s)
				break
			}
		}
	}
	for _, vs := range f.plane.Status(false).VIPs {
		if vs.Hash != want[vs.Name].String() {
			t.Errorf("status of %s: hash %q, want %q", vs.Name, vs.Hash, want[vs.Name].String())
		}
	}
}

// README "Passive health checks": "forged SYNs from random sources are
// spread by the keyed hash over every backend alike, so nobody stands out
// and nobody is ejected, at any rate. An attacker who knows
// dataplane.hash_key, or sits on the path and drops one backend's ACKs,
// can still single a backend out". Under src-ip (or src-ip-prefix) the
// hash no longer spreads what one source sends: forged SYNs from a single
// address, any ports, all land on one backend, without the key. Real
// traffic through a worker (80 clients a second completing handshakes,
// spread over 4 backends) plus 300 forged SYNs a second from one spoofed
// address, folded by the passive checks once a second for 30 s: under the
// 5-tuple nobody is ejected; under src-ip the forged address's backend
// must not be either, or an unkeyed attacker moves the affinity of every
// client on it.
func TestAffinityPassiveEjectionBySingleSpoofedSource(t *testing.T) {
	for _, hash := range []string{"", `hash = "src-ip"`, "hash = \"src-ip-prefix\""} {
		name := "5-tuple"
		if hash != "" {
			name = strings.Split(hash, `"`)[1]
		}
		t.Run(name, func(t *testing.T) {
			toml := passiveConfig
			if hash != "" {
				toml = strings.Replace(toml, "port = 80\n", "port = 80\n"+hash+"\n", 1)
			}
			f := newFixture(t, toml)
			w := newAFWorker(t, f)
			web := netip.MustParseAddr("203.0.113.7")
			spoofed := netip.MustParseAddr("192.0.2.200") // any address not the LB's or a martian
			if hash == "" {
				spoofed = netip.MustParseAddr("100.64.7.9")
			}
			// The victims: clients whose affinity is on the backend the
			// spoofed source's hash names.
			probe := w.run([][]byte{afConn{spoofed, web, 9, 80}.seg(t, "S")})
			target := outerDst(probe[0])
			var victims []afConn
			for c := 0; len(victims) < 5 && c < 250; c++ {
				v := afConn{netip.AddrFrom4([4]byte{198, 18, byte(c), 1}), web, 7000, 80}
				if d := outerDst(w.run([][]byte{v.seg(t, "S")})[0]); d == target {
					victims = append(victims, v)
				}
			}
			port := uint16(10000)
			movedSecs := 0
			var timeline []string
			for sec := 0; sec < 30; sec++ {
				var legit []afConn
				for c := 0; c < 80; c++ {
					legit = append(legit, afConn{netip.AddrFrom4([4]byte{198, 51, byte(c), byte(1 + sec)}), web, uint16(20000 + sec*100 + c), 80})
				}
				w.run(afSegs(t, legit, "S"))
				w.run(afSegs(t, legit, "A"))
				var forged [][]byte
				for i := 0; i < 300; i++ {
					port++
					forged = append(forged, afConn{spoofed, web, port, 80}.seg(t, "S"))
				}
				w.run(forged)
				f.advance(time.Second)
				f.plane.mu.Lock()
				if f.plane.foldSignals([]dataplane.Counters{*w.w.Local()}, f.plane.now()) {
					if err := f.plane.rebuildLocked(); err != nil {
						f.plane.mu.Unlock()
						t.Fatal(err)
					}
				}
				f.plane.mu.Unlock()
				// Where the victims' new connections go now.
				for _, v := range victims {
					v.sport = uint16(30000 + sec)
					if d := outerDst(w.run([][]byte{v.seg(t, "S")})[0]); d != target {
						movedSecs++
						break
					}
				}
				var ej []string
				for _, b := range f.plane.Status(false).VIPs[0].Backends {
					if b.Outlier {
						ej = append(ej, b.Name)
					}
				}
				timeline = append(timeline, strings.Join(ej, "+"))
			}
			out, n := ejections(f)
			t.Logf("%s: forged source first on %v; %d victims; outliers now %d, ejections %d; seconds in which the victims' affinity was moved: %d of 30; outliers by second %q", name, target, len(victims), out, n, movedSecs, timeline)
			if n != 0 {
				t.Errorf("%s: 300 forged SYNs a second from ONE spoofed address (no hash key) caused %d ejection(s); the victims' new connections left their backend in %d of 30 s", name, n, movedSecs)
			}
		})
	}
}
