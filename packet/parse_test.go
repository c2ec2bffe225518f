package packet

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

var (
	macA = net.HardwareAddr{0x02, 0, 0, 0, 0, 1}
	macB = net.HardwareAddr{0x02, 0, 0, 0, 0, 2}
)

// build serializes layers with gopacket, fixing lengths and checksums, so
// test packets come from an encoder independent of the parser.
func build(t testing.TB, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	for _, l := range ls {
		if n, ok := l.(interface {
			SetNetworkLayerForChecksum(gopacket.NetworkLayer) error
		}); ok {
			for _, nl := range ls {
				if ip, ok := nl.(gopacket.NetworkLayer); ok {
					_ = n.SetNetworkLayerForChecksum(ip)
				}
			}
		}
	}
	if err := gopacket.SerializeLayers(buf, opts, ls...); err != nil {
		t.Fatalf("serialize: %v", err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

func eth(et layers.EthernetType) *layers.Ethernet {
	return &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: et}
}

func ip4(src, dst string, proto layers.IPProtocol) *layers.IPv4 {
	return &layers.IPv4{Version: 4, IHL: 5, TTL: 61, TOS: 0x28, Protocol: proto, Flags: layers.IPv4DontFragment,
		SrcIP: net.ParseIP(src).To4(), DstIP: net.ParseIP(dst).To4()}
}

func ip6(src, dst string, nh layers.IPProtocol) *layers.IPv6 {
	return &layers.IPv6{Version: 6, HopLimit: 33, TrafficClass: 0x48, NextHeader: nh,
		SrcIP: net.ParseIP(src), DstIP: net.ParseIP(dst)}
}

func tcp(sp, dp uint16, syn, ack bool) *layers.TCP {
	return &layers.TCP{SrcPort: layers.TCPPort(sp), DstPort: layers.TCPPort(dp), SYN: syn, ACK: ack, Window: 1000, Seq: 7}
}

func udp(sp, dp uint16) *layers.UDP {
	return &layers.UDP{SrcPort: layers.UDPPort(sp), DstPort: layers.UDPPort(dp)}
}

// ext builds a raw IPv6 extension header with an 8-byte-aligned body.
type rawExt struct {
	next, kind layers.IPProtocol
	body       []byte // bytes after next header and length (len+2 must be a multiple of 8)
}

func (e *rawExt) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	out, err := b.PrependBytes(2 + len(e.body))
	if err != nil {
		return err
	}
	out[0] = byte(e.next)
	out[1] = byte((2+len(e.body))/8 - 1)
	copy(out[2:], e.body)
	return nil
}
func (e *rawExt) LayerType() gopacket.LayerType { return gopacket.LayerTypePayload }

// rawFrag is an IPv6 fragment header (RFC 8200 4.5); gopacket decodes but
// cannot serialize one.
type rawFrag struct {
	next   layers.IPProtocol
	offset uint16 // in 8-octet units
	more   bool
	id     uint32
}

func (f *rawFrag) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	out, err := b.PrependBytes(8)
	if err != nil {
		return err
	}
	out[0], out[1] = byte(f.next), 0
	v := f.offset << 3
	if f.more {
		v |= 1
	}
	binary.BigEndian.PutUint16(out[2:], v)
	binary.BigEndian.PutUint32(out[4:], f.id)
	return nil
}
func (f *rawFrag) LayerType() gopacket.LayerType { return gopacket.LayerTypePayload }

type want struct {
	l3               L3
	et               uint16
	vlans            int
	src, dst         string
	sport, dport     uint16
	proto            uint8
	flags            uint8
	l3off, l4off     int
	payloadOff       int
	frag, more       bool
	fragOff          uint16
	icmpType, icmpCo uint8
	ttl, tos         uint8
}

