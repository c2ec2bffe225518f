package encap

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/packet"
)

var forwardSpecs = []spec{
	{name: "v4-tcp", l4: "tcp", payload: 100, df: true},
	{name: "v4-udp", l4: "udp", payload: 200, df: true},
	{name: "v4-tcp-vlan", l4: "tcp", payload: 60, df: true, vlans: 1},
	{name: "v4-udp-qinq", l4: "udp", payload: 33, df: true, vlans: 2},
	{name: "v4-tcp-options", l4: "tcp", payload: 77, df: true, opts: true},
	{name: "v4-udp-padded", l4: "udp", payload: 1, df: true, pad: 17},
	{name: "v4-udp-nodf", l4: "udp", payload: 300},
	{name: "v4-udp-nocsum", l4: "udp0", payload: 301, df: true},
	{name: "v4-icmp-echo", l4: "icmp", payload: 56},
	{name: "v4-tcp-tos", l4: "tcp", payload: 10, df: true, tos: 0xb9},
	{name: "v4-first-fragment", l4: "udp", payload: 400, frag: true},
	{name: "v4-gre-inner", l4: "gre", payload: 50, df: true},
	{name: "v6-tcp", v6: true, l4: "tcp", payload: 100},
	{name: "v6-udp-vlan", v6: true, l4: "udp", payload: 99, vlans: 1},
	{name: "v6-tcp-padded", v6: true, l4: "tcp", payload: 0, pad: 30},
	{name: "v6-icmp-echo", v6: true, l4: "icmp", payload: 31, tos: 0x2e},
	{name: "v6-first-fragment", v6: true, l4: "udp", payload: 200, frag: true},
	{name: "v6-udp-qinq-tc", v6: true, l4: "udp", payload: 1000, vlans: 2, tos: 0x03},
}

// TestEncapForward encapsulates every spec with every kind toward both
// backend families and checks the output field by field with gopacket.
func TestEncapForward(t *testing.T) {
	configs := []struct {
		name string
		mod  func(*Config)
	}{
		{"defaults", nil},
		{"df-set-ttl9-port7777", func(c *Config) {
			c.DF = DFSet
			c.TTL = 9
			c.GUEPort = 7777
			c.GUESrcPortMin, c.GUESrcPortMax = 1000, 1009
		}},
		{"df-clear-zerocsum", func(c *Config) { c.DF = DFClear; c.GUEZeroChecksumV6 = true }},
	}
	hashes := []uint64{0, 0x0123456789abcdef, ^uint64(0)}
	for _, c := range configs {
		e := newEnc(t, c.mod)
		for _, s := range forwardSpecs {
			for _, kind := range []Kind{GRE, IPIP, GUE} {
				for _, bAddr := range []Backend{mustBackend(t, e, backend4), mustBackend(t, e, backend6)} {
					for _, hash := range hashes {
						name := fmt.Sprintf("%s/%s/%s/to-v%d/%#x", c.name, s.name, kind, map[bool]int{false: 4, true: 6}[bAddr.IsV6()], hash)
						t.Run(name, func(t *testing.T) {
							checkForward(t, e, s, kind, bAddr, hash)
						})
					}
				}
			}
		}
	}
}

