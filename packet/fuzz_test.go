package packet

import (
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// seedFrames are gopacket-built frames covering every path of the parser.
func seedFrames(t testing.TB) [][]byte {
	p := gopacket.Payload([]byte("0123456789abcdef"))
	frag := ip4("198.51.100.10", "203.0.113.7", layers.IPProtocolUDP)
	frag.FragOffset = 10
	return [][]byte{
		build(t, eth(layers.EthernetTypeIPv4), ip4("198.51.100.10", "203.0.113.7", layers.IPProtocolTCP), tcp(40000, 80, true, false), p),
		build(t, eth(layers.EthernetTypeIPv4), ip4("198.51.100.10", "203.0.113.7", layers.IPProtocolUDP), udp(1, 2), p),
		build(t, eth(layers.EthernetTypeIPv4), frag, p),
		build(t, eth(layers.EthernetTypeIPv4), ip4("192.0.2.1", "203.0.113.7", layers.IPProtocolICMPv4), &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(3, 4)},
			gopacket.Payload(build(t, ip4("203.0.113.7", "198.51.100.10", layers.IPProtocolTCP), tcp(80, 40000, true, true)))),
		build(t, eth(layers.EthernetTypeDot1Q), &layers.Dot1Q{VLANIdentifier: 7, Type: layers.EthernetTypeIPv6}, ip6("2001:db8::1", "2001:db8::7", layers.IPProtocolTCP), tcp(1, 2, false, true), p),
		build(t, eth(layers.EthernetTypeIPv6), ip6("2001:db8::1", "2001:db8::7", layers.IPProtocolIPv6HopByHop), &rawExt{next: layers.IPProtocolIPv6Fragment, body: make([]byte, 6)},
			&rawFrag{next: layers.IPProtocolUDP, more: true, id: 3}, udp(1, 2), p),
		build(t, eth(layers.EthernetTypeIPv6), ip6("2001:db8:1::1", "2001:db8::7", layers.IPProtocolICMPv6), &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(2, 0)},
			gopacket.Payload(append([]byte{0, 0, 5, 0}, build(t, ip6("2001:db8::7", "2001:db8::1", layers.IPProtocolUDP), udp(53, 1))...))),
		build(t, eth(layers.EthernetTypeARP), p),
	}
}

// FuzzParse checks that Parse never panics, that every offset it reports
// lies inside the frame in order, and that for frames gopacket also decodes
// the addresses and ports agree with gopacket's.
func FuzzParse(f *testing.F) {
	for _, fr := range seedFrames(f) {
		f.Add(fr)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		var p Parsed
		r := Parse(frame, &p)
		if r >= numReasons {
			t.Fatalf("unknown reason %d", r)
		}
		if r != OK {
			return
		}
		if int(p.L3Off) > len(frame) {
			t.Fatalf("L3Off %d beyond frame of %d", p.L3Off, len(frame))
		}
		if p.L3 == L3Other {
			return
		}
		end := int(p.L3Off) + int(p.IPLen)
		if !(p.L3Off <= p.L4Off && p.L4Off <= p.PayloadOff && int(p.PayloadOff) <= end && end <= len(frame)) {
			t.Fatalf("offsets out of order: l3 %d l4 %d payload %d end %d len %d", p.L3Off, p.L4Off, p.PayloadOff, end, len(frame))
		}
		if p.Tuple.Proto != p.Proto || p.Tuple.V6 != (p.L3 == L3IPv6) {
			t.Fatalf("tuple %v disagrees with proto %d / l3 %v", p.Tuple, p.Proto, p.L3)
		}
		if p.Fragment && (p.Tuple.SrcPort != 0 || p.Tuple.DstPort != 0) {
			t.Fatalf("fragment with ports in tuple %v", p.Tuple)
		}
		var q flowTuple
		_ = ParseICMPError(frame, &p, &q)

		// Cross-check with gopacket where it decodes the network layer.
		pk := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.NoCopy)
		if pk.ErrorLayer() != nil {
			return
		}
		var src, dst netip.Addr
		switch ip := pk.NetworkLayer().(type) {
		case *layers.IPv4:
			src, _ = netip.AddrFromSlice(ip.SrcIP.To4())
			dst, _ = netip.AddrFromSlice(ip.DstIP.To4())
		case *layers.IPv6:
			src, _ = netip.AddrFromSlice(ip.SrcIP)
			dst, _ = netip.AddrFromSlice(ip.DstIP)
		default:
			return
		}
		if src != p.Tuple.SrcAddr() || dst != p.Tuple.DstAddr() {
			t.Fatalf("addresses %v -> %v, gopacket %v -> %v", p.Tuple.SrcAddr(), p.Tuple.DstAddr(), src, dst)
		}
		if p.Fragment {
			return
		}
		switch l4 := pk.TransportLayer().(type) {
		case *layers.TCP:
			if p.Proto == ProtoTCP && (uint16(l4.SrcPort) != p.Tuple.SrcPort || uint16(l4.DstPort) != p.Tuple.DstPort) {
				t.Fatalf("tcp ports %d->%d, gopacket %d->%d", p.Tuple.SrcPort, p.Tuple.DstPort, l4.SrcPort, l4.DstPort)
			}
		case *layers.UDP:
			if p.Proto == ProtoUDP && (uint16(l4.SrcPort) != p.Tuple.SrcPort || uint16(l4.DstPort) != p.Tuple.DstPort) {
				t.Fatalf("udp ports %d->%d, gopacket %d->%d", p.Tuple.SrcPort, p.Tuple.DstPort, l4.SrcPort, l4.DstPort)
			}
		}
	})
}
