package dataplane

import (
	"bytes"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/flow"
	"github.com/fulcrumlb/fulcrum/internal/inetsum"
	"github.com/fulcrumlb/fulcrum/maglev"
	"github.com/fulcrumlb/fulcrum/sched"
)

var testConfig = configtest.New().
	Dataplane(`lb_ipv6 = "2001:db8:100::10"`, `next_hop_mac = "02:00:00:00:00:fe"`, "mtu = 1500").
	Section("conntrack", "capacity = 4096").
	Web(2).
	Backend("be3", "2001:db8:1::3").
	VIP("web6", "2001:db8:ffff::7", 443, `encap = "ipip"`).
	Backend("six1", "2001:db8:1::1").
	Backend("six2", "10.0.1.9").
	String()

var (
	clientMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xaa}
	portMAC   = [6]byte{0x02, 0, 0, 0, 0, 0x01}
	gwMAC     = [6]byte{0x02, 0, 0, 0, 0, 0xfe}
)

type rig struct {
	t      *testing.T
	cfg    *config.Config
	enc    *encap.Encapsulator
	shared *Shared
	w      *Worker
	key    flow.Key
	now    conntrack.Time
}

func newRig(t *testing.T, toml string) *rig {
	t.Helper()
	cfg, err := config.Parse([]byte(toml), "test.toml")
	if err != nil {
		t.Fatal(err)
	}
	enc, err := encap.New(encap.Config{SrcV4: cfg.Dataplane.LBIPv4.Addr, SrcV6: cfg.Dataplane.LBIPv6.Addr, MTU: cfg.Dataplane.MTU, DF: encap.DFSet})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, cfg: cfg, enc: enc, shared: &Shared{}}
	r.key, _ = flow.ParseKey(cfg.Dataplane.HashKey)
	r.publish(nil)
	ctc := conntrack.DefaultConfig()
	ctc.Capacity = cfg.Conntrack.Capacity
	r.w, err = NewWorker(0, r.shared, ctc, r.key, portMAC)
	if err != nil {
		t.Fatal(err)
	}
	r.now = 1000
	return r
}

func (r *rig) publish(over Overrides) *Services {
	r.t.Helper()
	s, err := servicesOf(r.cfg, r.enc, r.shared.Services.Load(), over, NextHop{MAC4: gwMAC, MAC6: gwMAC, Has4: true, Has6: true})
	if err != nil {
		r.t.Fatal(err)
	}
	r.shared.Services.Store(s)
	return s
}

// servicesOf is the snapshot of a test configuration. The daemon's mapping
// is control.BuildServices; the dataplane's tests cannot import control
// (it imports dataplane), so this is the same mapping for the few keys the
// tests use.
func servicesOf(cfg *config.Config, enc *encap.Encapsulator, prev *Services, over Overrides, nh NextHop) (*Services, error) {
	var specs []VIPSpec
	for _, cv := range cfg.VIPs {
		v := VIPSpec{Key: cv.Key(), Name: cv.Name, Addr: cv.Address.Addr, Port: uint16(cv.Port), Proto: cv.Proto(), Encap: *cv.Encap,
			Sched: cv.Scheduler, SchedOpt: cv.Options, TableSize: uint64(cv.TableSize), HealthTunnel: cv.Health.Kind != config.HealthNone && cv.Health.Tunnelled(), Hash: cv.HashFields()}
		if cv.QUIC {
			q := cv.QUICConfig
			v.QUIC = &q
		}
		for _, cb := range cv.Backends {
			eff, ok := over[BackendRef{cv.Name, cb.Name}]
			if !ok {
				eff = Effective{Weight: *cb.Weight}
			}
			bs := BackendSpec{Name: cb.Name, Addr: cb.Address.Addr, Config: *cb.Weight, Eff: eff}
			if cb.QUICID != nil {
				bs.QUICID, bs.HasQUICID = uint64(*cb.QUICID), true
			}
			v.Backends = append(v.Backends, bs)
		}
		specs = append(specs, v)
	}
	s, err := NewServices(prev, enc, nh, specs)
	if err == nil {
		s.SetPunt(cfg.Dataplane.Punt, nil)
	}
	return s, err
}

// frame builds a client packet with gopacket.
func frame(t *testing.T, src, dst string, sport, dport uint16, proto layers.IPProtocol, flags string, payload int, df bool) []byte {
	t.Helper()
	s, d := netip.MustParseAddr(src), netip.MustParseAddr(dst)
	var ls []gopacket.SerializableLayer
	var nl gopacket.NetworkLayer
	if s.Is4() {
		ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 60, Protocol: proto, SrcIP: s.AsSlice(), DstIP: d.AsSlice()}
		if df {
			ip.Flags = layers.IPv4DontFragment
		}
		ls = append(ls, &layers.Ethernet{SrcMAC: clientMAC, DstMAC: portMAC[:], EthernetType: layers.EthernetTypeIPv4}, ip)
		nl = ip
	} else {
		ip := &layers.IPv6{Version: 6, HopLimit: 60, NextHeader: proto, SrcIP: s.AsSlice(), DstIP: d.AsSlice()}
		ls = append(ls, &layers.Ethernet{SrcMAC: clientMAC, DstMAC: portMAC[:], EthernetType: layers.EthernetTypeIPv6}, ip)
		nl = ip
	}
	switch proto {
	case layers.IPProtocolTCP:
		tc := &layers.TCP{SrcPort: layers.TCPPort(sport), DstPort: layers.TCPPort(dport), SYN: strings.Contains(flags, "S"), ACK: strings.Contains(flags, "A"), FIN: strings.Contains(flags, "F"),
			RST: strings.Contains(flags, "R"), PSH: strings.Contains(flags, "P"), URG: strings.Contains(flags, "U"),
			ECE: strings.Contains(flags, "E"), CWR: strings.Contains(flags, "C"), Window: 100}
		_ = tc.SetNetworkLayerForChecksum(nl)
		ls = append(ls, tc)
	case layers.IPProtocolUDP:
		u := &layers.UDP{SrcPort: layers.UDPPort(sport), DstPort: layers.UDPPort(dport)}
		_ = u.SetNetworkLayerForChecksum(nl)
		ls = append(ls, u)
	}
	ls = append(ls, gopacket.Payload(bytes.Repeat([]byte{0xab}, payload)))
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

