package decap

import (
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// clientUDP is a client's datagram to the VIP's UDP port.
func clientUDP(t testing.TB, v6 bool, dport uint16) []byte {
	udp := &layers.UDP{SrcPort: 40000, DstPort: layers.UDPPort(dport)}
	payload := gopacket.Payload("a client's datagram")
	if v6 {
		ip := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolUDP, SrcIP: client6, DstIP: vip6}
		udp.SetNetworkLayerForChecksum(ip)
		return serialize(t, ip, udp, payload)
	}
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: client4, DstIP: vip4}
	udp.SetNetworkLayerForChecksum(ip)
	return serialize(t, ip, udp, payload)
}

// TestInnerUDPToGUEPortWithGUEOff: a decapsulator that does not accept
// GUE (fulcrum-decap -gre, or -ipip: no socket on the GUE port) has nothing
// to hand a datagram to the GUE port back to, so a client's datagram to a
// UDP VIP on port 6080 is an ordinary packet: refusing it as inner-tunnel
// drops every datagram of that service.
func TestInnerUDPToGUEPortWithGUEOff(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		in := clientUDP(t, v6, DefaultGUEPort)
		for _, c := range []stripCase{
			{name: "gre only", d: mustNew(t, Config{Kinds: []Kind{GRE}}), pkt: gre(t, false, in), inner: in, kind: GRE},
			{name: "ipip only", d: mustNew(t, Config{Kinds: []Kind{IPIP}}), pkt: ipip(t, v6, in), inner: in, kind: IPIP},
		} {
			t.Run(c.name, func(t *testing.T) {
				inner, kind, err := c.d.Strip(c.pkt)
				checkCase(t, c, inner, kind, err)
			})
		}
	}
}