func TestParseValid(t *testing.T) {
	payload := gopacket.Payload([]byte("hello, fulcrum"))
	opt := ip4("198.51.100.10", "203.0.113.7", layers.IPProtocolTCP)
	opt.Options = []layers.IPv4Option{{OptionType: 1}, {OptionType: 1}, {OptionType: 1}, {OptionType: 0}} // NOP NOP NOP EOL: 4 bytes
	opt.IHL = 6
	frag1 := ip4("198.51.100.10", "203.0.113.7", layers.IPProtocolUDP)
	frag1.Flags = layers.IPv4MoreFragments
	frag2 := ip4("198.51.100.10", "203.0.113.7", layers.IPProtocolUDP)
	frag2.Flags = 0
	frag2.FragOffset = 185 // 1480 bytes
	tcpOpts := tcp(40000, 443, true, false)
	tcpOpts.Options = []layers.TCPOption{{OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: []byte{5, 0xb4}}}

	cases := []struct {
		name  string
		frame []byte
		w     want
	}{
		{"ipv4 tcp syn", build(t, eth(layers.EthernetTypeIPv4), ip4("198.51.100.10", "203.0.113.7", layers.IPProtocolTCP), tcp(40000, 80, true, false), payload),
			want{l3: L3IPv4, et: 0x0800, src: "198.51.100.10", dst: "203.0.113.7", sport: 40000, dport: 80, proto: 6, flags: TCPSyn, l3off: 14, l4off: 34, payloadOff: 54, ttl: 61, tos: 0x28}},
		{"ipv4 tcp options", build(t, eth(layers.EthernetTypeIPv4), ip4("198.51.100.10", "203.0.113.7", layers.IPProtocolTCP), tcpOpts),
			want{l3: L3IPv4, et: 0x0800, src: "198.51.100.10", dst: "203.0.113.7", sport: 40000, dport: 443, proto: 6, flags: TCPSyn, l3off: 14, l4off: 34, payloadOff: 58, ttl: 61, tos: 0x28}},
		{"ipv4 options", build(t, eth(layers.EthernetTypeIPv4), opt, tcp(1, 2, false, true), payload),
			want{l3: L3IPv4, et: 0x0800, src: "198.51.100.10", dst: "203.0.113.7", sport: 1, dport: 2, proto: 6, flags: TCPAck, l3off: 14, l4off: 38, payloadOff: 58, ttl: 61, tos: 0x28}},
		{"ipv4 udp", build(t, eth(layers.EthernetTypeIPv4), ip4("10.1.2.3", "203.0.113.7", layers.IPProtocolUDP), udp(5353, 53), payload),
			want{l3: L3IPv4, et: 0x0800, src: "10.1.2.3", dst: "203.0.113.7", sport: 5353, dport: 53, proto: 17, l3off: 14, l4off: 34, payloadOff: 42, ttl: 61, tos: 0x28}},
		{"ipv4 icmp echo", build(t, eth(layers.EthernetTypeIPv4), ip4("10.1.2.3", "203.0.113.7", layers.IPProtocolICMPv4), &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(8, 0), Id: 9, Seq: 1}, payload),
			want{l3: L3IPv4, et: 0x0800, src: "10.1.2.3", dst: "203.0.113.7", proto: 1, icmpType: 8, l3off: 14, l4off: 34, payloadOff: 42, ttl: 61, tos: 0x28}},
		{"802.1Q", build(t, eth(layers.EthernetTypeDot1Q), &layers.Dot1Q{VLANIdentifier: 100, Type: layers.EthernetTypeIPv4}, ip4("198.51.100.10", "203.0.113.7", layers.IPProtocolTCP), tcp(3, 4, true, false)),
			want{l3: L3IPv4, et: 0x0800, vlans: 1, src: "198.51.100.10", dst: "203.0.113.7", sport: 3, dport: 4, proto: 6, flags: TCPSyn, l3off: 18, l4off: 38, payloadOff: 58, ttl: 61, tos: 0x28}},
		{"QinQ", build(t, eth(layers.EthernetTypeQinQ), &layers.Dot1Q{VLANIdentifier: 200, Type: layers.EthernetTypeDot1Q}, &layers.Dot1Q{VLANIdentifier: 100, Type: layers.EthernetTypeIPv6}, ip6("2001:db8::1", "2001:db8::7", layers.IPProtocolTCP), tcp(5, 6, true, false)),
			want{l3: L3IPv6, et: 0x86dd, vlans: 2, src: "2001:db8::1", dst: "2001:db8::7", sport: 5, dport: 6, proto: 6, flags: TCPSyn, l3off: 22, l4off: 62, payloadOff: 82, ttl: 33, tos: 0x48}},
		{"ipv4 first fragment", build(t, eth(layers.EthernetTypeIPv4), frag1, udp(1000, 2000), payload),
			want{l3: L3IPv4, et: 0x0800, src: "198.51.100.10", dst: "203.0.113.7", proto: 17, l3off: 14, l4off: 34, payloadOff: 42, frag: true, more: true, ttl: 61, tos: 0x28}},
		{"ipv4 later fragment", build(t, eth(layers.EthernetTypeIPv4), frag2, payload),
			want{l3: L3IPv4, et: 0x0800, src: "198.51.100.10", dst: "203.0.113.7", proto: 17, l3off: 14, l4off: 34, payloadOff: 34, frag: true, fragOff: 1480, ttl: 61, tos: 0x28}},
		{"ipv6 tcp", build(t, eth(layers.EthernetTypeIPv6), ip6("2001:db8::1", "2001:db8:ffff::7", layers.IPProtocolTCP), tcp(40000, 80, false, true), payload),
			want{l3: L3IPv6, et: 0x86dd, src: "2001:db8::1", dst: "2001:db8:ffff::7", sport: 40000, dport: 80, proto: 6, flags: TCPAck, l3off: 14, l4off: 54, payloadOff: 74, ttl: 33, tos: 0x48}},
		{"ipv6 ext chain", build(t, eth(layers.EthernetTypeIPv6), ip6("2001:db8::1", "2001:db8::7", layers.IPProtocolIPv6HopByHop),
			&rawExt{next: layers.IPProtocolIPv6Destination, body: make([]byte, 6)},
			&rawExt{next: layers.IPProtocolIPv6Routing, body: make([]byte, 14)},
			&rawExt{next: layers.IPProtocolUDP, body: []byte{0, 0, 0, 0, 0, 0}},
			udp(7, 8), payload),
			want{l3: L3IPv6, et: 0x86dd, src: "2001:db8::1", dst: "2001:db8::7", sport: 7, dport: 8, proto: 17, l3off: 14, l4off: 54 + 8 + 16 + 8, payloadOff: 54 + 32 + 8, ttl: 33, tos: 0x48}},
		{"ipv6 first fragment", build(t, eth(layers.EthernetTypeIPv6), ip6("2001:db8::1", "2001:db8::7", layers.IPProtocolIPv6Fragment),
			&rawFrag{next: layers.IPProtocolTCP, more: true, id: 0xdeadbeef}, tcp(9, 10, true, false)),
			want{l3: L3IPv6, et: 0x86dd, src: "2001:db8::1", dst: "2001:db8::7", proto: 6, flags: TCPSyn, l3off: 14, l4off: 62, payloadOff: 82, frag: true, more: true, ttl: 33, tos: 0x48}},
		{"ipv6 later fragment", build(t, eth(layers.EthernetTypeIPv6), ip6("2001:db8::1", "2001:db8::7", layers.IPProtocolIPv6Fragment),
			&rawFrag{next: layers.IPProtocolTCP, offset: 100, id: 1}, payload),
			want{l3: L3IPv6, et: 0x86dd, src: "2001:db8::1", dst: "2001:db8::7", proto: 6, l3off: 14, l4off: 62, payloadOff: 62, frag: true, fragOff: 800, ttl: 33, tos: 0x48}},
		// RFC 6946: an atomic fragment (offset 0, M clear) is the whole
		// packet: its ports are in the tuple, it is not a fragment.
		{"ipv6 atomic fragment", build(t, eth(layers.EthernetTypeIPv6), ip6("2001:db8::1", "2001:db8::7", layers.IPProtocolIPv6Fragment),
			&rawFrag{next: layers.IPProtocolTCP, id: 7}, tcp(9, 10, false, true), payload),
			want{l3: L3IPv6, et: 0x86dd, src: "2001:db8::1", dst: "2001:db8::7", sport: 9, dport: 10, proto: 6, flags: TCPAck, l3off: 14, l4off: 62, payloadOff: 82, ttl: 33, tos: 0x48}},
		{"icmpv6 echo", build(t, eth(layers.EthernetTypeIPv6), ip6("2001:db8::1", "2001:db8::7", layers.IPProtocolICMPv6), &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(128, 0)}, &layers.ICMPv6Echo{Identifier: 1}),
			want{l3: L3IPv6, et: 0x86dd, src: "2001:db8::1", dst: "2001:db8::7", proto: 58, icmpType: 128, l3off: 14, l4off: 54, payloadOff: 62, ttl: 33, tos: 0x48}},
		{"arp", build(t, eth(layers.EthernetTypeARP), &layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4, Operation: 1,
			SourceHwAddress: macA, SourceProtAddress: []byte{10, 0, 0, 1}, DstHwAddress: make([]byte, 6), DstProtAddress: []byte{10, 0, 0, 2}}),
			want{l3: L3Other, et: 0x0806, l3off: 14}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Ethernet padding past the IP packet must be ignored.
			frame := append(tc.frame, make([]byte, 17)...)
			var p Parsed
			if r := Parse(frame, &p); r != OK {
				t.Fatalf("Parse = %v", r)
			}
			w := tc.w
			if p.L3 != w.l3 || p.EtherType != w.et || int(p.NumVLANs) != w.vlans {
				t.Errorf("L3 %v ethertype %#x vlans %d, want %v %#x %d", p.L3, p.EtherType, p.NumVLANs, w.l3, w.et, w.vlans)
			}
			if int(p.L3Off) != w.l3off {
				t.Errorf("L3Off %d, want %d", p.L3Off, w.l3off)
			}
			if w.l3 == L3Other {
				return
			}
			wt, ok := tupleOf(w.src, w.dst, w.sport, w.dport, w.proto)
			if !ok {
				t.Fatal("bad test tuple")
			}
			if p.Tuple != wt {
				t.Errorf("tuple %v, want %v", p.Tuple, wt)
			}
			if int(p.L4Off) != w.l4off || int(p.PayloadOff) != w.payloadOff {
				t.Errorf("L4Off %d PayloadOff %d, want %d %d", p.L4Off, p.PayloadOff, w.l4off, w.payloadOff)
			}
			if p.TCPFlags != w.flags || p.Proto != w.proto {
				t.Errorf("flags %#x proto %d, want %#x %d", p.TCPFlags, p.Proto, w.flags, w.proto)
			}
			if p.Fragment != w.frag || p.MoreFragments != w.more || p.FragOffset != w.fragOff {
				t.Errorf("frag %v more %v off %d, want %v %v %d", p.Fragment, p.MoreFragments, p.FragOffset, w.frag, w.more, w.fragOff)
			}
			if p.ICMPType != w.icmpType || p.ICMPCode != w.icmpCo {
				t.Errorf("icmp %d/%d, want %d/%d", p.ICMPType, p.ICMPCode, w.icmpType, w.icmpCo)
			}
			if p.TTL != w.ttl || p.TOS != w.tos {
				t.Errorf("ttl %d tos %#x, want %d %#x", p.TTL, p.TOS, w.ttl, w.tos)
			}
			if want := ipLenByGopacket(t, tc.frame); int(p.IPLen) != want {
				t.Errorf("IPLen %d, gopacket says %d", p.IPLen, want)
			}
		})
	}
}