const headroom = 128

// run advances the clock by 10 ms and pushes frames through one Process
// call (runAtNow).
func (r *rig) run(frames ...[]byte) ([][]byte, []Verdict) {
	r.now += 10
	return r.runAtNow(frames...)
}

// runAtNow pushes frames through one Process call at r.now, with the capture
// hooks around it as the engine's loop runs them (they do nothing while
// no capture runs), and returns the output frames and verdicts.
func (r *rig) runAtNow(frames ...[]byte) ([][]byte, []Verdict) {
	pkts := make([]Pkt, len(frames))
	for i, f := range frames {
		b := make([]byte, headroom+len(f)+64)
		copy(b[headroom:], f)
		pkts[i] = Pkt{Buf: b, Off: headroom, Len: len(f)}
	}
	r.w.ProcessCaptured(pkts, r.now)
	out := make([][]byte, len(frames))
	v := make([]Verdict, len(frames))
	for i := range pkts {
		out[i] = pkts[i].Buf[pkts[i].Off : pkts[i].Off+pkts[i].Len]
		v[i] = r.w.Verdicts[i]
	}
	return out, v
}

// expectBackend is the spec: the VIP's Maglev table (built independently
// here from the config's backend set) at hash % M.
func (r *rig) expectBackend(vipName string, names map[string]int, src, dst string, sport, dport uint16, proto uint8) string {
	r.t.Helper()
	var mb []maglev.Backend
	for n, w := range names {
		mb = append(mb, maglev.Backend{Key: n, Weight: uint32(w)})
	}
	tb, err := maglev.Build(mb, maglev.DefaultSize)
	if err != nil {
		r.t.Fatal(err)
	}
	tp, _ := flow.TupleFrom(netip.MustParseAddr(src), netip.MustParseAddr(dst), sport, dport, proto)
	h := flow.NewHasher(r.key).Hash(&tp)
	return tb.Backend(tb.Lookup(h)).Key
}

// decodeTunnel decodes an encapsulated frame with gopacket and returns the
// outer destination and the inner IP packet.
func decodeTunnel(t *testing.T, b []byte) (outerDst netip.Addr, inner []byte, kind string) {
	t.Helper()
	return decodeTunnelFrom(t, b, portMAC)
}

func decodeTunnelFrom(t *testing.T, b []byte, portMAC [6]byte) (outerDst netip.Addr, inner []byte, kind string) {
	t.Helper()
	pk := gopacket.NewPacket(b, layers.LayerTypeEthernet, gopacket.Default)
	if el := pk.ErrorLayer(); el != nil {
		t.Fatalf("gopacket: %v", el.Error())
	}
	eth := pk.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	if !bytes.Equal(eth.DstMAC, gwMAC[:]) || !bytes.Equal(eth.SrcMAC, portMAC[:]) {
		t.Errorf("ethernet %v -> %v, want %v -> %v", eth.SrcMAC, eth.DstMAC, net.HardwareAddr(portMAC[:]), net.HardwareAddr(gwMAC[:]))
	}
	switch ip := pk.Layers()[1].(type) {
	case *layers.IPv4:
		outerDst, _ = netip.AddrFromSlice(ip.DstIP.To4())
		if ip.SrcIP.String() != "192.0.2.10" {
			t.Errorf("outer source %v", ip.SrcIP)
		}
		inner = ip.Payload
		kind = ip.Protocol.String()
	case *layers.IPv6:
		outerDst, _ = netip.AddrFromSlice(ip.DstIP)
		if ip.SrcIP.String() != "2001:db8:100::10" {
			t.Errorf("outer source %v", ip.SrcIP)
		}
		inner = ip.Payload
		kind = ip.NextHeader.String()
	default:
		t.Fatalf("no outer IP: %v", pk)
	}
	if kind == "GRE" {
		inner = inner[4:]
	}
	return outerDst, inner, kind
}

// ipPacket is the IP packet inside a client frame, without Ethernet
// padding, by the IP header's own length field.
func ipPacket(f []byte) []byte {
	if f[14]>>4 == 4 {
		return f[14 : 14+(int(f[16])<<8|int(f[17]))]
	}
	return f[14 : 14+40+(int(f[18])<<8|int(f[19]))]
}

func backendAddr(r *rig, vip, name string) netip.Addr {
	for _, v := range r.cfg.VIPs {
		if v.Name == vip {
			for _, b := range v.Backends {
				if b.Name == name {
					return b.Address.Addr
				}
			}
		}
	}
	r.t.Fatalf("no backend %s/%s", vip, name)
	return netip.Addr{}
}

