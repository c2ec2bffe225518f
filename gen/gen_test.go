package gen

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/flow"
	"github.com/fulcrumlb/fulcrum/packet"
)

var (
	vip4  = netip.MustParseAddrPort("203.0.113.7:80")
	vip4b = netip.MustParseAddrPort("203.0.113.8:8080")
	vip6  = netip.MustParseAddrPort("[2001:db8::7]:443")
)

func mustNew(t testing.TB, c Config) *Generator {
	t.Helper()
	g, err := New(c)
	if err != nil {
		t.Fatalf("New(%+v): %v", c, err)
	}
	return g
}

func pcapBytes(t *testing.T, c Config, n int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := mustNew(t, c).WritePcap(&b, n); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestDeterminism(t *testing.T) {
	c := Config{VIPs: []netip.AddrPort{vip4, vip6}, Mode: ModeMix, IPv6: 0.3, Flows: 500,
		Malformed: 0.05, NonVIP: 0.05, ARP: 0.02, Seed: 1}
	a, b := pcapBytes(t, c, 3000), pcapBytes(t, c, 3000)
	if !bytes.Equal(a, b) {
		t.Fatal("same seed gave different pcap files")
	}
	c.Seed = 2
	if d := pcapBytes(t, c, 3000); bytes.Equal(a, d) {
		t.Fatal("seeds 1 and 2 gave the same pcap file")
	}
}

// within reports whether an observed count is within 5 standard deviations
// of a binomial's mean (a false failure about once in 1.7 million runs, and
// the seeds are fixed anyway).
func within(got uint64, n int, p float64) bool {
	mean := float64(n) * p
	sd := math.Sqrt(float64(n) * p * (1 - p))
	return math.Abs(float64(got)-mean) <= 5*sd+0.5
}

func TestKindCounts(t *testing.T) {
	const n = 40000
	c := Config{VIPs: []netip.AddrPort{vip4, vip6}, Mode: ModeMix, SYNShare: 0.25, IPv6: 0.4,
		Flows: 1000, Malformed: 0.03, NonVIP: 0.05, ARP: 0.01, Seed: 7}
	g := mustNew(t, c)
	var kinds [NumKinds]uint64
	buf := make([]byte, 0, g.MaxFrameLen())
	for range n {
		_, k := g.Next(buf)
		kinds[k]++
	}
	cnt := g.Counts()
	if kinds != cnt.Kinds || cnt.Frames != n {
		t.Fatalf("Counts() = %+v, frames %d; counted %v", cnt.Kinds, cnt.Frames, kinds)
	}
	valid := 1 - c.Malformed - c.NonVIP - c.ARP
	for _, x := range []struct {
		k Kind
		p float64
	}{
		{KindMalformed, c.Malformed}, {KindNonVIP, c.NonVIP}, {KindARP, c.ARP},
		{KindIPv4, valid * (1 - c.IPv6)}, {KindIPv6, valid * c.IPv6},
	} {
		if !within(kinds[x.k], n, x.p) {
			t.Errorf("%v: %d frames of %d, want about %.0f", x.k, kinds[x.k], n, float64(n)*x.p)
		}
	}
	nv := int(kinds[KindIPv4] + kinds[KindIPv6])
	if !within(cnt.SYN, nv, c.SYNShare) || cnt.SYN+cnt.Established != uint64(nv) || cnt.UDP != 0 {
		t.Errorf("syn %d established %d udp %d of %d valid, want syn about %.0f", cnt.SYN, cnt.Established, cnt.UDP, nv, float64(nv)*c.SYNShare)
	}
	var defects uint64
	for d := DefectNone + 1; d < NumDefects; d++ {
		defects += cnt.Defects[d]
		if !within(cnt.Defects[d], int(kinds[KindMalformed]), 1/float64(NumDefects-1)) {
			t.Errorf("defect %v: %d of %d malformed", d, cnt.Defects[d], kinds[KindMalformed])
		}
	}
	if defects != kinds[KindMalformed] || cnt.Defects[DefectNone] != 0 {
		t.Errorf("defects %v do not add up to %d malformed", cnt.Defects, kinds[KindMalformed])
	}
}

// decoded is a frame decoded by gopacket, independently of the generator.
type decoded struct {
	eth     *layers.Ethernet
	ip4     *layers.IPv4
	ip6     *layers.IPv6
	tcp     *layers.TCP
	udp     *layers.UDP
	arp     *layers.ARP
	payload []byte
}

func decode(t *testing.T, frame []byte) decoded {
	t.Helper()
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	if el := p.ErrorLayer(); el != nil {
		t.Fatalf("gopacket: %v\n% x", el.Error(), frame)
	}
	var d decoded
	d.eth, _ = p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	d.ip4, _ = p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	d.ip6, _ = p.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
	d.tcp, _ = p.Layer(layers.LayerTypeTCP).(*layers.TCP)
	d.udp, _ = p.Layer(layers.LayerTypeUDP).(*layers.UDP)
	d.arp, _ = p.Layer(layers.LayerTypeARP).(*layers.ARP)
	if a := p.ApplicationLayer(); a != nil {
		d.payload = a.Payload()
	}
	return d
}

// reserialize builds the frame again with gopacket from its decoded layers,
// computing lengths and checksums: equal bytes mean the generator's IP, TCP
// and UDP checksums and lengths are right.
func (d decoded) reserialize(t *testing.T) []byte {
	t.Helper()
	var ls []gopacket.SerializableLayer
	ls = append(ls, d.eth)
	var nl gopacket.NetworkLayer
	if d.ip4 != nil {
		ls, nl = append(ls, d.ip4), d.ip4
	} else {
		ls, nl = append(ls, d.ip6), d.ip6
	}
	if d.tcp != nil {
		d.tcp.SetNetworkLayerForChecksum(nl)
		ls = append(ls, d.tcp)
	} else {
		d.udp.SetNetworkLayerForChecksum(nl)
		ls = append(ls, d.udp)
	}
	ls = append(ls, gopacket.Payload(d.payload))
	sb := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(sb, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return sb.Bytes()
}

func isVIP(vips []netip.AddrPort, a netip.Addr) bool {
	for _, v := range vips {
		if v.Addr() == a {
			return true
		}
	}
	return false
}

func addrOf(b []byte) netip.Addr {
	a, _ := netip.AddrFromSlice(b)
	return a
}

// TestValidFrames decodes every valid, non-VIP and ARP frame with gopacket
// and checks it against the request: addresses, ports, protocol, flags,
// size, checksums; and that the project's parser accepts it with the same
// tuple.
func TestValidFrames(t *testing.T) {
	vips := []netip.AddrPort{vip4, vip4b, vip6}
	for _, tc := range []struct {
		name string
		mode Mode
		size int
		v6   float64
		seq  bool
	}{
		{"syn-64-v4", ModeSYN, 64, 0, false},
		{"syn-64-v6", ModeSYN, 64, 1, true},
		{"est-64-mixed", ModeEstablished, 64, 0.5, false},
		{"est-1518-mixed", ModeEstablished, 1518, 0.5, true},
		{"mix-128", ModeMix, 128, 0.2, false},
		{"udp-64-mixed", ModeUDP, 64, 0.5, false},
		{"udp-1000-v6", ModeUDP, 1000, 1, true},
		{"est-77-odd", ModeEstablished, 77, 0.5, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{VIPs: vips, Mode: tc.mode, Size: tc.size, IPv6: tc.v6, Flows: 300,
				Sequential: tc.seq, NonVIP: 0.1, ARP: 0.05, Seed: 3}
			g := mustNew(t, c)
			buf := make([]byte, 0, g.MaxFrameLen())
			var seen [NumKinds]int
			for range 1500 {
				frame, k := g.Next(buf)
				seen[k]++
				checkFrame(t, c, g.Last(), frame, k)
			}
			for _, k := range []Kind{KindNonVIP, KindARP} {
				if seen[k] == 0 {
					t.Errorf("no %v frame in 1500", k)
				}
			}
		})
	}
}

func checkFrame(t *testing.T, c Config, info Info, frame []byte, k Kind) {
	t.Helper()
	if info.Kind != k {
		t.Fatalf("Last().Kind = %v, Next returned %v", info.Kind, k)
	}
	d := decode(t, frame)
	if k == KindARP {
		if len(frame) != 60 || d.arp == nil || d.arp.Operation != layers.ARPRequest ||
			!bytes.Equal(d.eth.DstMAC, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}) ||
			!isVIP(c.VIPs, addrOf(d.arp.DstProtAddress)) || !bytes.Equal(d.arp.SourceHwAddress, DefaultClientMAC) {
			t.Fatalf("bad ARP request (%d bytes): %+v", len(frame), d.arp)
		}
		return
	}
	if !bytes.Equal(d.eth.SrcMAC, DefaultClientMAC) || !bytes.Equal(d.eth.DstMAC, DefaultLBMAC) {
		t.Fatalf("MACs %v -> %v", d.eth.SrcMAC, d.eth.DstMAC)
	}
	var src, dst netip.Addr
	var hdr int
	switch {
	case d.ip4 != nil:
		src, dst, hdr = addrOf(d.ip4.SrcIP), addrOf(d.ip4.DstIP), 14+20
		if k == KindIPv6 || d.ip4.TTL != 64 || d.ip4.Flags != layers.IPv4DontFragment {
			t.Fatalf("kind %v, IPv4 header %+v", k, d.ip4)
		}
	case d.ip6 != nil:
		src, dst, hdr = addrOf(d.ip6.SrcIP), addrOf(d.ip6.DstIP), 14+40
		if k == KindIPv4 || d.ip6.HopLimit != 64 {
			t.Fatalf("kind %v, IPv6 header %+v", k, d.ip6)
		}
	default:
		t.Fatalf("kind %v: no IP layer", k)
	}
	srcPrefix := DefaultSrcV4
	if src.Is6() {
		srcPrefix = DefaultSrcV6
	}
	if !srcPrefix.Contains(src) || src == srcPrefix.Masked().Addr() {
		t.Fatalf("source %v not a host of %v", src, srcPrefix)
	}
	var sport, dport uint16
	switch c.Mode {
	case ModeUDP:
		if d.udp == nil {
			t.Fatal("no UDP layer")
		}
		sport, dport, hdr = uint16(d.udp.SrcPort), uint16(d.udp.DstPort), hdr+8
	default:
		if d.tcp == nil {
			t.Fatal("no TCP layer")
		}
		sport, dport, hdr = uint16(d.tcp.SrcPort), uint16(d.tcp.DstPort), hdr+20
		syn := d.tcp.SYN && !d.tcp.ACK && !d.tcp.PSH
		est := !d.tcp.SYN && d.tcp.ACK && d.tcp.PSH == (len(d.payload) > 0)
		switch {
		case c.Mode == ModeSYN && !syn, c.Mode == ModeEstablished && !est,
			c.Mode == ModeMix && !(syn && info.SYN || est && !info.SYN):
			t.Fatalf("mode %v: flags SYN %v ACK %v PSH %v (Last().SYN %v)", c.Mode, d.tcp.SYN, d.tcp.ACK, d.tcp.PSH, info.SYN)
		}
		if d.tcp.FIN || d.tcp.RST || d.tcp.URG || d.tcp.DataOffset != 5 {
			t.Fatalf("TCP header %+v", d.tcp)
		}
	}
	if sport < MinSrcPort {
		t.Fatalf("source port %d below %d", sport, MinSrcPort)
	}
	switch k {
	case KindNonVIP:
		if isVIP(c.VIPs, dst) {
			t.Fatalf("non-VIP frame to VIP %v", dst)
		}
	default:
		if !isVIP(c.VIPs, dst) {
			t.Fatalf("%v frame to %v, not a VIP", k, dst)
		}
		want := netip.AddrPort{}
		for _, v := range c.VIPs {
			if v.Addr() == dst {
				want = v
			}
		}
		if dport != want.Port() {
			t.Fatalf("to %v port %d, want VIP %v", dst, dport, want)
		}
	}
	if wantLen := max(c.Size-FCSLen, hdr); len(frame) != wantLen || len(d.payload) != wantLen-hdr {
		t.Fatalf("frame %d bytes, payload %d; want %d, %d", len(frame), len(d.payload), wantLen, wantLen-hdr)
	}
	if re := d.reserialize(t); !bytes.Equal(re, frame) {
		t.Fatalf("gopacket rebuilds the frame differently (checksum or length):\n got % x\nwant % x", frame, re)
	}
	var p packet.Parsed
	if r := packet.Parse(frame, &p); r != packet.OK {
		t.Fatalf("packet.Parse: %v", r)
	}
	proto := uint8(packet.ProtoTCP)
	if c.Mode == ModeUDP {
		proto = packet.ProtoUDP
	}
	if want, _ := flow.TupleFrom(src, dst, sport, dport, proto); p.Tuple != want {
		t.Fatalf("packet.Parse tuple %+v, want %+v", p.Tuple, want)
	}
}

