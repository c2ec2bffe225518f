package packet

import (
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

func TestParseICMPError(t *testing.T) {
	// The packet a backend sent (DSR: from the VIP) that a router could not
	// forward, quoted back to the VIP.
	orig4 := build(t, ip4("203.0.113.7", "198.51.100.10", layers.IPProtocolTCP), tcp(80, 40000, true, true), gopacket.Payload(make([]byte, 100)))
	orig6 := build(t, ip6("2001:db8::7", "2001:db8::1", layers.IPProtocolUDP), udp(53, 5353), gopacket.Payload(make([]byte, 100)))
	frag6 := build(t, ip6("2001:db8::7", "2001:db8::1", layers.IPProtocolIPv6Fragment), &rawFrag{next: layers.IPProtocolUDP, more: true, id: 5}, udp(53, 5353))
	later6 := build(t, ip6("2001:db8::7", "2001:db8::1", layers.IPProtocolIPv6Fragment), &rawFrag{next: layers.IPProtocolUDP, offset: 4, id: 5}, udp(53, 5353))
	cases := []struct {
		name     string
		frame    []byte
		want     Reason
		src, dst string
		sp, dp   uint16
		proto    uint8
	}{
		{"v4 frag needed", build(t, eth(layers.EthernetTypeIPv4), ip4("192.0.2.1", "203.0.113.7", layers.IPProtocolICMPv4),
			&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(3, 4), Seq: 1400}, gopacket.Payload(orig4[:28])),
			OK, "203.0.113.7", "198.51.100.10", 80, 40000, 6},
		{"v6 packet too big", build(t, eth(layers.EthernetTypeIPv6), ip6("2001:db8:1::1", "2001:db8::7", layers.IPProtocolICMPv6),
			&layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(2, 0)}, gopacket.Payload(append([]byte{0, 0, 5, 0x78}, orig6[:48]...))),
			OK, "2001:db8::7", "2001:db8::1", 53, 5353, 17},
		// A first fragment carries the ports: the flow's 5-tuple.
		{"v6 quoted first fragment", build(t, eth(layers.EthernetTypeIPv6), ip6("2001:db8:1::1", "2001:db8::7", layers.IPProtocolICMPv6),
			&layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(2, 0)}, gopacket.Payload(append([]byte{0, 0, 5, 0x78}, frag6...))),
			OK, "2001:db8::7", "2001:db8::1", 53, 5353, 17},
		// A later one does not: a 3-tuple.
		{"v6 quoted later fragment", build(t, eth(layers.EthernetTypeIPv6), ip6("2001:db8:1::1", "2001:db8::7", layers.IPProtocolICMPv6),
			&layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(2, 0)}, gopacket.Payload(append([]byte{0, 0, 5, 0x78}, later6...))),
			OK, "2001:db8::7", "2001:db8::1", 0, 0, 17},
		{"v4 echo is no error", build(t, eth(layers.EthernetTypeIPv4), ip4("192.0.2.1", "203.0.113.7", layers.IPProtocolICMPv4),
			&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(8, 0)}, gopacket.Payload(orig4[:28])),
			NotICMPError, "", "", 0, 0, 0},
		{"v4 quote cut", build(t, eth(layers.EthernetTypeIPv4), ip4("192.0.2.1", "203.0.113.7", layers.IPProtocolICMPv4),
			&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(11, 0)}, gopacket.Payload(orig4[:22])),
			BadICMPQuote, "", "", 0, 0, 0},
		{"v4 quote of the IP header alone", build(t, eth(layers.EthernetTypeIPv4), ip4("192.0.2.1", "203.0.113.7", layers.IPProtocolICMPv4),
			&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(11, 0)}, gopacket.Payload(orig4[:20])),
			BadICMPQuote, "", "", 0, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var p Parsed
			if r := Parse(tc.frame, &p); r != OK {
				t.Fatalf("Parse = %v", r)
			}
			var q flowTuple
			r := ParseICMPError(tc.frame, &p, &q)
			if r != tc.want {
				t.Fatalf("ParseICMPError = %v, want %v", r, tc.want)
			}
			if r != OK {
				return
			}
			want, _ := tupleOf(tc.src, tc.dst, tc.sp, tc.dp, tc.proto)
			if q != want {
				t.Errorf("quoted %v, want %v", q, want)
			}
		})
	}
}