func TestForwardToMaglevBackend(t *testing.T) {
	r := newRig(t, testConfig)
	web := map[string]int{"be1": 1, "be2": 1, "be3": 1}
	web6 := map[string]int{"six1": 1, "six2": 1}
	seen := map[string]int{}
	for i := 0; i < 200; i++ {
		sport := uint16(10000 + i)
		var f []byte
		var want netip.Addr
		if i%2 == 0 {
			f = frame(t, "198.51.100.10", "203.0.113.7", sport, 80, layers.IPProtocolTCP, "S", 0, true)
			name := r.expectBackend("web", web, "198.51.100.10", "203.0.113.7", sport, 80, 6)
			want = backendAddr(r, "web", name)
			seen[name]++
		} else {
			f = frame(t, "2001:db8:aaaa::1", "2001:db8:ffff::7", sport, 443, layers.IPProtocolTCP, "S", 10, false)
			name := r.expectBackend("web6", web6, "2001:db8:aaaa::1", "2001:db8:ffff::7", sport, 443, 6)
			want = backendAddr(r, "web6", name)
			seen[name]++
		}
		out, v := r.run(f)
		if v[0] != Tx {
			t.Fatalf("packet %d verdict %v; counters %+v", i, v[0], r.w.c.Drops)
		}
		dst, inner, _ := decodeTunnel(t, out[0])
		if dst != want {
			t.Errorf("packet %d to %v, want %v", i, dst, want)
		}
		if !bytes.Equal(inner, ipPacket(f)) {
			t.Errorf("packet %d: inner packet differs from the original IP packet", i)
		}
	}
	if len(seen) != 5 {
		t.Errorf("backends used: %v", seen)
	}
	if r.w.c.CTMisses != 200 || r.w.c.Encap[encap.Forward] != 200 {
		t.Errorf("misses %d forwards %d", r.w.c.CTMisses, r.w.c.Encap[encap.Forward])
	}
}

func TestStickinessAcrossTableSwap(t *testing.T) {
	r := newRig(t, testConfig)
	const n = 300
	first := make([]netip.Addr, n)
	for i := 0; i < n; i++ {
		out, v := r.run(frame(t, "198.51.100.20", "203.0.113.7", uint16(20000+i), 80, layers.IPProtocolTCP, "S", 0, true))
		if v[0] != Tx {
			t.Fatal("not forwarded")
		}
		first[i], _, _ = decodeTunnel(t, out[0])
	}
	// Drain be1 (weight 0): the table changes, pinned flows do not move,
	// and be1 keeps its established flows.
	r.publish(Overrides{{"web", "be1"}: {Weight: 0}})
	moved := 0
	for i := 0; i < n; i++ {
		out, _ := r.run(frame(t, "198.51.100.20", "203.0.113.7", uint16(20000+i), 80, layers.IPProtocolTCP, "A", 5, true))
		d, _, _ := decodeTunnel(t, out[0])
		if d != first[i] {
			moved++
		}
	}
	if moved != 0 {
		t.Errorf("%d of %d pinned flows moved across a table swap", moved, n)
	}
	// New flows never go to the drained backend.
	be1 := backendAddr(r, "web", "be1")
	for i := 0; i < n; i++ {
		out, _ := r.run(frame(t, "198.51.100.21", "203.0.113.7", uint16(30000+i), 80, layers.IPProtocolTCP, "S", 0, true))
		if d, _, _ := decodeTunnel(t, out[0]); d == be1 {
			t.Fatalf("new flow %d went to drained be1", i)
		}
	}
	// Remove be2 outright: its flows are re-selected (and counted), the
	// others stay.
	cfg2 := *r.cfg
	cfg2.VIPs = append([]config.VIP(nil), r.cfg.VIPs...)
	var kept []config.Backend
	for _, b := range cfg2.VIPs[0].Backends {
		if b.Name != "be2" {
			kept = append(kept, b)
		}
	}
	cfg2.VIPs[0].Backends = kept
	r.cfg = &cfg2
	r.publish(Overrides{{"web", "be1"}: {Weight: 0}})
	onBe2, moved := 0, 0
	for i := 0; i < n; i++ {
		out, _ := r.run(frame(t, "198.51.100.20", "203.0.113.7", uint16(20000+i), 80, layers.IPProtocolTCP, "A", 5, true))
		d, _, _ := decodeTunnel(t, out[0])
		if first[i] == netip.MustParseAddr("10.0.1.2") {
			onBe2++
			if d == first[i] {
				t.Errorf("flow %d still goes to removed be2", i)
			}
		} else if d != first[i] {
			moved++
		}
	}
	if moved != 0 {
		t.Errorf("%d flows on surviving backends moved", moved)
	}
	if r.w.c.Moved != uint64(onBe2) || onBe2 == 0 {
		t.Errorf("Moved counter %d, flows that were on be2 %d", r.w.c.Moved, onBe2)
	}
}

func TestVerdictsAndCounters(t *testing.T) {
	r := newRig(t, testConfig)
	arp := func() []byte {
		buf := gopacket.NewSerializeBuffer()
		_ = gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true},
			&layers.Ethernet{SrcMAC: clientMAC, DstMAC: layers.EthernetBroadcast, EthernetType: layers.EthernetTypeARP},
			&layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4, Operation: 1,
				SourceHwAddress: clientMAC, SourceProtAddress: []byte{192, 0, 2, 1}, DstHwAddress: make([]byte, 6), DstProtAddress: []byte{192, 0, 2, 10}})
		return buf.Bytes()
	}()
	frames := [][]byte{
		frame(t, "198.51.100.10", "203.0.113.7", 1, 80, layers.IPProtocolTCP, "S", 0, true), // tx
		frame(t, "198.51.100.10", "192.0.2.10", 1, 179, layers.IPProtocolTCP, "S", 0, true), // punt: the host (BGP)
		arp, // punt
		frame(t, "198.51.100.10", "203.0.113.7", 1, 81, layers.IPProtocolTCP, "S", 0, true),      // drop: no service
		frame(t, "198.51.100.10", "203.0.113.7", 1, 80, layers.IPProtocolUDP, "", 0, true),       // drop: no service (udp)
		frame(t, "198.51.100.10", "203.0.113.7", 1, 80, layers.IPProtocolTCP, "S", 0, true)[:30], // drop: parse
		frame(t, "198.51.100.10", "203.0.113.7", 2, 80, layers.IPProtocolTCP, "A", 1480, true),   // icmp reply: too big
		frame(t, "198.51.100.10", "203.0.113.7", 3, 80, layers.IPProtocolTCP, "A", 1480, false),  // drop: too big, no DF
	}
	_, v := r.run(frames...)
	want := []Verdict{Tx, Punt, Punt, Drop, Drop, Drop, Tx, Drop}
	for i := range want {
		if v[i] != want[i] {
			t.Errorf("packet %d: verdict %v, want %v", i, v[i], want[i])
		}
	}
	c := &r.w.c
	if c.Drops[DropNoService] != 2 || c.Parse[5] == 0 && sumParse(c) != 1 || c.Encap[encap.ICMPReply] != 1 || c.Encap[encap.DropTooBigNoDF] != 1 || c.Punted != 2 {
		t.Errorf("counters: drops %v parse %v encap %v punted %d", c.Drops, c.Parse, c.Encap, c.Punted)
	}
	// Every packet is accounted for exactly once.
	if got := c.Encap[encap.Forward] + c.Encap[encap.ICMPReply] + c.Punted + c.Dropped(); got != c.RxPackets {
		t.Errorf("forwarded+replied+punted+dropped = %d, received %d", got, c.RxPackets)
	}
}