func checkForward(t *testing.T, e *Encapsulator, s spec, kind Kind, be Backend, hash uint64) {
	frame := build(t, s)
	buf, off, n, p := load(t, frame, headroom)
	start, length, res := e.Encap(buf, off, n, &p, hash, kind, &be, nextHop, portMAC)
	if res != Forward {
		t.Fatalf("Encap = %v, want forward", res)
	}
	out := buf[start : start+length]
	inner := frame[p.L3Off : int(p.L3Off)+int(p.IPLen)]
	outerV6 := be.IsV6()

	// Independent expectations, not from the package's tables.
	ipHdr := map[bool]int{false: 20, true: 40}[outerV6]
	tunHdr := map[Kind]int{GRE: 4, IPIP: 0, GUE: 12}[kind]
	hl := 14 + ipHdr + tunHdr
	if length != hl+len(inner) {
		t.Fatalf("length %d, want %d (headers %d + inner %d; padding dropped)", length, hl+len(inner), hl, len(inner))
	}
	if start+hl != off+int(p.L3Off) {
		t.Errorf("inner packet moved: new headers end at %d, inner IP header was at %d", start+hl, off+int(p.L3Off))
	}
	equalBytes(t, "inner packet", out[hl:], inner)
	innerProto := map[bool]uint8{false: 4, true: 41}[s.v6]
	wantProto := map[Kind]uint8{GRE: 47, IPIP: innerProto, GUE: 17}[kind]

	pkt := decode(out)
	ls := pkt.Layers()
	if len(ls) < 2 {
		t.Fatalf("decoded only %d layers: %v", len(ls), pkt)
	}
	eth, ok := ls[0].(*layers.Ethernet)
	if !ok {
		t.Fatalf("layer 0 is %v", ls[0].LayerType())
	}
	equalBytes(t, "eth dst", eth.DstMAC, nextHop[:])
	equalBytes(t, "eth src", eth.SrcMAC, portMAC[:])

	cfg := e.Config()
	var tun []byte
	if !outerV6 {
		if eth.EthernetType != layers.EthernetTypeIPv4 {
			t.Fatalf("ethertype %v, want IPv4", eth.EthernetType)
		}
		ip, ok := ls[1].(*layers.IPv4)
		if !ok {
			t.Fatalf("layer 1 is %v", ls[1].LayerType())
		}
		if ip.Version != 4 || ip.IHL != 5 || ip.TOS != s.tos || int(ip.Length) != length-14 ||
			int(ip.TTL) != cfg.TTL || uint8(ip.Protocol) != wantProto || ip.FragOffset != 0 {
			t.Errorf("outer IPv4 %+v: want IHL 5, TOS %#x, length %d, TTL %d, proto %d", ip, s.tos, length-14, cfg.TTL, wantProto)
		}
		equalBytes(t, "outer src", ip.SrcIP.To4(), lbSrc4.AsSlice())
		equalBytes(t, "outer dst", ip.DstIP.To4(), backend4.AsSlice())
		wantDF := cfg.DF == DFSet || cfg.DF == DFInherit && (s.v6 || s.df)
		if got := ip.Flags&layers.IPv4DontFragment != 0; got != wantDF {
			t.Errorf("outer DF %v, want %v (mode %v, inner DF %v)", got, wantDF, cfg.DF, s.df)
		}
		if ip.Flags&layers.IPv4MoreFragments != 0 {
			t.Errorf("outer MF set")
		}
		if wantDF && ip.Id != 0 {
			t.Errorf("outer ID %#x with DF, want 0", ip.Id)
		}
		if refSum(out[14:34]) != 0xffff {
			t.Errorf("outer IPv4 checksum %#04x does not verify", ip.Checksum)
		}
		if g := gopacketIPv4Checksum(t, out[14:34]); g != ip.Checksum {
			t.Errorf("outer IPv4 checksum %#04x, gopacket computes %#04x", ip.Checksum, g)
		}
		tun = out[34:hl]
	} else {
		if eth.EthernetType != layers.EthernetTypeIPv6 {
			t.Fatalf("ethertype %v, want IPv6", eth.EthernetType)
		}
		ip, ok := ls[1].(*layers.IPv6)
		if !ok {
			t.Fatalf("layer 1 is %v", ls[1].LayerType())
		}
		wantLabel := uint32(hash>>44) & 0xfffff
		if wantLabel == 0 {
			wantLabel = 1
		}
		if ip.Version != 6 || ip.TrafficClass != s.tos || ip.FlowLabel != wantLabel || int(ip.Length) != length-54 ||
			int(ip.HopLimit) != cfg.TTL || uint8(ip.NextHeader) != wantProto {
			t.Errorf("outer IPv6 TC %#x label %#x len %d hop %d nh %d: want TC %#x label %#x len %d hop %d nh %d",
				ip.TrafficClass, ip.FlowLabel, ip.Length, ip.HopLimit, ip.NextHeader, s.tos, wantLabel, length-54, cfg.TTL, wantProto)
		}
		equalBytes(t, "outer src", ip.SrcIP, lbSrc6.AsSlice())
		equalBytes(t, "outer dst", ip.DstIP, backend6.AsSlice())
		tun = out[54:hl]
	}

	switch kind {
	case GRE:
		var g layers.GRE
		if err := g.DecodeFromBytes(append([]byte(nil), tun...), gopacket.NilDecodeFeedback); err != nil {
			t.Fatalf("GRE: %v", err)
		}
		wantET := map[bool]layers.EthernetType{false: layers.EthernetTypeIPv4, true: layers.EthernetTypeIPv6}[s.v6]
		if g.ChecksumPresent || g.KeyPresent || g.SeqPresent || g.RoutingPresent || g.Version != 0 || g.Protocol != wantET {
			t.Errorf("GRE %+v: want no options, version 0, protocol %v", g, wantET)
		}
	case GUE:
		var u layers.UDP
		if err := u.DecodeFromBytes(append([]byte(nil), tun...), gopacket.NilDecodeFeedback); err != nil {
			t.Fatalf("UDP: %v", err)
		}
		if int(u.DstPort) != cfg.GUEPort || u.SrcPort < layers.UDPPort(cfg.GUESrcPortMin) || u.SrcPort > layers.UDPPort(cfg.GUESrcPortMax) ||
			int(u.Length) != 12+len(inner) {
			t.Errorf("UDP %d -> %d len %d: want dport %d, sport in %d..%d, len %d",
				u.SrcPort, u.DstPort, u.Length, cfg.GUEPort, cfg.GUESrcPortMin, cfg.GUESrcPortMax, 12+len(inner))
		}
		equalBytes(t, "GUE header", tun[8:12], []byte{0, innerProto, 0, 0})
		switch {
		case !outerV6 || cfg.GUEZeroChecksumV6:
			if u.Checksum != 0 {
				t.Errorf("UDP checksum %#04x, want 0", u.Checksum)
			}
		default:
			udpSeg := out[54:]
			valid := refSum(pseudo6(lbSrc6.AsSlice(), backend6.AsSlice(), len(udpSeg), 17), udpSeg) == 0xffff
			if valid == s.badL4 || u.Checksum == 0 {
				t.Errorf("UDP checksum %#04x verifies=%v; want it to verify exactly when the inner checksum does (inner bad: %v)", u.Checksum, valid, s.badL4)
			}
			if !s.badL4 {
				if g := gopacketUDPv6Checksum(t, out); g != u.Checksum {
					t.Errorf("UDP checksum %#04x, gopacket computes %#04x", u.Checksum, g)
				}
			}
		}
	}

	// The inner packet still decodes, unchanged.
	innerType := map[bool]gopacket.LayerType{false: layers.LayerTypeIPv4, true: layers.LayerTypeIPv6}[s.v6]
	ip := gopacket.NewPacket(out[hl:], innerType, gopacket.Default).NetworkLayer()
	if ip == nil {
		t.Fatalf("inner packet does not decode")
	}
}