// TestChecksumsIndependently recomputes the TCP/UDP checksums with a plain
// RFC 1071 loop over the pseudo-header and segment (another witness than
// gopacket): the sum over a correct segment folds to 0xffff.
func TestChecksumsIndependently(t *testing.T) {
	for _, mode := range []Mode{ModeMix, ModeUDP} {
		g := mustNew(t, Config{VIPs: []netip.AddrPort{vip4, vip6}, Mode: mode, Size: 333, IPv6: 0.5, Flows: 100, Seed: 5})
		buf := make([]byte, 0, g.MaxFrameLen())
		for range 500 {
			f, _ := g.Next(buf)
			var pseudo []byte
			var seg []byte
			if binary.BigEndian.Uint16(f[12:]) == 0x0800 {
				ip := f[14:34]
				seg = f[34 : 14+int(binary.BigEndian.Uint16(ip[2:]))]
				pseudo = append(append([]byte{}, ip[12:20]...), 0, ip[9], byte(len(seg)>>8), byte(len(seg)))
				if naiveSum(ip) != 0xffff {
					t.Fatalf("IPv4 header checksum wrong: % x", ip)
				}
			} else {
				ip := f[14:54]
				seg = f[54 : 54+int(binary.BigEndian.Uint16(ip[4:]))]
				pseudo = append(append([]byte{}, ip[8:40]...), 0, 0, byte(len(seg)>>8), byte(len(seg)), 0, 0, 0, ip[6])
			}
			if s := naiveSum(append(pseudo, seg...)); s != 0xffff {
				t.Fatalf("mode %v: transport checksum sums to %#04x, want 0xffff", mode, s)
			}
		}
	}
}