func sumParse(c *Counters) uint64 {
	var n uint64
	for _, v := range c.Parse {
		n += v
	}
	return n
}

func TestNoNextHopDrops(t *testing.T) {
	r := newRig(t, testConfig)
	r.shared.Services.Store(r.shared.Services.Load().WithNextHop(NextHop{MAC6: gwMAC, Has6: true}))
	var v4, v6 int
	for i := 0; i < 50; i++ {
		_, v := r.run(frame(t, "198.51.100.10", "203.0.113.7", uint16(i), 80, layers.IPProtocolTCP, "S", 0, true))
		if v[0] == Tx {
			v6++
		} else {
			v4++
		}
	}
	if uint64(v4) != r.w.c.Drops[DropNoNextHop] || v4 == 0 || v6 == 0 {
		t.Errorf("dropped %d (counter %d), sent %d (to the IPv6 backend)", v4, r.w.c.Drops[DropNoNextHop], v6)
	}
}

func TestFragmentsFollowOneBackend(t *testing.T) {
	r := newRig(t, testConfig)
	mk := func(off uint16, more bool) []byte {
		ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 60, Protocol: layers.IPProtocolUDP, SrcIP: net.IP{198, 51, 100, 10}, DstIP: net.IP{203, 0, 113, 7}, FragOffset: off, Id: 77}
		if more {
			ip.Flags = layers.IPv4MoreFragments
		}
		buf := gopacket.NewSerializeBuffer()
		_ = gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
			&layers.Ethernet{SrcMAC: clientMAC, DstMAC: portMAC[:], EthernetType: layers.EthernetTypeIPv4}, ip, gopacket.Payload(make([]byte, 64)))
		return append([]byte(nil), buf.Bytes()...)
	}
	// The VIP is TCP: rewrite the protocol of the gopacket-built fragments.
	mkTCP := func(off uint16, more bool) []byte {
		f := mk(off, more)
		f[14+9] = 6
		if off == 0 {
			f[34+2], f[34+3] = 0, 80 // to the VIP's port: a first fragment to a port no VIP serves is no-service
			f[34+12] = 0x50          // a 20-byte TCP header starts the first fragment
			f[34+13] = 0x10          // ACK (no flags at all is a scan: bad-tcp-flags)
		}
		return fixIPv4Checksum(f)
	}
	out, v := r.run(mkTCP(0, true), mkTCP(8, true), mkTCP(16, false))
	var dsts []netip.Addr
	for i := range v {
		if v[i] != Tx {
			t.Fatalf("fragment %d verdict %v (drops %v parse %v)", i, v[i], r.w.c.Drops, r.w.c.Parse)
		}
		d, _, _ := decodeTunnel(t, out[i])
		dsts = append(dsts, d)
	}
	if dsts[0] != dsts[1] || dsts[1] != dsts[2] {
		t.Errorf("fragments went to %v", dsts)
	}
	if r.w.c.Fragments != 3 || r.w.ct.Len() != 0 {
		t.Errorf("fragments %d, conntrack entries %d (fragments are stateless)", r.w.c.Fragments, r.w.ct.Len())
	}
}

func fixIPv4Checksum(f []byte) []byte {
	h := f[14:34]
	h[10], h[11] = 0, 0
	var s uint32
	for i := 0; i < 20; i += 2 {
		s += uint32(h[i])<<8 | uint32(h[i+1])
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	cs := ^uint16(s)
	h[10], h[11] = byte(cs>>8), byte(cs)
	return f
}

func TestICMPErrorGoesToFlowOwner(t *testing.T) {
	r := newRig(t, testConfig)
	for i := 0; i < 40; i++ {
		sport := uint16(40000 + i)
		out, _ := r.run(frame(t, "198.51.100.10", "203.0.113.7", sport, 80, layers.IPProtocolTCP, "S", 0, true))
		owner, _, _ := decodeTunnel(t, out[0])
		// The backend's reply (DSR, from the VIP) hit a small MTU on the
		// way to the client; a router sends frag-needed to the VIP.
		reply := frame(t, "203.0.113.7", "198.51.100.10", 80, sport, layers.IPProtocolTCP, "SA", 0, true)[14:]
		buf := gopacket.NewSerializeBuffer()
		_ = gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
			&layers.Ethernet{SrcMAC: clientMAC, DstMAC: portMAC[:], EthernetType: layers.EthernetTypeIPv4},
			&layers.IPv4{Version: 4, IHL: 5, TTL: 60, Protocol: layers.IPProtocolICMPv4, SrcIP: net.IP{192, 0, 2, 99}, DstIP: net.IP{203, 0, 113, 7}},
			&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(3, 4), Seq: 1400}, gopacket.Payload(reply[:28]))
		out, v := r.run(buf.Bytes())
		if v[0] != Tx {
			t.Fatalf("icmp error verdict %v drops %v parse %v", v[0], r.w.c.Drops, r.w.c.Parse)
		}
		got, _, _ := decodeTunnel(t, out[0])
		if got != owner {
			t.Errorf("flow %d: ICMP error went to %v, the flow is on %v", i, got, owner)
		}
	}
	if r.w.c.ICMPErrors != 40 {
		t.Errorf("ICMPErrors %d", r.w.c.ICMPErrors)
	}
}