// gopacketUDPv6Checksum recomputes the UDP checksum of a GUE-over-IPv6
// frame with gopacket.
func gopacketUDPv6Checksum(t *testing.T, frame []byte) uint16 {
	t.Helper()
	pkt := decode(frame)
	ip := pkt.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
	u := *pkt.Layer(layers.LayerTypeUDP).(*layers.UDP)
	u.Checksum = 0
	u.SetNetworkLayerForChecksum(ip)
	sb := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(sb, gopacket.SerializeOptions{ComputeChecksums: true}, &u, gopacket.Payload(u.Payload)); err != nil {
		t.Fatalf("serialize UDP: %v", err)
	}
	return binary.BigEndian.Uint16(sb.Bytes()[6:])
}

// TestGUEChecksumBadInner pins the documented trade-off of the constant-time
// checksum: an inner packet with a wrong checksum gets an outer checksum
// that fails too; the full-sum fallbacks stay exact.
func TestGUEChecksumBadInner(t *testing.T) {
	e := newEnc(t, nil)
	b := mustBackend(t, e, backend6)
	for _, s := range []spec{
		{name: "v4-tcp-bad", l4: "tcp", payload: 100, df: true, badL4: true},
		{name: "v4-udp-bad", l4: "udp", payload: 100, df: true, badL4: true},
		{name: "v6-tcp-bad", v6: true, l4: "tcp", payload: 100, badL4: true},
		{name: "v6-udp-bad", v6: true, l4: "udp", payload: 3, badL4: true},
	} {
		t.Run(s.name, func(t *testing.T) { checkForward(t, e, s, GUE, b, 42) })
	}
}