// ipLenByGopacket is the IP packet's length as gopacket decodes it
// (gopacket pads short Ethernet frames to 60 bytes, so the frame length
// does not tell).
func ipLenByGopacket(t testing.TB, frame []byte) int {
	pk := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	switch ip := pk.NetworkLayer().(type) {
	case *layers.IPv4:
		return int(ip.Length)
	case *layers.IPv6:
		return 40 + int(ip.Length)
	}
	t.Fatalf("gopacket finds no IP layer in %x", frame)
	return 0
}

func tupleOf(src, dst string, sp, dp uint16, proto uint8) (ft flowTuple, ok bool) {
	return flowTupleFrom(netip.MustParseAddr(src), netip.MustParseAddr(dst), sp, dp, proto)
}

func TestParseMalformed(t *testing.T) {
	good4 := build(t, eth(layers.EthernetTypeIPv4), ip4("198.51.100.10", "203.0.113.7", layers.IPProtocolTCP), tcp(1, 2, true, false))
	good6 := build(t, eth(layers.EthernetTypeIPv6), ip6("2001:db8::1", "2001:db8::7", layers.IPProtocolUDP), udp(1, 2))
	mod := func(b []byte, f func([]byte)) []byte {
		c := append([]byte(nil), b...)
		f(c)
		return c
	}
	threeTags := build(t, eth(layers.EthernetTypeDot1Q), &layers.Dot1Q{Type: layers.EthernetTypeDot1Q}, &layers.Dot1Q{Type: layers.EthernetTypeDot1Q}, &layers.Dot1Q{Type: layers.EthernetTypeIPv4},
		ip4("1.2.3.4", "5.6.7.8", layers.IPProtocolTCP), tcp(1, 2, true, false))
	// Nine destination-options headers in a row.
	var exts []gopacket.SerializableLayer
	exts = append(exts, eth(layers.EthernetTypeIPv6), ip6("2001:db8::1", "2001:db8::7", layers.IPProtocolIPv6Destination))
	for i := 0; i < 9; i++ {
		exts = append(exts, &rawExt{next: layers.IPProtocolIPv6Destination, body: make([]byte, 6)})
	}
	manyExt := build(t, exts...)
	frag8 := ip4("198.51.100.10", "203.0.113.7", layers.IPProtocolTCP)
	frag8.FragOffset = 1
	cases := []struct {
		name  string
		frame []byte
		want  Reason
	}{
		{"empty", nil, TruncatedEthernet},
		{"13 bytes", good4[:13], TruncatedEthernet},
		{"vlan cut", mod(good4[:16], func(b []byte) { b[12], b[13] = 0x81, 0 }), TruncatedVLAN},
		{"three vlan tags", threeTags, TooManyVLANs},
		{"ipv4 cut", good4[:30], TruncatedIPv4},
		{"ipv4 version 6", mod(good4, func(b []byte) { b[14] = 0x65 }), BadIPv4Version},
		{"ipv4 ihl 4", mod(good4, func(b []byte) { b[14] = 0x44 }), BadIPv4HeaderLen},
		{"ipv4 ihl beyond frame", mod(good4[:40], func(b []byte) { b[14] = 0x4f }), TruncatedIPv4},
		{"ipv4 total len beyond frame", mod(good4, func(b []byte) { binary.BigEndian.PutUint16(b[16:], 1000) }), BadIPv4TotalLen},
		{"ipv4 total len below ihl", mod(good4, func(b []byte) { binary.BigEndian.PutUint16(b[16:], 12) }), BadIPv4TotalLen},
		{"tcp cut", mod(good4[:44], func(b []byte) { binary.BigEndian.PutUint16(b[16:], 30) }), TruncatedTCP},
		{"tcp data offset 4", mod(good4, func(b []byte) { b[34+12] = 0x40 }), TruncatedTCP},
		{"tcp data offset beyond packet", mod(good4, func(b []byte) { b[34+12] = 0xf0 }), TruncatedTCP},
		{"tcp fragment at offset 8", build(t, eth(layers.EthernetTypeIPv4), frag8, gopacket.Payload(make([]byte, 16))), BadFragment},
		{"ipv6 cut", good6[:40], TruncatedIPv6},
		{"ipv6 version 4", mod(good6, func(b []byte) { b[14] = 0x40 }), BadIPv6Version},
		{"ipv6 payload len beyond frame", mod(good6, func(b []byte) { binary.BigEndian.PutUint16(b[18:], 100) }), BadIPv6PayloadLen},
		{"udp cut", mod(good6[:58], func(b []byte) { binary.BigEndian.PutUint16(b[18:], 4) }), TruncatedUDP},
		{"udp len 7", mod(good6, func(b []byte) { binary.BigEndian.PutUint16(b[54+4:], 7) }), BadUDPLen},
		{"udp len beyond ip", mod(good6, func(b []byte) { binary.BigEndian.PutUint16(b[54+4:], 9) }), BadUDPLen},
		{"ext header cut", mod(good6, func(b []byte) { b[20] = 0; /* hop-by-hop */ b[55] = 5 /* 48 bytes */ }), TruncatedExtHeader},
		{"too many ext headers", manyExt, TooManyExtHeaders},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var p Parsed
			if r := Parse(tc.frame, &p); r != tc.want {
				t.Errorf("Parse = %v, want %v", r, tc.want)
			}
		})
	}
}