func TestProcessAllocatesNothing(t *testing.T) {
	r := newRig(t, testConfig)
	var frames [][]byte
	for i := 0; i < 32; i++ {
		frames = append(frames, frame(t, "198.51.100.10", "203.0.113.7", uint16(i), 80, layers.IPProtocolTCP, "S", 0, true))
	}
	pkts := make([]Pkt, len(frames))
	bufs := make([][]byte, len(frames))
	for i, f := range frames {
		bufs[i] = make([]byte, headroom+len(f))
	}
	reset := func() {
		for i, f := range frames {
			copy(bufs[i][headroom:], f)
			pkts[i] = Pkt{Buf: bufs[i], Off: headroom, Len: len(f)}
		}
	}
	allocs := testing.AllocsPerRun(200, func() {
		reset()
		r.now++
		r.w.Process(pkts, r.now)
	})
	if allocs != 0 {
		t.Fatalf("Process allocates %v times per burst", allocs)
	}
}

func TestSnapshot(t *testing.T) {
	r := newRig(t, testConfig)
	r.run(frame(t, "198.51.100.10", "203.0.113.7", 1, 80, layers.IPProtocolTCP, "S", 0, true))
	done := make(chan bool)
	var snap Counters
	go func() { done <- r.w.Snapshot(&snap, 5*time.Second) }()
	// The worker serves the request at its next burst or idle poll.
	deadline := time.Now().Add(5 * time.Second)
	for {
		r.w.Idle(r.now)
		select {
		case ok := <-done:
			if !ok {
				t.Fatal("snapshot timed out")
			}
			if snap.RxPackets != 1 || snap.Flows != 1 || snap.Backends[0].Packets+snap.Backends[1].Packets+snap.Backends[2].Packets != 1 {
				t.Errorf("snapshot rx %d flows %d", snap.RxPackets, snap.Flows)
			}
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no snapshot")
		}
	}
}

func TestDownBackendFlowsMoveOthersStay(t *testing.T) {
	r := newRig(t, testConfig)
	const n = 300
	first := make([]netip.Addr, n)
	for i := 0; i < n; i++ {
		out, _ := r.run(frame(t, "198.51.100.30", "203.0.113.7", uint16(5000+i), 80, layers.IPProtocolTCP, "S", 0, true))
		first[i], _, _ = decodeTunnel(t, out[0])
	}
	// be2 fails its health checks: weight 0 and down.
	r.publish(Overrides{{"web", "be2"}: {Weight: 0, Down: true}})
	be2 := backendAddr(r, "web", "be2")
	onBe2, stayed := 0, 0
	for i := 0; i < n; i++ {
		out, _ := r.run(frame(t, "198.51.100.30", "203.0.113.7", uint16(5000+i), 80, layers.IPProtocolTCP, "A", 0, true))
		d, _, _ := decodeTunnel(t, out[0])
		if d == be2 {
			t.Fatalf("flow %d still sent to the down backend", i)
		}
		if first[i] == be2 {
			onBe2++
		} else if d == first[i] {
			stayed++
		}
	}
	if stayed != n-onBe2 || r.w.c.Moved != uint64(onBe2) || onBe2 == 0 {
		t.Errorf("stayed %d of %d, moved counter %d, flows that were on be2 %d", stayed, n-onBe2, r.w.c.Moved, onBe2)
	}
}

func TestNoUsableBackend(t *testing.T) {
	r := newRig(t, testConfig)
	out, _ := r.run(frame(t, "198.51.100.31", "203.0.113.7", 7000, 80, layers.IPProtocolTCP, "S", 0, true))
	was, _, _ := decodeTunnel(t, out[0])
	// Every backend drained: no table, new flows dropped, the
	// established one keeps its backend.
	s := r.publish(Overrides{{"web", "be1"}: {}, {"web", "be2"}: {}, {"web", "be3"}: {}})
	if v := s.LookupVIP(netip.MustParseAddr("203.0.113.7"), 80, 6); v == nil || v.Table != nil {
		t.Fatalf("vip %+v: want a VIP without table", v)
	}
	_, v := r.run(frame(t, "198.51.100.31", "203.0.113.7", 7001, 80, layers.IPProtocolTCP, "S", 0, true))
	if v[0] != Drop || r.w.c.Drops[DropNoBackend] != 1 {
		t.Errorf("new flow: verdict %v, no-backend drops %d", v[0], r.w.c.Drops[DropNoBackend])
	}
	out, v = r.run(frame(t, "198.51.100.31", "203.0.113.7", 7000, 80, layers.IPProtocolTCP, "A", 0, true))
	if d, _, _ := decodeTunnel(t, out[0]); v[0] != Tx || d != was {
		t.Errorf("established flow: verdict %v to %v, want Tx to %v", v[0], d, was)
	}
}

// serve runs the worker's idle loop until op is done (the test is the lcore).
func serve(t *testing.T, r *rig, op *Op) {
	t.Helper()
	if err := r.w.Post(op); err != nil {
		t.Fatal(err)
	}
	for i := 0; !op.done.Load(); i++ {
		if i > 1_000_000 {
			t.Fatal("op did not finish")
		}
		r.w.Idle(r.now)
	}
}

