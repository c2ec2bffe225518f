package encap

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/packet"
)

// Test addresses (documentation prefixes, RFC 5737 / RFC 3849).
var (
	client4  = netip.MustParseAddr("198.51.100.7")
	vip4     = netip.MustParseAddr("203.0.113.10")
	client6  = netip.MustParseAddr("2001:db8:c::7")
	vip6     = netip.MustParseAddr("2001:db8:f::10")
	lbSrc4   = netip.MustParseAddr("192.0.2.1")
	lbSrc6   = netip.MustParseAddr("2001:db8:1::1")
	backend4 = netip.MustParseAddr("10.0.0.5")
	backend6 = netip.MustParseAddr("2001:db8:b::5")

	routerMAC = [6]byte{0x02, 0, 0, 0, 0, 0xaa} // sent us the packet
	inMAC     = [6]byte{0x02, 0, 0, 0, 0, 0xbb} // our port, as the router addressed it
	nextHop   = [6]byte{0x02, 0, 0, 0, 0, 0xcc} // toward the backend
	portMAC   = [6]byte{0x02, 0, 0, 0, 0, 0xdd} // our port, as we send
)

const headroom = 128 // a DPDK mbuf's

// spec describes a test packet built with gopacket.
type spec struct {
	name    string
	v6      bool
	l4      string // "tcp", "udp", "udp0" (UDP without checksum), "icmp" (echo), "icmperr", "gre"
	vlans   int    // 802.1Q tags on the input frame
	opts    bool   // IPv4 options
	pad     int    // Ethernet padding after the IP packet
	payload int
	df      bool // IPv4 DF
	tos     uint8
	frag    bool // first fragment (IPv4 MF / IPv6 fragment header)
	fragOff uint16
	badL4   bool       // corrupt the transport checksum
	src     netip.Addr // client address (zero: client4 / client6)
}

func addrIP(a netip.Addr) net.IP { return net.IP(a.AsSlice()) }

// build serializes the frame s describes, checksums computed by gopacket.
func build(t testing.TB, s spec) []byte {
	t.Helper()
	var ls []gopacket.SerializableLayer
	eth := &layers.Ethernet{SrcMAC: routerMAC[:], DstMAC: inMAC[:], EthernetType: layers.EthernetTypeIPv4}
	if s.v6 {
		eth.EthernetType = layers.EthernetTypeIPv6
	}
	ls = append(ls, eth)
	if s.vlans > 0 {
		inner := eth.EthernetType
		eth.EthernetType = layers.EthernetTypeDot1Q
		for i := 0; i < s.vlans; i++ {
			next := layers.EthernetTypeDot1Q
			if i == s.vlans-1 {
				next = inner
			}
			ls = append(ls, &layers.Dot1Q{VLANIdentifier: uint16(100 + i), Type: next})
		}
	}
	var netl gopacket.NetworkLayer
	var proto layers.IPProtocol
	switch s.l4 {
	case "tcp":
		proto = layers.IPProtocolTCP
	case "udp", "udp0":
		proto = layers.IPProtocolUDP
	case "icmp", "icmperr":
		proto = layers.IPProtocolICMPv4
		if s.v6 {
			proto = layers.IPProtocolICMPv6
		}
	case "gre":
		proto = layers.IPProtocolGRE
	default:
		t.Fatalf("spec %q: l4 %q", s.name, s.l4)
	}
	if s.v6 {
		src := client6
		if s.src.IsValid() {
			src = s.src
		}
		ip := &layers.IPv6{Version: 6, TrafficClass: s.tos, FlowLabel: 0x12345, HopLimit: 57,
			NextHeader: proto, SrcIP: addrIP(src), DstIP: addrIP(vip6)}
		netl = ip
		ls = append(ls, ip)
		if s.frag {
			ip.NextHeader = layers.IPProtocolIPv6Fragment
			// gopacket cannot serialize a fragment header: write it (RFC 8200 §4.5).
			fh := []byte{uint8(proto), 0, 0, 0, 0, 0xab, 0xcd, 0xef}
			binary.BigEndian.PutUint16(fh[2:], s.fragOff&0xfff8|1) // M: more fragments
			ls = append(ls, gopacket.Payload(fh))
		}
	} else {
		src := client4
		if s.src.IsValid() {
			src = s.src
		}
		ip := &layers.IPv4{Version: 4, TOS: s.tos, Id: 0x1234, TTL: 57, Protocol: proto,
			SrcIP: addrIP(src), DstIP: addrIP(vip4), FragOffset: s.fragOff / 8}
		if s.df {
			ip.Flags |= layers.IPv4DontFragment
		}
		if s.frag {
			ip.Flags |= layers.IPv4MoreFragments
		}
		if s.opts {
			ip.Options = []layers.IPv4Option{{OptionType: 148, OptionLength: 4, OptionData: []byte{0, 0}}} // router alert
		}
		netl = ip
		ls = append(ls, ip)
	}
	payload := make([]byte, s.payload)
	for i := range payload {
		payload[i] = byte(i*7 + 3)
	}
	switch s.l4 {
	case "tcp":
		tcp := &layers.TCP{SrcPort: 40001, DstPort: 443, Seq: 1000, Ack: 2000, ACK: true, PSH: true, Window: 512}
		tcp.SetNetworkLayerForChecksum(netl)
		ls = append(ls, tcp)
	case "udp", "udp0":
		udp := &layers.UDP{SrcPort: 40001, DstPort: 53}
		udp.SetNetworkLayerForChecksum(netl)
		ls = append(ls, udp)
	case "icmp", "icmperr":
		if s.v6 {
			tc := layers.CreateICMPv6TypeCode(layers.ICMPv6TypeEchoRequest, 0)
			if s.l4 == "icmperr" {
				tc = layers.CreateICMPv6TypeCode(layers.ICMPv6TypeDestinationUnreachable, 3)
			}
			ic := &layers.ICMPv6{TypeCode: tc}
			ic.SetNetworkLayerForChecksum(netl)
			ls = append(ls, ic, gopacket.Payload([]byte{0, 1, 0, 2}))
		} else {
			tc := layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoRequest, 0)
			if s.l4 == "icmperr" {
				tc = layers.CreateICMPv4TypeCode(layers.ICMPv4TypeDestinationUnreachable, 3)
			}
			ls = append(ls, &layers.ICMPv4{TypeCode: tc, Id: 1, Seq: 2})
		}
	case "gre":
		ls = append(ls, &layers.GRE{Protocol: layers.EthernetTypeIPv4})
	}
	ls = append(ls, gopacket.Payload(payload))
	sb := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(sb, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatalf("spec %q: serialize: %v", s.name, err)
	}
	frame := append([]byte(nil), sb.Bytes()...)
	var p packet.Parsed
	if r := packet.Parse(frame, &p); r != packet.OK {
		t.Fatalf("spec %q: packet.Parse: %v", s.name, r)
	}
	if s.l4 == "udp0" {
		binary.BigEndian.PutUint16(frame[p.L4Off+6:], 0)
	}
	if s.badL4 {
		ck := int(p.L4Off) + 16 // TCP checksum
		if s.l4 != "tcp" {
			ck = int(p.L4Off) + 6
		}
		frame[ck] ^= 0x5a
	}
	for i := 0; i < s.pad; i++ {
		frame = append(frame, 0xee)
	}
	return frame
}

