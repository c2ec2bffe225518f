package decap

import (
	"fmt"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/header"
)

// ECN codepoints (RFC 3168 §5).
const (
	notECT = 0
	ect1   = 1
	ect0   = 2
	ce     = 3
)

// innerWithECN is innerSYN with the given ECN field in the inner header.
func innerWithECN(t testing.TB, v6 bool, ecn uint8) []byte {
	tcp := &layers.TCP{SrcPort: 40000, DstPort: 80, Seq: 1000, ACK: true, Window: 64240}
	payload := gopacket.Payload("hello")
	if v6 {
		ip := &layers.IPv6{Version: 6, HopLimit: 64, TrafficClass: 0xb8 | ecn, NextHeader: layers.IPProtocolTCP, SrcIP: client6, DstIP: vip6}
		tcp.SetNetworkLayerForChecksum(ip)
		return serialize(t, ip, tcp, payload)
	}
	ip := &layers.IPv4{Version: 4, TTL: 64, TOS: 0xb8 | ecn, Id: 77, Flags: layers.IPv4DontFragment, Protocol: layers.IPProtocolTCP, SrcIP: client4, DstIP: vip4}
	tcp.SetNetworkLayerForChecksum(ip)
	return serialize(t, ip, tcp, payload)
}

// tunnelWithOuterECN tunnels inner (GRE, IPIP or GUE as package encap
// writes them) with the given ECN field in the outer header: what the
// backend receives after a congested router between LB and backend marked
// the outer header CE (RFC 3168 §5, RFC 6040 §4).
func tunnelWithOuterECN(t testing.TB, kind Kind, outerV6 bool, outerECN uint8, inner []byte) []byte {
	proto := layers.IPProtocolGRE
	switch kind {
	case IPIP:
		proto = ipipProto(inner)
	case GUE:
		proto = layers.IPProtocolUDP
	}
	var ip gopacket.NetworkLayer
	if outerV6 {
		ip = &layers.IPv6{Version: 6, HopLimit: 64, TrafficClass: 0xb8 | outerECN, FlowLabel: 0x12345, NextHeader: proto, SrcIP: lb6, DstIP: be6}
	} else {
		ip = &layers.IPv4{Version: 4, TTL: 64, TOS: 0xb8 | outerECN, Flags: layers.IPv4DontFragment, Protocol: proto, SrcIP: lb4, DstIP: be4}
	}
	sl := ip.(gopacket.SerializableLayer)
	switch kind {
	case GRE:
		return serialize(t, sl, &layers.GRE{Protocol: greProto(inner)}, gopacket.Payload(inner))
	case IPIP:
		return serialize(t, sl, gopacket.Payload(inner))
	}
	udp := &layers.UDP{SrcPort: 51000, DstPort: layers.UDPPort(DefaultGUEPort)}
	if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	return serialize(t, sl, udp, gopacket.Payload(cat(gueHdr(inner), inner)))
}

func innerECN(inner []byte) uint8 {
	if inner[0]>>4 == 6 {
		return header.IPv6(inner).TrafficClass() & 3
	}
	return inner[1] & 3
}

// TestECNDecapsulation checks RFC 6040 §4.2's decapsulation table,
// which Linux's own tunnels apply (INET_ECN_decapsulate, called by
// ip_tunnel_rcv, ip6_tnl_rcv and fou/gue through them): a CE mark a router
// put on the outer header between LB and backend must reach the inner
// packet the backend's TCP sees (inner ECT(0)/ECT(1) becomes CE), an
// outer ECT(1) over inner ECT(0) becomes ECT(1), and an outer CE over a
// Not-ECT inner packet must be dropped (the transport cannot be told of
// the congestion). fulcrum-decap hands the inner packet to the kernel
// unchanged: the congestion signal is lost.
func TestECNDecapsulation(t *testing.T) {
	for _, kind := range []Kind{GRE, IPIP, GUE} {
		for _, outerV6 := range []bool{false, true} {
			for _, innerV6 := range []bool{false, true} {
				for _, tc := range []struct {
					inner, outer uint8
					want         uint8 // the inner ECN after decapsulation; 0xff: dropped
				}{
					{ect0, ce, ce},
					{ect1, ce, ce},
					{ect0, ect1, ect1},
					{notECT, ce, 0xff},
					{ect0, ect0, ect0}, // unchanged: a control
					{ce, notECT, ce},   // unchanged
				} {
					name := fmt.Sprintf("%v/outer-v6=%v/inner-v6=%v/inner=%d/outer=%d", kind, outerV6, innerV6, tc.inner, tc.outer)
					pkt := tunnelWithOuterECN(t, kind, outerV6, tc.outer, innerWithECN(t, innerV6, tc.inner))
					inner, _, err := Strip(pkt)
					if tc.want == 0xff {
						if err == nil {
							t.Errorf("%s: accepted (inner ECN %d), want dropped (RFC 6040 §4.2: outer CE over Not-ECT)", name, innerECN(inner))
						}
						continue
					}
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					if got := innerECN(inner); got != tc.want {
						t.Errorf("%s: inner ECN %d after decapsulation, want %d", name, got, tc.want)
						continue
					}
					if !innerV6 && !header.IPv4(inner).IsChecksumValid() {
						t.Errorf("%s: inner IPv4 header checksum not updated", name)
					}
				}
			}
		}
	}
}