func TestOps(t *testing.T) {
	r := newRig(t, testConfig)
	for i := 0; i < 100; i++ {
		r.run(frame(t, "198.51.100.40", "203.0.113.7", uint16(i+1), 80, layers.IPProtocolTCP, "S", 0, true))
		r.run(frame(t, "2001:db8:aaaa::1", "2001:db8:ffff::7", uint16(i+1), 443, layers.IPProtocolTCP, "S", 0, true))
	}
	svc := r.shared.Services.Load()
	count := CountFlowsOp()
	serve(t, r, count)
	web := svc.LookupVIP(netip.MustParseAddr("203.0.113.7"), 80, 6)
	web6 := svc.LookupVIP(netip.MustParseAddr("2001:db8:ffff::7"), 443, 6)
	sum := func(v *VIP) (n uint32) {
		for _, id := range v.Members {
			n += count.Flows[id]
		}
		return n
	}
	if sum(web) != 100 || sum(web6) != 100 {
		t.Fatalf("flows: web %d web6 %d, want 100 each", sum(web), sum(web6))
	}
	// Lookup names the pinned backend.
	tp, _ := flow.TupleFrom(netip.MustParseAddr("198.51.100.40"), netip.MustParseAddr("203.0.113.7"), 1, 80, 6)
	lk := LookupOp(tp)
	serve(t, r, lk)
	if !lk.Found || svc.Backends[lk.Backend].VIP != web.ID {
		t.Errorf("lookup: found %v backend %d", lk.Found, lk.Backend)
	}
	// Drop the web VIP's entries: web6's stay.
	drop := DropOp(conntrack.ByVIP(web.ID))
	serve(t, r, drop)
	count = CountFlowsOp()
	serve(t, r, count)
	if sum(web) != 0 || sum(web6) != 100 {
		t.Errorf("after drop: web %d web6 %d", sum(web), sum(web6))
	}
	if err := r.w.Post(CountFlowsOp()); err != nil {
		t.Fatal(err)
	}
	if err := r.w.Post(CountFlowsOp()); err != ErrBusy {
		t.Errorf("second post: %v, want ErrBusy", err)
	}
}

// TestHalfClosedFlowCount: a connection the client half-closed while the
// server still sends counts as a flow of its backend (what a drain waits
// for) while the client acknowledges, and stops counting once the client
// has been quiet for conntrack.HalfClosedIdle: its last ACK, of the
// server's FIN, looks like the others, and the entry would otherwise hold
// the count for the whole closing timeout (a lab drain waited on one such
// entry, left by a connection whose server retransmitted its FIN).
func TestHalfClosedFlowCount(t *testing.T) {
	r := newRig(t, testConfig)
	svc := r.shared.Services.Load()
	web := svc.LookupVIP(netip.MustParseAddr("203.0.113.7"), 80, 6)
	flows := func() (n uint32) {
		t.Helper()
		count := CountFlowsOp()
		serve(t, r, count)
		for _, id := range web.Members {
			n += count.Flows[id]
		}
		return n
	}
	seg := func(flags string) {
		t.Helper()
		if _, v := r.run(frame(t, "198.51.100.50", "203.0.113.7", 5000, 80, layers.IPProtocolTCP, flags, 0, true)); v[0] != Tx {
			t.Fatalf("%s: verdict %v", flags, v[0])
		}
	}
	seg("S")
	seg("A")
	seg("FA")
	seg("A")
	if n := flows(); n != 0 {
		t.Fatalf("FIN and one ACK (a close): %d flows, want 0", n)
	}
	seg("A")
	if n := flows(); n != 1 {
		t.Fatalf("FIN and two ACKs (half-closed, in use): %d flows, want 1", n)
	}
	r.now += conntrack.Time(conntrack.HalfClosedIdle/conntrack.Resolution) - 100
	if n := flows(); n != 1 {
		t.Fatalf("half-closed, quiet for under %v: %d flows, want 1", conntrack.HalfClosedIdle, n)
	}
	r.now += 100
	if n := flows(); n != 0 {
		t.Fatalf("half-closed, quiet for %v: %d flows, want 0", conntrack.HalfClosedIdle, n)
	}
	seg("A")
	if n := flows(); n != 1 {
		t.Fatalf("half-closed, acknowledging again: %d flows, want 1", n)
	}
}

// A SYN reusing the 5-tuple of a flow that ended takes the current table's
// choice, not the old pin (here: the old backend was drained meanwhile).
func TestReusedTupleAfterCloseFollowsTheTable(t *testing.T) {
	r := newRig(t, testConfig)
	var sport uint16
	var first netip.Addr
	be1 := backendAddr(r, "web", "be1")
	for p := uint16(100); p < 1000; p++ {
		out, _ := r.run(frame(t, "198.51.100.50", "203.0.113.7", p, 80, layers.IPProtocolTCP, "S", 0, true))
		if d, _, _ := decodeTunnel(t, out[0]); d == be1 {
			sport, first = p, d
			break
		}
	}
	if sport == 0 {
		t.Fatal("no flow landed on be1")
	}
	r.run(frame(t, "198.51.100.50", "203.0.113.7", sport, 80, layers.IPProtocolTCP, "A", 0, true))
	r.run(frame(t, "198.51.100.50", "203.0.113.7", sport, 80, layers.IPProtocolTCP, "FA", 0, true))
	r.publish(Overrides{{"web", "be1"}: {Weight: 0}}) // drained: established flows stay, new ones go elsewhere
	// Mid-stream packets of the old connection still go to be1...
	out, _ := r.run(frame(t, "198.51.100.50", "203.0.113.7", sport, 80, layers.IPProtocolTCP, "A", 0, true))
	if d, _, _ := decodeTunnel(t, out[0]); d != first {
		t.Fatalf("closing flow moved to %v", d)
	}
	// ...but a new SYN on the same tuple is a new connection.
	out, _ = r.run(frame(t, "198.51.100.50", "203.0.113.7", sport, 80, layers.IPProtocolTCP, "S", 0, true))
	if d, _, _ := decodeTunnel(t, out[0]); d == be1 {
		t.Errorf("a new connection on a reused tuple went to the drained backend")
	}
}