// load puts frame into a buffer behind headroom and parses it.
func load(t testing.TB, frame []byte, room int) (buf []byte, off, n int, p packet.Parsed) {
	t.Helper()
	buf = make([]byte, room+len(frame)+16)
	copy(buf[room:], frame)
	if r := packet.Parse(buf[room:room+len(frame)], &p); r != packet.OK {
		t.Fatalf("packet.Parse: %v", r)
	}
	return buf, room, len(frame), p
}

func newEnc(t testing.TB, mod func(*Config)) *Encapsulator {
	t.Helper()
	cfg := Config{SrcV4: lbSrc4, SrcV6: lbSrc6}
	if mod != nil {
		mod(&cfg)
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return e
}

func mustBackend(t testing.TB, e *Encapsulator, a netip.Addr) Backend {
	t.Helper()
	b, err := e.Backend(a)
	if err != nil {
		t.Fatalf("Backend(%s): %v", a, err)
	}
	return b
}

// refSum is a deliberately naive RFC 1071 sum over the concatenation of
// chunks, to check the package's checksums independently: a correct
// checksum makes the sum over everything it covers 0xffff.
func refSum(chunks ...[]byte) uint16 {
	var all []byte
	for _, c := range chunks {
		all = append(all, c...)
	}
	if len(all)%2 == 1 {
		all = append(all, 0)
	}
	var s uint32
	for i := 0; i < len(all); i += 2 {
		s += uint32(all[i])<<8 | uint32(all[i+1])
		if s > 0xffff {
			s = s&0xffff + 1
		}
	}
	return uint16(s)
}

// pseudo6 is an IPv6 pseudo-header (RFC 8200 §8.1).
func pseudo6(src, dst []byte, length int, nh uint8) []byte {
	b := append(append([]byte(nil), src...), dst...)
	b = binary.BigEndian.AppendUint32(b, uint32(length))
	return append(b, 0, 0, 0, nh)
}

// gopacketIPv4Checksum recomputes an IPv4 header checksum with gopacket.
func gopacketIPv4Checksum(t testing.TB, hdr []byte) uint16 {
	t.Helper()
	var ip layers.IPv4
	h := append([]byte(nil), hdr...)
	if err := ip.DecodeFromBytes(h, gopacket.NilDecodeFeedback); err != nil {
		t.Fatalf("decode IPv4 header: %v", err)
	}
	ip.Checksum = 0
	sb := gopacket.NewSerializeBuffer()
	if err := ip.SerializeTo(sb, gopacket.SerializeOptions{ComputeChecksums: true}); err != nil {
		t.Fatalf("serialize IPv4: %v", err)
	}
	return binary.BigEndian.Uint16(sb.Bytes()[10:])
}

// decode decodes a frame with gopacket and returns its layers.
func decode(b []byte) gopacket.Packet {
	return gopacket.NewPacket(append([]byte(nil), b...), layers.LayerTypeEthernet, gopacket.Default)
}

func equalBytes(t testing.TB, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Errorf("%s: got % x\nwant % x", what, got, want)
	}
}
