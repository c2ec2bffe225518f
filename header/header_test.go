package header_test

import (
	"bytes"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/header"
)

// build serializes layers with gopacket, fixing lengths and checksums, so
// the expected values come from an encoder independent of package header.
func build(t testing.TB, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
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
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, ls...); err != nil {
		t.Fatalf("serialize: %v", err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

var (
	macA = net.HardwareAddr{0x02, 0, 0, 0, 0, 1}
	macB = net.HardwareAddr{0x02, 0, 0, 0, 0, 2}
)

func TestEthernet(t *testing.T) {
	f := build(t, &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: layers.EthernetTypeIPv6}, gopacket.Payload(make([]byte, 46)))
	e := header.Ethernet(f)
	if d, s := e.Destination(), e.Source(); !bytes.Equal(d[:], macB) || !bytes.Equal(s[:], macA) || e.Type() != header.EtherTypeIPv6 {
		t.Fatalf("dst %x src %x type %#x", d, s, e.Type())
	}
	g := make([]byte, header.EthernetMinimumSize)
	header.Ethernet(g).Encode([6]byte(macB), [6]byte(macA), header.EtherTypeIPv6)
	if !bytes.Equal(g, f[:14]) {
		t.Fatalf("Encode = %x, want %x", g, f[:14])
	}
}

func TestIPv4(t *testing.T) {
	tests := []struct {
		name string
		ip   layers.IPv4
	}{
		{"plain", layers.IPv4{Version: 4, TOS: 0xb8, Id: 0x1234, Flags: layers.IPv4DontFragment, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: net.IP{198, 51, 100, 7}, DstIP: net.IP{203, 0, 113, 10}}},
		{"first fragment", layers.IPv4{Version: 4, Id: 7, Flags: layers.IPv4MoreFragments, TTL: 1, Protocol: layers.IPProtocolUDP, SrcIP: net.IP{10, 0, 0, 1}, DstIP: net.IP{10, 0, 0, 2}}},
		{"later fragment", layers.IPv4{Version: 4, FragOffset: 185, TTL: 255, Protocol: layers.IPProtocolUDP, SrcIP: net.IP{255, 255, 255, 255}, DstIP: net.IP{0, 0, 0, 0}}},
		{"options", layers.IPv4{Version: 4, TTL: 3, Protocol: layers.IPProtocolICMPv4, SrcIP: net.IP{1, 2, 3, 4}, DstIP: net.IP{5, 6, 7, 8},
			Options: []layers.IPv4Option{{OptionType: 7, OptionLength: 7, OptionData: []byte{4, 0, 0, 0, 0}}, {OptionType: 0}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ipl := tt.ip
			b := header.IPv4(build(t, &ipl, gopacket.Payload("0123456789abcdef")))
			var d layers.IPv4
			if err := d.DecodeFromBytes(b, gopacket.NilDecodeFeedback); err != nil {
				t.Fatal(err)
			}
			if b.Version() != 4 || b.HeaderLength() != int(d.IHL)*4 || b.TOS() != d.TOS || b.TotalLength() != d.Length ||
				b.ID() != d.Id || b.DontFragment() != (d.Flags&layers.IPv4DontFragment != 0) ||
				b.MoreFragments() != (d.Flags&layers.IPv4MoreFragments != 0) || b.FragmentOffset() != d.FragOffset*8 ||
				b.IsFragment() != (d.Flags&layers.IPv4MoreFragments != 0 || d.FragOffset != 0) ||
				b.TTL() != d.TTL || b.Protocol() != uint8(d.Protocol) || b.Checksum() != d.Checksum {
				t.Fatalf("accessors disagree with gopacket's %+v", d)
			}
			if s, ds := b.SourceAddress(), b.DestinationAddress(); !bytes.Equal(s[:], d.SrcIP.To4()) || !bytes.Equal(ds[:], d.DstIP.To4()) {
				t.Fatalf("addresses %v %v, want %v %v", s, ds, d.SrcIP, d.DstIP)
			}
			if got := b.CalculateChecksum(); got != d.Checksum {
				t.Fatalf("CalculateChecksum = %#04x, gopacket computed %#04x", got, d.Checksum)
			}
			if !b.IsChecksumValid() {
				t.Fatal("IsChecksumValid = false on gopacket's header")
			}
			b[header.IPv4TTLOffset]--
			if b.IsChecksumValid() {
				t.Fatal("IsChecksumValid = true after TTL changed")
			}
			b.UpdateChecksum()
			if !b.IsChecksumValid() {
				t.Fatal("UpdateChecksum left an invalid checksum")
			}
		})
	}
}

// TestIPv4Setters writes a header with the setters and checks gopacket
// reads back the same fields and checksum.
func TestIPv4Setters(t *testing.T) {
	b := header.IPv4(make([]byte, 28))
	b.SetHeaderLength(header.IPv4MinimumSize)
	b.SetTOS(0x10)
	b.SetTotalLength(28)
	b.SetID(0xbeef)
	b.SetFlagsFragmentOffset(header.IPv4FlagDF)
	b.SetTTL(9)
	b.SetProtocol(header.ProtoUDP)
	b.SetSourceAddress([4]byte{192, 0, 2, 1})
	b.SetDestinationAddress([4]byte{192, 0, 2, 2})
	b.SwapAddresses()
	b.UpdateChecksum()
	sum := header.IPv4HeaderSum(0x10, 28, 0xbeef, header.IPv4FlagDF, 9, header.ProtoUDP) + b.AddressSum()
	if want := header.Checksum(nil, sum); b.Checksum() != want {
		t.Fatalf("checksum %#04x, from values %#04x", b.Checksum(), want)
	}
	p := gopacket.NewPacket(b, layers.LayerTypeIPv4, gopacket.Default)
	d, _ := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	if d == nil {
		t.Fatalf("gopacket: %v", p.ErrorLayer())
	}
	if d.TOS != 0x10 || d.Length != 28 || d.Id != 0xbeef || d.Flags != layers.IPv4DontFragment || d.TTL != 9 ||
		d.Protocol != layers.IPProtocolUDP || !d.SrcIP.Equal(net.IP{192, 0, 2, 2}) || !d.DstIP.Equal(net.IP{192, 0, 2, 1}) {
		t.Fatalf("gopacket read %+v", d)
	}
	// gopacket recomputes the checksum when serializing; it must agree.
	again := build(t, d, gopacket.Payload(b[20:]))
	if !bytes.Equal(again, b) {
		t.Fatalf("gopacket's serialization\n%x\nours\n%x", again, []byte(b))
	}
}

func TestIPv6(t *testing.T) {
	src := net.ParseIP("2001:db8:c::7")
	dst := net.ParseIP("2001:db8:f::10")
	ipl := layers.IPv6{Version: 6, TrafficClass: 0xb8, FlowLabel: 0xabcde, NextHeader: layers.IPProtocolTCP, HopLimit: 63, SrcIP: src, DstIP: dst}
	b := header.IPv6(build(t, &ipl, gopacket.Payload("0123456789")))
	if b.Version() != 6 || b.TrafficClass() != 0xb8 || b.FlowLabel() != 0xabcde || b.PayloadLength() != 10 ||
		b.NextHeader() != header.ProtoTCP || b.HopLimit() != 63 {
		t.Fatalf("accessors: tc %#x fl %#x plen %d nh %d hl %d", b.TrafficClass(), b.FlowLabel(), b.PayloadLength(), b.NextHeader(), b.HopLimit())
	}
	if s, d := b.SourceAddress(), b.DestinationAddress(); !bytes.Equal(s[:], src) || !bytes.Equal(d[:], dst) {
		t.Fatalf("addresses %x %x", s, d)
	}
	g := header.IPv6(make([]byte, 50))
	g.SetVersionTrafficClassFlowLabel(0xb8, 0xabcde)
	g.SetPayloadLength(10)
	g.SetNextHeader(header.ProtoTCP)
	g.SetHopLimit(63)
	g.SetSourceAddress([16]byte(dst))
	g.SetDestinationAddress([16]byte(src))
	g.SwapAddresses()
	copy(g[40:], "0123456789")
	if !bytes.Equal(g, b) {
		t.Fatalf("setters wrote\n%x\ngopacket\n%x", []byte(g), []byte(b))
	}
}

// TestTransportChecksums computes TCP, UDP and ICMPv6 checksums from the
// pseudo-header sums and compares them with gopacket's.
func TestTransportChecksums(t *testing.T) {
	v4 := func(p layers.IPProtocol) *layers.IPv4 {
		return &layers.IPv4{Version: 4, TTL: 64, Protocol: p, SrcIP: net.IP{198, 51, 100, 7}, DstIP: net.IP{203, 0, 113, 10}}
	}
	v6 := func(p layers.IPProtocol) *layers.IPv6 {
		return &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: p, SrcIP: net.ParseIP("2001:db8:c::7"), DstIP: net.ParseIP("2001:db8:f::10")}
	}
	tcp := func() *layers.TCP {
		return &layers.TCP{SrcPort: 40000, DstPort: 443, Seq: 1, Ack: 2, DataOffset: 5, ACK: true, PSH: true, Window: 502}
	}
	udp := func() *layers.UDP { return &layers.UDP{SrcPort: 5353, DstPort: 6080} }
	pay := gopacket.Payload("odd-length payload!")
	tests := []struct {
		name string
		v6   bool
		ls   []gopacket.SerializableLayer
	}{
		{"tcp4", false, []gopacket.SerializableLayer{v4(layers.IPProtocolTCP), tcp(), pay}},
		{"udp4", false, []gopacket.SerializableLayer{v4(layers.IPProtocolUDP), udp(), pay}},
		{"tcp6", true, []gopacket.SerializableLayer{v6(layers.IPProtocolTCP), tcp(), pay}},
		{"udp6", true, []gopacket.SerializableLayer{v6(layers.IPProtocolUDP), udp(), pay}},
		{"icmp6", true, []gopacket.SerializableLayer{v6(layers.IPProtocolICMPv6),
			&layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(layers.ICMPv6TypeEchoRequest, 0)}, pay}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := build(t, tt.ls...)
			var addr uint64
			var proto uint8
			var seg []byte
			if tt.v6 {
				ip := header.IPv6(b)
				addr, proto, seg = ip.AddressSum(), ip.NextHeader(), b[header.IPv6MinimumSize:]
			} else {
				ip := header.IPv4(b)
				addr, proto, seg = ip.AddressSum(), ip.Protocol(), b[ip.HeaderLength():]
			}
			var field int
			switch proto {
			case header.ProtoTCP:
				field = header.TCPChecksumOffset
			case header.ProtoUDP:
				field = header.UDPChecksumOffset
			default:
				field = header.ICMPChecksumOffset
			}
			want := uint16(seg[field])<<8 | uint16(seg[field+1])
			seg[field], seg[field+1] = 0, 0
			if got := header.Checksum(seg, header.PseudoHeaderSum(addr, proto, len(seg))); got != want {
				t.Fatalf("checksum %#04x, gopacket %#04x", got, want)
			}
		})
	}
}