// Every prefix of a valid frame is either parsed or rejected with a reason;
// none panics, and a truncated IP packet is never reported OK.
func TestParseEveryTruncation(t *testing.T) {
	frames := [][]byte{
		build(t, eth(layers.EthernetTypeIPv4), ip4("198.51.100.10", "203.0.113.7", layers.IPProtocolTCP), tcp(1, 2, true, false)),
		build(t, eth(layers.EthernetTypeIPv6), ip6("2001:db8::1", "2001:db8::7", layers.IPProtocolIPv6HopByHop), &rawExt{next: layers.IPProtocolUDP, body: make([]byte, 6)}, udp(1, 2)),
	}
	for _, f := range frames {
		end := 14 + ipLenByGopacket(t, f)
		for n := 0; n < end; n++ {
			var p Parsed
			if r := Parse(f[:n], &p); r == OK && p.L3 != L3Other {
				t.Errorf("frame cut to %d of %d bytes parsed OK", n, len(f))
			}
		}
	}
}

func TestParseAllocatesNothing(t *testing.T) {
	f := build(t, eth(layers.EthernetTypeIPv6), ip6("2001:db8::1", "2001:db8::7", layers.IPProtocolTCP), tcp(1, 2, true, false))
	var p Parsed
	if n := testing.AllocsPerRun(1000, func() { Parse(f, &p) }); n != 0 {
		t.Fatalf("Parse allocates %v times per call", n)
	}
}