// TestGUESourcePortSpread checks that the source port spreads flows over
// the whole configured range, evenly enough for RSS.
func TestGUESourcePortSpread(t *testing.T) {
	e := newEnc(t, func(c *Config) { c.GUESrcPortMin, c.GUESrcPortMax = 50000, 50015 })
	b := mustBackend(t, e, backend4)
	frame := build(t, spec{l4: "udp", payload: 10, df: true})
	var counts [16]int
	const flows = 16000
	h := uint64(0x9e3779b97f4a7c15)
	for i := 0; i < flows; i++ {
		h = h*6364136223846793005 + 1442695040888963407 // LCG: any spread of hashes
		buf, off, n, p := load(t, frame, headroom)
		start, _, res := e.Encap(buf, off, n, &p, h, GUE, &b, nextHop, portMAC)
		if res != Forward {
			t.Fatal(res)
		}
		sport := int(binary.BigEndian.Uint16(buf[start+34:]))
		if sport < 50000 || sport > 50015 {
			t.Fatalf("source port %d outside 50000..50015", sport)
		}
		counts[sport-50000]++
		// Same hash, same port: a flow keeps one outer 5-tuple.
		buf2, off, n, p := load(t, frame, headroom)
		start2, _, _ := e.Encap(buf2, off, n, &p, h, GUE, &b, nextHop, portMAC)
		if got := int(binary.BigEndian.Uint16(buf2[start2+34:])); got != sport {
			t.Fatalf("hash %#x: port %d then %d", h, sport, got)
		}
	}
	for i, c := range counts {
		if c < flows/16*8/10 || c > flows/16*12/10 {
			t.Errorf("port %d got %d of %d flows, want about %d", 50000+i, c, flows, flows/16)
		}
	}
}

// TestDFAndID checks the outer DF bit and IPv4 ID for each DF mode.
func TestDFAndID(t *testing.T) {
	const hash = 0xabcd_ef01_2345_6789
	for _, tc := range []struct {
		mode    DF
		v6, df  bool
		wantDF  bool
		wantID0 bool
	}{
		{DFInherit, false, true, true, true},
		{DFInherit, false, false, false, false},
		{DFInherit, true, false, true, true},
		{DFSet, false, false, true, true},
		{DFClear, false, true, false, false},
		{DFClear, true, false, false, false},
	} {
		e := newEnc(t, func(c *Config) { c.DF = tc.mode })
		b := mustBackend(t, e, backend4)
		buf, off, n, p := load(t, build(t, spec{v6: tc.v6, l4: "tcp", payload: 5, df: tc.df}), headroom)
		start, _, res := e.Encap(buf, off, n, &p, hash, IPIP, &b, nextHop, portMAC)
		if res != Forward {
			t.Fatal(res)
		}
		o := buf[start+14:]
		gotDF := o[6]&0x40 != 0
		id := binary.BigEndian.Uint16(o[4:])
		if gotDF != tc.wantDF || (id == 0) != tc.wantID0 {
			t.Errorf("mode %v inner v6=%v DF=%v: outer DF %v ID %#x, want DF %v, ID zero %v", tc.mode, tc.v6, tc.df, gotDF, id, tc.wantDF, tc.wantID0)
		}
		if !tc.wantDF && !tc.v6 {
			// inner ID 0x1234 (build) plus the per-flow offset.
			if want := uint16(0x1234) + uint16(hash>>16&0xffff); id != want {
				t.Errorf("mode %v: ID %#x, want %#x", tc.mode, id, want)
			}
		}
	}
}