func TestTransportAccessors(t *testing.T) {
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: net.IP{1, 1, 1, 1}, DstIP: net.IP{2, 2, 2, 2}}
	tl := &layers.TCP{SrcPort: 40000, DstPort: 443, Seq: 0xdeadbeef, Ack: 0xcafef00d, DataOffset: 5, SYN: true, ECE: true, Window: 64240}
	b := build(t, ip, tl)
	tcp := header.TCP(b[20:])
	if tcp.SourcePort() != 40000 || tcp.DestinationPort() != 443 || tcp.SequenceNumber() != 0xdeadbeef ||
		tcp.AckNumber() != 0xcafef00d || tcp.DataOffset() != 20 || tcp.Flags() != header.TCPFlagSyn|0x40 ||
		tcp.WindowSize() != 64240 {
		t.Fatalf("TCP accessors: %d %d %#x %#x %d %#x %d", tcp.SourcePort(), tcp.DestinationPort(), tcp.SequenceNumber(),
			tcp.AckNumber(), tcp.DataOffset(), tcp.Flags(), tcp.WindowSize())
	}
	if s, d := header.Ports(tcp); s != 40000 || d != 443 {
		t.Fatalf("Ports = %d, %d", s, d)
	}
	ip.Protocol = layers.IPProtocolUDP
	b = build(t, ip, &layers.UDP{SrcPort: 1234, DstPort: 6080}, gopacket.Payload("abc"))
	udp := header.UDP(b[20:])
	if udp.SourcePort() != 1234 || udp.DestinationPort() != 6080 || udp.Length() != 11 || udp.Checksum() == 0 {
		t.Fatalf("UDP accessors: %d %d %d %#x", udp.SourcePort(), udp.DestinationPort(), udp.Length(), udp.Checksum())
	}
	g := build(t, &layers.GRE{ChecksumPresent: true, Protocol: layers.EthernetTypeIPv6}, gopacket.Payload("xx"))
	if gre := header.GRE(g); gre.Flags()&header.GREFlagChecksum == 0 || gre.Flags()&header.GREVersionMask != 0 || gre.ProtocolType() != header.EtherTypeIPv6 {
		t.Fatalf("GRE flags %#x protocol %#x", gre.Flags(), gre.ProtocolType())
	}
}

