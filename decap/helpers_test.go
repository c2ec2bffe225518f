package decap

import (
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// Test packets are built with gopacket, so the checks do not rest on this
// package's own idea of the header layouts.

var (
	lb4     = net.IP{192, 0, 2, 1}
	be4     = net.IP{192, 0, 2, 21}
	lb6     = net.ParseIP("2001:db8:1::1")
	be6     = net.ParseIP("2001:db8:1::21")
	client4 = net.IP{198, 51, 100, 10}
	vip4    = net.IP{203, 0, 113, 7}
	client6 = net.ParseIP("2001:db8:c::10")
	vip6    = net.ParseIP("2001:db8:7::7")
)

func serialize(t testing.TB, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatalf("serialize: %v", err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// innerSYN is a client's TCP SYN to the VIP with a few payload bytes, as
// the LB receives and tunnels it.
func innerSYN(t testing.TB, v6 bool) []byte {
	tcp := &layers.TCP{SrcPort: 40000, DstPort: 80, Seq: 1000, SYN: true, Window: 64240}
	payload := gopacket.Payload("hello")
	if v6 {
		ip := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolTCP, SrcIP: client6, DstIP: vip6}
		tcp.SetNetworkLayerForChecksum(ip)
		return serialize(t, ip, tcp, payload)
	}
	ip := &layers.IPv4{Version: 4, TTL: 64, Id: 77, Flags: layers.IPv4DontFragment, Protocol: layers.IPProtocolTCP, SrcIP: client4, DstIP: vip4}
	tcp.SetNetworkLayerForChecksum(ip)
	return serialize(t, ip, tcp, payload)
}

func innerV6(inner []byte) bool { return len(inner) > 0 && inner[0]>>4 == 6 }

// outerIP is the outer header toward the backend for protocol proto.
func outerIP(v6 bool, proto layers.IPProtocol) gopacket.NetworkLayer {
	if v6 {
		return &layers.IPv6{Version: 6, HopLimit: 64, FlowLabel: 0x12345, NextHeader: proto, SrcIP: lb6, DstIP: be6}
	}
	return &layers.IPv4{Version: 4, TTL: 64, Flags: layers.IPv4DontFragment, Protocol: proto, SrcIP: lb4, DstIP: be4}
}

func greProto(inner []byte) layers.EthernetType {
	if innerV6(inner) {
		return layers.EthernetTypeIPv6
	}
	return layers.EthernetTypeIPv4
}

func ipipProto(inner []byte) layers.IPProtocol {
	if innerV6(inner) {
		return layers.IPProtocolIPv6
	}
	return layers.IPProtocolIPv4
}

// greWith is inner in GRE with the given header fields.
func greWith(t testing.TB, outerV6 bool, g *layers.GRE, inner []byte) []byte {
	return serialize(t, outerIP(outerV6, layers.IPProtocolGRE).(gopacket.SerializableLayer), g, gopacket.Payload(inner))
}

// gre is inner in GRE exactly as package encap writes it.
func gre(t testing.TB, outerV6 bool, inner []byte) []byte {
	return greWith(t, outerV6, &layers.GRE{Protocol: greProto(inner)}, inner)
}

func ipip(t testing.TB, outerV6 bool, inner []byte) []byte {
	return serialize(t, outerIP(outerV6, ipipProto(inner)).(gopacket.SerializableLayer), gopacket.Payload(inner))
}

// gueHdr is a variant-0 GUE header without optional fields.
func gueHdr(inner []byte) []byte { return []byte{0, byte(ipipProto(inner)), 0, 0} }

// udpWith is payload in UDP to dport, with a correct checksum.
func udpWith(t testing.TB, outerV6 bool, dport uint16, payload []byte) []byte {
	ip := outerIP(outerV6, layers.IPProtocolUDP)
	udp := &layers.UDP{SrcPort: 51000, DstPort: layers.UDPPort(dport)}
	if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	return serialize(t, ip.(gopacket.SerializableLayer), udp, gopacket.Payload(payload))
}

// gue is inner in GUE to port 6080, as package encap writes it.
func gue(t testing.TB, outerV6 bool, inner []byte) []byte {
	return udpWith(t, outerV6, DefaultGUEPort, cat(gueHdr(inner), inner))
}

func cat(bs ...[]byte) []byte {
	var out []byte
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}

// outerLen is the length of the outer IP header gopacket wrote (no
// extension headers).
func outerLen(pkt []byte) int {
	if pkt[0]>>4 == 6 {
		return 40
	}
	return int(pkt[0]&0x0f) * 4
}

// patch returns a copy of b with f applied.
func patch(b []byte, f func(b []byte)) []byte {
	b = append([]byte(nil), b...)
	f(b)
	return b
}

// hopByHop and destOpts are 8-byte IPv6 extension headers holding one PadN
// option, followed by next.
func hopByHop(next layers.IPProtocol) *layers.IPv6HopByHop {
	h := &layers.IPv6HopByHop{Options: []*layers.IPv6HopByHopOption{{OptionType: 1, OptionData: make([]byte, 4)}}}
	h.NextHeader = next
	return h
}

func destOpts(next layers.IPProtocol) *layers.IPv6Destination {
	d := &layers.IPv6Destination{Options: []*layers.IPv6DestinationOption{{OptionType: 1, OptionData: make([]byte, 4)}}}
	d.NextHeader = next
	return d
}