// tunnelLayer is the gopacket layer of each kind's tunnel header, the
// layer after the outer IP header (IPIP has none), so tests check the
// header with a decoder independent of Encap.
var tunnelLayer = map[Kind]gopacket.LayerType{GRE: layers.LayerTypeGRE, GUE: layers.LayerTypeUDP}

// TestOverhead pins the byte counts the MTU math depends on.
func TestOverhead(t *testing.T) {
	for _, tc := range []struct {
		k    Kind
		v6   bool
		want int
	}{
		{GRE, false, 24}, {GRE, true, 44}, {IPIP, false, 20}, {IPIP, true, 40},
		{GUE, false, 32}, {GUE, true, 52}, {NumKinds, false, 0},
	} {
		if got := Overhead(tc.k, tc.v6); got != tc.want {
			t.Errorf("Overhead(%v, %v) = %d, want %d", tc.k, tc.v6, got, tc.want)
		}
	}
	if MaxHeaderLen != 86 {
		t.Errorf("MaxHeaderLen = %d, want 86", MaxHeaderLen)
	}
}

// TestMTUBoundary: exactly MTU is forwarded, one byte more is not.
func TestMTUBoundary(t *testing.T) {
	e := newEnc(t, func(c *Config) { c.MTU = 1400 })
	for _, kind := range []Kind{GRE, IPIP, GUE} {
		for _, ba := range []Backend{mustBackend(t, e, backend4), mustBackend(t, e, backend6)} {
			max := 1400 - Overhead(kind, ba.IsV6())
			for _, ipLen := range []int{max, max + 1} {
				payload := ipLen - 20 - 8
				buf, off, n, p := load(t, build(t, spec{l4: "udp", payload: payload, df: true}), headroom)
				_, length, res := e.Encap(buf, off, n, &p, 1, kind, &ba, nextHop, portMAC)
				want := Forward
				if ipLen > max {
					want = ICMPReply
				}
				if res != want {
					t.Errorf("%v to v6=%v: inner %d bytes: %v, want %v", kind, ba.IsV6(), ipLen, res, want)
				}
				if res == Forward && length-14 != 1400 {
					t.Errorf("%v: outer packet %d bytes, want 1400", kind, length-14)
				}
			}
		}
	}
}

// TestEncapIdempotentInput: Encap leaves the inner packet's bytes alone, so
// the same buffer encapsulates identically twice (benchmarks rely on it).
func TestEncapIdempotentInput(t *testing.T) {
	e := newEnc(t, nil)
	b := mustBackend(t, e, backend6)
	buf, off, n, p := load(t, build(t, spec{l4: "tcp", payload: 100, df: true}), headroom)
	s1, l1, _ := e.Encap(buf, off, n, &p, 7, GUE, &b, nextHop, portMAC)
	first := append([]byte(nil), buf[s1:s1+l1]...)
	s2, l2, _ := e.Encap(buf, off, n, &p, 7, GUE, &b, nextHop, portMAC)
	if s1 != s2 || l1 != l2 || !bytes.Equal(first, buf[s2:s2+l2]) {
		t.Errorf("second Encap differs")
	}
}

// TestParsedFromGopacket cross-checks the Parsed fields Encap relies on
// against gopacket's own decode of the test frames.
func TestParsedFromGopacket(t *testing.T) {
	for _, s := range forwardSpecs {
		frame := build(t, s)
		var p packet.Parsed
		packet.Parse(frame, &p)
		g := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
		nl := g.NetworkLayer()
		wantOff := 14 + 4*s.vlans
		var wantLen int
		switch ip := nl.(type) {
		case *layers.IPv4:
			wantLen = int(ip.Length)
		case *layers.IPv6:
			wantLen = 40 + int(ip.Length)
		}
		if int(p.L3Off) != wantOff || int(p.IPLen) != wantLen || p.TOS != s.tos {
			t.Errorf("%s: Parsed L3Off %d IPLen %d TOS %#x, gopacket says %d %d %#x", s.name, p.L3Off, p.IPLen, p.TOS, wantOff, wantLen, s.tos)
		}
	}
}