func naiveSum(b []byte) uint16 {
	var s uint32
	for i := 0; i < len(b); i += 2 {
		w := uint32(b[i]) << 8
		if i+1 < len(b) {
			w |= uint32(b[i+1])
		}
		s += w
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// TestMalformedRejected checks that every malformed frame is rejected by
// the dataplane's parser, for the reason its defect promises.
func TestMalformedRejected(t *testing.T) {
	want := map[[3]int]packet.Reason{} // {defect, v6, udp}
	for udp := range 2 {
		want[[3]int{int(DefectTruncatedIP), 0, udp}] = packet.TruncatedIPv4
		want[[3]int{int(DefectTruncatedIP), 1, udp}] = packet.TruncatedIPv6
		want[[3]int{int(DefectBadIPHeader), 0, udp}] = packet.BadIPv4HeaderLen
		want[[3]int{int(DefectBadIPHeader), 1, udp}] = packet.BadIPv6Version
		want[[3]int{int(DefectBadIPLength), 0, udp}] = packet.BadIPv4TotalLen
		want[[3]int{int(DefectBadIPLength), 1, udp}] = packet.BadIPv6PayloadLen
	}
	for v6 := range 2 {
		want[[3]int{int(DefectTruncatedL4), v6, 0}] = packet.TruncatedTCP
		want[[3]int{int(DefectTruncatedL4), v6, 1}] = packet.TruncatedUDP
		want[[3]int{int(DefectBadL4Length), v6, 0}] = packet.TruncatedTCP
		want[[3]int{int(DefectBadL4Length), v6, 1}] = packet.BadUDPLen
	}
	seen := map[[3]int]int{}
	for _, mode := range []Mode{ModeMix, ModeUDP} {
		for _, size := range []int{64, 1518} {
			g := mustNew(t, Config{VIPs: []netip.AddrPort{vip4, vip6}, Mode: mode, Size: size, IPv6: 0.5, Flows: 50, Malformed: 1, Seed: 11})
			buf := make([]byte, 0, g.MaxFrameLen())
			for range 1000 {
				f, k := g.Next(buf)
				info := g.Last()
				if k != KindMalformed || info.Defect == DefectNone {
					t.Fatalf("malformed rate 1: kind %v defect %v", k, info.Defect)
				}
				v6 := 0
				if binary.BigEndian.Uint16(f[12:]) == 0x86dd {
					v6 = 1
				}
				key := [3]int{int(info.Defect), v6, int(mode / ModeUDP)}
				var p packet.Parsed
				if r := packet.Parse(f, &p); r != want[key] {
					t.Fatalf("mode %v size %d defect %v v6 %d: packet.Parse = %v, want %v\n% x", mode, size, info.Defect, v6, r, want[key], f)
				}
				if info.Defect == DefectTruncatedIP && len(f) >= 14+20+20*v6 || info.Defect != DefectTruncatedIP && len(f) < 60 {
					t.Fatalf("defect %v: %d-byte frame", info.Defect, len(f))
				}
				seen[key]++
			}
		}
	}
	if len(seen) != len(want) {
		t.Errorf("saw %d of %d defect/family/protocol combinations: %v", len(seen), len(want), seen)
	}
}

// TestFlows checks that n >> N frames carry exactly N distinct 5-tuples,
// for sequential and random sources, drawn in order and uniformly.
func TestFlows(t *testing.T) {
	for _, tc := range []struct {
		name      string
		seq, ord  bool
		v6        float64
		flows, n  int
		src4, src string
	}{
		{"sequential-in-order", true, true, 0, 1000, 3000, "10.1.0.0/30", ""},
		{"sequential-in-order-v6mix", true, true, 0.3, 1000, 3000, "", ""},
		{"random-uniform", false, false, 0.5, 500, 12000, "", ""},
		{"random-small-prefix", false, true, 0, 2000, 2000, "10.9.9.9/32", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{VIPs: []netip.AddrPort{vip4, vip4b, vip6}, Mode: ModeSYN, IPv6: tc.v6, Flows: tc.flows,
				Sequential: tc.seq, InOrder: tc.ord, Seed: 9}
			if tc.src4 != "" {
				c.SrcV4 = netip.MustParsePrefix(tc.src4)
			}
			g := mustNew(t, c)
			buf := make([]byte, 0, g.MaxFrameLen())
			tuples := map[flow.Tuple]int{}
			var v6 int
			for i := range tc.n {
				f, k := g.Next(buf)
				var p packet.Parsed
				if r := packet.Parse(f, &p); r != packet.OK {
					t.Fatal(r)
				}
				if prev, ok := tuples[p.Tuple]; ok && prev != g.Last().Flow {
					t.Fatalf("flows %d and %d share tuple %+v", prev, g.Last().Flow, p.Tuple)
				}
				tuples[p.Tuple] = g.Last().Flow
				if tc.ord && g.Last().Flow != i%tc.flows {
					t.Fatalf("frame %d: flow %d, want %d in order", i, g.Last().Flow, i%tc.flows)
				}
				if k == KindIPv6 && i < tc.flows {
					v6++
				}
			}
			if len(tuples) != tc.flows {
				t.Fatalf("%d distinct tuples, want %d", len(tuples), tc.flows)
			}
			if tc.ord && v6 != int(float64(tc.flows)*tc.v6) {
				t.Errorf("%d IPv6 flows of %d, want %v", v6, tc.flows, float64(tc.flows)*tc.v6)
			}
		})
	}
}

func TestSequentialSources(t *testing.T) {
	g := mustNew(t, Config{VIPs: []netip.AddrPort{vip4}, Flows: 600, Sequential: true, InOrder: true,
		SrcV4: netip.MustParsePrefix("10.0.0.0/24")})
	buf := make([]byte, 0, 64)
	for i := range 600 {
		f, _ := g.Next(buf)
		src := netip.AddrFrom4([4]byte(f[26:30]))
		port := binary.BigEndian.Uint16(f[34:])
		wantSrc := netip.AddrFrom4([4]byte{10, 0, 0, byte(1 + i%254)})
		if src != wantSrc || int(port) != MinSrcPort+i/254 {
			t.Fatalf("flow %d: %v:%d, want %v:%d", i, src, port, wantSrc, MinSrcPort+i/254)
		}
	}
}

func TestPermutationIsBijection(t *testing.T) {
	for _, n := range []uint64{1, 2, 3, 5, 64, 254 * 3, 1000, 4097} {
		p := newPermutation(n, n*77)
		seen := make([]bool, n)
		for x := range n {
			y := p.at(x)
			if y >= n || seen[y] {
				t.Fatalf("n=%d: at(%d) = %d repeats or is out of range", n, x, y)
			}
			seen[y] = true
		}
	}
}

func TestConfigErrors(t *testing.T) {
	ok := Config{VIPs: []netip.AddrPort{vip4}, Flows: 10}
	for _, tc := range []struct {
		name string
		edit func(*Config)
	}{
		{"no vips", func(c *Config) { c.VIPs = nil }},
		{"port 0", func(c *Config) { c.VIPs = []netip.AddrPort{netip.MustParseAddrPort("1.2.3.4:0")} }},
		{"size small", func(c *Config) { c.Size = 63 }},
		{"size big", func(c *Config) { c.Size = 1519 }},
		{"no flows", func(c *Config) { c.Flows = 0 }},
		{"ipv6 without v6 vip", func(c *Config) { c.IPv6 = 0.5 }},
		{"ipv6 share NaN", func(c *Config) { c.IPv6 = math.NaN() }},
		{"rate negative", func(c *Config) { c.Malformed = -0.1 }},
		{"rates above 1", func(c *Config) { c.Malformed, c.NonVIP = 0.6, 0.5 }},
		{"bad mode", func(c *Config) { c.Mode = numModes }},
		{"too many flows", func(c *Config) { c.Flows = 70000; c.SrcV4 = netip.MustParsePrefix("10.0.0.1/32") }},
		{"v6 source for v4", func(c *Config) { c.SrcV4 = DefaultSrcV6 }},
		{"arp without v4 vip", func(c *Config) { c.VIPs = []netip.AddrPort{vip6}; c.IPv6 = 1; c.ARP = 0.1 }},
		{"bad mac", func(c *Config) { c.LBMAC = []byte{1, 2, 3} }},
	} {
		c := ok
		tc.edit(&c)
		if _, err := New(c); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: New = %v, want ErrConfig", tc.name, err)
		}
	}
	if _, err := New(ok); err != nil {
		t.Fatal(err)
	}
}