func TestICMP(t *testing.T) {
	m := build(t, &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoRequest, 0), Id: 7, Seq: 9}, gopacket.Payload("ping"))
	if c := header.ICMPv4(m); c.Type() != header.ICMPv4EchoRequest || c.Code() != 0 {
		t.Fatalf("type %d code %d", c.Type(), c.Code())
	}
	// RFC 1624's incremental update must give what a full recomputation
	// (gopacket's) gives.
	header.SetICMPType(m, header.ICMPv4EchoReply)
	want := build(t, &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoReply, 0), Id: 7, Seq: 9}, gopacket.Payload("ping"))
	if !bytes.Equal(m, want) {
		t.Fatalf("SetICMPType:\n%x\nwant\n%x", m, want)
	}
	f := header.ICMPv4(make([]byte, 8))
	f.SetType(header.ICMPv4DstUnreachable)
	f.SetCode(header.ICMPv4FragNeededCode)
	f.SetRestOfHeader(1400)
	if f.MTU() != 1400 || !bytes.Equal(f, []byte{3, 4, 0, 0, 0, 0, 0x05, 0x78}) {
		t.Fatalf("frag needed %x", []byte(f))
	}
	s := header.ICMPv6(make([]byte, 8))
	s.SetType(header.ICMPv6PacketTooBig)
	s.SetMTU(1280)
	s.SetChecksum(0xabcd)
	if s.Type() != 2 || s.Code() != 0 || s.MTU() != 1280 || s.Checksum() != 0xabcd {
		t.Fatalf("packet too big %x", []byte(s))
	}
}