func BenchmarkParse(b *testing.B) {
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"ipv4-tcp", build(b, eth(layers.EthernetTypeIPv4), ip4("198.51.100.10", "203.0.113.7", layers.IPProtocolTCP), tcp(40000, 80, true, false))},
		{"ipv6-tcp", build(b, eth(layers.EthernetTypeIPv6), ip6("2001:db8::1", "2001:db8::7", layers.IPProtocolTCP), tcp(40000, 80, false, true))},
		{"vlan-ipv4-udp", build(b, eth(layers.EthernetTypeDot1Q), &layers.Dot1Q{VLANIdentifier: 100, Type: layers.EthernetTypeIPv4}, ip4("198.51.100.10", "203.0.113.7", layers.IPProtocolUDP), udp(1, 2))},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var p Parsed
			b.ReportAllocs()
			b.SetBytes(int64(len(tc.frame)))
			for b.Loop() {
				if Parse(tc.frame, &p) != OK {
					b.Fatal("parse failed")
				}
			}
		})
	}
}

// TestTCPFlags: combinations no TCP stack sends are refused as BadTCPFlags,
// over IPv4 and IPv6 and in a first fragment; the ordinary ones (and the
// ECN bits on a SYN, RFC 3168 6.1.1) pass.
func TestTCPFlags(t *testing.T) {
	const (
		fin, syn, rst, psh, ack, urg, ece, cwr = 1, 2, 4, 8, 16, 32, 64, 128
	)
	for _, tc := range []struct {
		name  string
		flags uint8
		want  Reason
	}{
		{"syn", syn, OK},
		{"syn-ack", syn | ack, OK},
		{"syn-ece-cwr", syn | ece | cwr, OK},
		{"ack", ack, OK},
		{"psh-ack", psh | ack, OK},
		{"fin-ack", fin | ack, OK},
		{"fin-psh-ack", fin | psh | ack, OK},
		{"fin-psh-urg-ack", fin | psh | urg | ack, OK},
		{"urg-ack", urg | ack, OK},
		{"rst", rst, OK},
		{"rst-ack", rst | ack, OK},
		{"syn-rst", syn | rst, BadTCPFlags},
		{"syn-rst-ack", syn | rst | ack, BadTCPFlags},
		{"syn-fin", syn | fin, BadTCPFlags},
		{"syn-fin-ack", syn | fin | ack, BadTCPFlags},
		{"null", 0, BadTCPFlags},
		{"null-ecn", ece | cwr, BadTCPFlags},
		{"xmas", fin | psh | urg, BadTCPFlags},
		{"all", 0xff, BadTCPFlags},
	} {
		mk := func() *layers.TCP {
			f := tc.flags
			return &layers.TCP{SrcPort: 40000, DstPort: 80, Window: 1000, Seq: 7,
				FIN: f&fin != 0, SYN: f&syn != 0, RST: f&rst != 0, PSH: f&psh != 0, ACK: f&ack != 0, URG: f&urg != 0, ECE: f&ece != 0, CWR: f&cwr != 0}
		}
		frames := map[string][]byte{
			"v4": build(t, eth(layers.EthernetTypeIPv4), ip4("198.51.100.10", "203.0.113.7", layers.IPProtocolTCP), mk()),
			"v6": build(t, eth(layers.EthernetTypeIPv6), ip6("2001:db8::1", "2001:db8::7", layers.IPProtocolTCP), mk()),
		}
		// A first fragment carries the flags too.
		f := build(t, eth(layers.EthernetTypeIPv4), ip4("198.51.100.10", "203.0.113.7", layers.IPProtocolTCP), mk(), gopacket.Payload(make([]byte, 16)))
		binary.BigEndian.PutUint16(f[14+6:], 0x2000) // MF, offset 0 (the header checksum is not checked)
		frames["v4-first-fragment"] = f
		for fam, fr := range frames {
			var p Parsed
			if got := Parse(fr, &p); got != tc.want {
				t.Errorf("%s %s (%#02x): %v, want %v", tc.name, fam, tc.flags, got, tc.want)
			}
		}
	}
}