func TestHandshakeSignals(t *testing.T) {
	r := newRig(t, testConfig)
	sum := func() (p PacketBytes) {
		for _, b := range r.w.c.Backends {
			p.SYNs += b.SYNs
			p.Established += b.Established
			p.SYNRetrans += b.SYNRetrans
			p.HandshakeMs += b.HandshakeMs
		}
		return p
	}
	// Flow 1 completes its handshake 30 ms after the SYN.
	r.run(frame(t, "198.51.100.60", "203.0.113.7", 1, 80, layers.IPProtocolTCP, "S", 0, true))
	r.now += 20 // run adds 10 more
	r.run(frame(t, "198.51.100.60", "203.0.113.7", 1, 80, layers.IPProtocolTCP, "A", 0, true))
	// Flow 2's SYN goes unanswered: the client sends it again.
	r.run(frame(t, "198.51.100.60", "203.0.113.7", 2, 80, layers.IPProtocolTCP, "S", 0, true))
	r.run(frame(t, "198.51.100.60", "203.0.113.7", 2, 80, layers.IPProtocolTCP, "S", 0, true))
	s := sum()
	if s.SYNs != 2 || s.Established != 1 || s.SYNRetrans != 1 || s.HandshakeMs != 30 {
		t.Errorf("signals %+v; want 2 SYNs, 1 established after 30 ms, 1 retransmission", s)
	}
	var snap Counters
	go r.w.Snapshot(&snap, time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for snap.Flows == 0 && time.Now().Before(deadline) {
		r.w.Idle(r.now)
		time.Sleep(time.Millisecond)
	}
	var active int64
	for _, b := range snap.Backends {
		active += b.Active
	}
	if active != 2 {
		t.Errorf("active flows %d, want 2", active)
	}
}

func TestSchedulersOtherThanMaglev(t *testing.T) {
	cfg := strings.Replace(testConfig, `name = "web"
address = "203.0.113.7"
port = 80`, `name = "web"
address = "203.0.113.7"
port = 80
scheduler = "least-conn"`, 1)
	r := newRig(t, cfg)
	svc := r.shared.Services.Load()
	v := svc.LookupVIP(netip.MustParseAddr("203.0.113.7"), 80, 6)
	if v.Sched.String() != "least-conn" {
		t.Fatalf("scheduler %v", v.Sched)
	}
	// The control plane says be1 and be3 already hold 100 flows each.
	loads := &Loads{Active: make([]int64, len(svc.Backends)), Latency: make([]sched.EWMA, len(svc.Backends))}
	for _, id := range v.Members {
		if svc.Backends[id].Name != "be2" {
			loads.Active[id] = 100
		}
	}
	r.shared.Loads.Store(loads)
	be2 := backendAddr(r, "web", "be2")
	for i := 0; i < 60; i++ {
		out, _ := r.run(frame(t, "198.51.100.70", "203.0.113.7", uint16(100+i), 80, layers.IPProtocolTCP, "S", 0, true))
		if d, _, _ := decodeTunnel(t, out[0]); d != be2 {
			t.Fatalf("flow %d went to %v, the least loaded is be2", i, d)
		}
	}
	// The choice is pinned: the same flow stays where it went even when
	// another backend becomes the least loaded.
	for _, id := range v.Members {
		loads.Active[id] = 0
	}
	r.shared.Loads.Store(&Loads{Active: make([]int64, len(svc.Backends)), Latency: make([]sched.EWMA, len(svc.Backends))})
	out, _ := r.run(frame(t, "198.51.100.70", "203.0.113.7", 100, 80, layers.IPProtocolTCP, "A", 0, true))
	if d, _, _ := decodeTunnel(t, out[0]); d != be2 {
		t.Errorf("a pinned flow moved to %v", d)
	}
	// A drained backend is never picked.
	r.publish(Overrides{{"web", "be2"}: {Weight: 0}})
	for i := 0; i < 60; i++ {
		out, _ := r.run(frame(t, "198.51.100.71", "203.0.113.7", uint16(100+i), 80, layers.IPProtocolTCP, "S", 0, true))
		if d, _, _ := decodeTunnel(t, out[0]); d == be2 {
			t.Fatal("a new flow went to the drained backend")
		}
	}
}

// Too-big replies are rate-limited per lcore: a flood of big DF packets
// gets ICMPBurst answers at once and then ICMPRate per second.
func TestICMPRepliesAreRateLimited(t *testing.T) {
	r := newRig(t, testConfig)
	big := frame(t, "198.51.100.10", "203.0.113.7", 2, 80, layers.IPProtocolTCP, "A", 1480, true)
	var frames [][]byte
	for i := 0; i < 32; i++ {
		frames = append(frames, big)
	}
	for i := 0; i < 3; i++ {
		r.run(frames...) // the clock moves 10 ms per run: 10 more tokens
	}
	c := &r.w.c
	want := uint64(ICMPBurst + 2*10)
	if got := c.Encap[encap.ICMPReply]; got != want {
		t.Errorf("%d ICMP replies to 96 big packets, want %d", got, want)
	}
	if c.Drops[DropICMPRateLimited] != 96-want {
		t.Errorf("rate-limited %d, want %d", c.Drops[DropICMPRateLimited], 96-want)
	}
	if got := c.Encap[encap.ICMPReply] + c.Dropped(); got != c.RxPackets {
		t.Errorf("replies + drops = %d, received %d", got, c.RxPackets)
	}
}

// A ping to a VIP is answered by the LB: addresses swapped, type changed,
// checksums right (recomputed independently by gopacket).
func TestEchoToVIPIsAnswered(t *testing.T) {
	r := newRig(t, testConfig)
	for _, tc := range []struct{ client, vip string }{{"198.51.100.10", "203.0.113.7"}, {"2001:db8:aaaa::1", "2001:db8:ffff::7"}} {
		c, v := netip.MustParseAddr(tc.client), netip.MustParseAddr(tc.vip)
		var ls []gopacket.SerializableLayer
		if c.Is4() {
			ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 50, Protocol: layers.IPProtocolICMPv4, SrcIP: c.AsSlice(), DstIP: v.AsSlice()}
			ls = []gopacket.SerializableLayer{&layers.Ethernet{SrcMAC: clientMAC, DstMAC: portMAC[:], EthernetType: layers.EthernetTypeIPv4}, ip,
				&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(8, 0), Id: 7, Seq: 3}, gopacket.Payload("ping!")}
		} else {
			ip := &layers.IPv6{Version: 6, HopLimit: 50, NextHeader: layers.IPProtocolICMPv6, SrcIP: c.AsSlice(), DstIP: v.AsSlice()}
			ic := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(128, 0)}
			ic.SetNetworkLayerForChecksum(ip)
			ls = []gopacket.SerializableLayer{&layers.Ethernet{SrcMAC: clientMAC, DstMAC: portMAC[:], EthernetType: layers.EthernetTypeIPv6}, ip,
				ic, &layers.ICMPv6Echo{Identifier: 7, SeqNumber: 3}, gopacket.Payload("ping!")}
		}
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
			t.Fatal(err)
		}
		out, verdict := r.run(buf.Bytes())
		if verdict[0] != Tx {
			t.Fatalf("%s: verdict %v", tc.vip, verdict[0])
		}
		pk := gopacket.NewPacket(out[0], layers.LayerTypeEthernet, gopacket.Default)
		eth := pk.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
		if !bytes.Equal(eth.DstMAC, clientMAC) || !bytes.Equal(eth.SrcMAC, portMAC[:]) {
			t.Errorf("%s: ethernet %v -> %v", tc.vip, eth.SrcMAC, eth.DstMAC)
		}
		src, dst := pk.NetworkLayer().NetworkFlow().Endpoints()
		if src.String() != tc.vip || dst.String() != tc.client {
			t.Errorf("reply %v -> %v", src, dst)
		}
		// The checksums must verify: a full ones'-complement sum over the
		// IPv4 header, and over the ICMP message (with the IPv6
		// pseudo-header for ICMPv6), folds to 0xffff.
		l3 := out[0][14:]
		if c.Is4() {
			if got := inetsum.Fold(inetsum.Add(0, l3[:20])); got != 0xffff {
				t.Errorf("IPv4 header checksum does not verify (%#x)", got)
			}
			if got := inetsum.Fold(inetsum.Add(0, l3[20:])); got != 0xffff {
				t.Errorf("ICMP checksum does not verify (%#x)", got)
			}
		} else {
			msg := l3[40:]
			sum := inetsum.Add(0, l3[8:40]) + uint64(len(msg)) + 58
			if got := inetsum.Fold(inetsum.Add(sum, msg)); got != 0xffff {
				t.Errorf("ICMPv6 checksum does not verify (%#x)", got)
			}
		}
		if c.Is4() {
			if ic := pk.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4); ic.TypeCode.Type() != 0 || ic.Id != 7 {
				t.Errorf("icmp %v", ic.TypeCode)
			}
		} else if ic := pk.Layer(layers.LayerTypeICMPv6).(*layers.ICMPv6); ic.TypeCode.Type() != 129 {
			t.Errorf("icmpv6 %v", ic.TypeCode)
		}
	}
	if r.w.c.EchoReplies != 2 {
		t.Errorf("echo replies %d", r.w.c.EchoReplies)
	}
}