func TestParseVIPs(t *testing.T) {
	got, err := ParseVIPs("203.0.113.7:80, [2001:db8::7]:443")
	if err != nil || len(got) != 2 || got[0] != vip4 || got[1] != vip6 {
		t.Fatalf("ParseVIPs = %v, %v", got, err)
	}
	for _, bad := range []string{"", "203.0.113.7", "2001:db8::7:443", "1.2.3.4:80,", "1.2.3.4:99999"} {
		if _, err := ParseVIPs(bad); err == nil {
			t.Errorf("ParseVIPs(%q) accepted", bad)
		}
	}
}

func TestNonVIPNeverAVIP(t *testing.T) {
	// The neighbour of the first VIP is itself a VIP: the generator must
	// skip over it.
	vips := []netip.AddrPort{netip.MustParseAddrPort("10.0.0.1:80"), netip.MustParseAddrPort("10.0.0.2:80")}
	g := mustNew(t, Config{VIPs: vips, Flows: 10, NonVIP: 1})
	f, _ := g.Next(nil)
	if dst := netip.AddrFrom4([4]byte(f[30:34])); isVIP(vips, dst) {
		t.Fatalf("non-VIP frame to %v", dst)
	}
}

// readPcap reads a classic little-endian microsecond pcap file, following
// the format's description rather than the writer's code.
func readPcap(t *testing.T, b []byte) (snaplen, linktype uint32, frames [][]byte) {
	t.Helper()
	le := binary.LittleEndian
	if len(b) < 24 || le.Uint32(b) != 0xa1b2c3d4 || le.Uint16(b[4:]) != 2 || le.Uint16(b[6:]) != 4 {
		t.Fatalf("bad pcap header % x", b[:min(24, len(b))])
	}
	snaplen, linktype = le.Uint32(b[16:]), le.Uint32(b[20:])
	var last uint64
	for b = b[24:]; len(b) > 0; {
		if len(b) < 16 {
			t.Fatalf("truncated record header")
		}
		ts := uint64(le.Uint32(b))*1e6 + uint64(le.Uint32(b[4:]))
		incl, orig := le.Uint32(b[8:]), le.Uint32(b[12:])
		if incl != orig || int(incl) > len(b)-16 || le.Uint32(b[4:]) >= 1e6 || ts <= last && len(frames) > 0 {
			t.Fatalf("record %d: bad header % x", len(frames), b[:16])
		}
		last = ts
		frames = append(frames, b[16:16+incl])
		b = b[16+incl:]
	}
	return snaplen, linktype, frames
}

func TestPcapReadsBack(t *testing.T) {
	c := Config{VIPs: []netip.AddrPort{vip4, vip6}, Mode: ModeMix, Size: 200, IPv6: 0.5, Flows: 100, Malformed: 0.1, ARP: 0.1, Seed: 4}
	const n = 1000
	snaplen, lt, frames := readPcap(t, pcapBytes(t, c, n))
	if snaplen != 65535 || lt != 1 || len(frames) != n {
		t.Fatalf("snaplen %d linktype %d, %d frames; want 65535, 1, %d", snaplen, lt, len(frames), n)
	}
	g := mustNew(t, c)
	for i, f := range frames {
		want, _ := g.Next(nil)
		if !bytes.Equal(f, want) {
			t.Fatalf("frame %d differs from Next's", i)
		}
	}
}

func TestNextDoesNotAllocate(t *testing.T) {
	g := mustNew(t, Config{VIPs: []netip.AddrPort{vip4, vip6}, Mode: ModeMix, IPv6: 0.5, Flows: 1000, Malformed: 0.1, NonVIP: 0.1, ARP: 0.1})
	buf := make([]byte, 0, g.MaxFrameLen())
	if a := testing.AllocsPerRun(1000, func() { g.Next(buf) }); a != 0 {
		t.Fatalf("Next allocates %v times per frame", a)
	}
}