// TestSnapshotCarriesEncapAndNextHop: the worker writes what the snapshot
// it loaded says (the encapsulator's TTL, the next hop's MAC), so the next
// burst after one store uses a new snapshot's tunnel settings and gateway
// together.
func TestSnapshotCarriesEncapAndNextHop(t *testing.T) {
	r := newRig(t, testConfig)
	f := frame(t, "198.51.100.10", "203.0.113.7", 1234, 80, layers.IPProtocolTCP, "S", 0, true)
	check := func(ttl uint8, mac [6]byte) {
		t.Helper()
		out, v := r.run(f)
		if v[0] != Tx {
			t.Fatalf("verdict %v, want Tx", v[0])
		}
		pk := gopacket.NewPacket(out[0], layers.LayerTypeEthernet, gopacket.Default)
		eth, _ := pk.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
		ip, _ := pk.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		if eth == nil || ip == nil || !bytes.Equal(eth.DstMAC, mac[:]) || ip.TTL != ttl {
			t.Errorf("Ethernet %v outer IPv4 %v, want destination %v and TTL %d", eth, ip, net.HardwareAddr(mac[:]), ttl)
		}
	}
	check(64, gwMAC)
	enc, err := encap.New(encap.Config{SrcV4: r.cfg.Dataplane.LBIPv4.Addr, SrcV6: r.cfg.Dataplane.LBIPv6.Addr, MTU: 1500, TTL: 9, DF: encap.DFSet})
	if err != nil {
		t.Fatal(err)
	}
	other := [6]byte{2, 0, 0, 0, 0, 0x77}
	s, err := servicesOf(r.cfg, enc, r.shared.Services.Load(), nil, NextHop{MAC4: other, MAC6: other, Has4: true, Has6: true})
	if err != nil {
		t.Fatal(err)
	}
	r.shared.Services.Store(s)
	check(9, other)
	// A next-hop-only update keeps the tables and the encapsulator.
	third := [6]byte{2, 0, 0, 0, 0, 0x78}
	r.shared.Services.Store(s.WithNextHop(NextHop{MAC4: third, Has4: true}))
	check(9, third)
}
