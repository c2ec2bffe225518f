//go:build linux

package main

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/decap"
)

// TestECNThroughAgentInNetns: a router between the LB and the backend
// marks a tunnelled packet Congestion Experienced on its outer header
// (RFC 3168 §5; the LB copied the inner ECT(0) to the outer, RFC 6040
// normal mode). Linux's own tunnel devices, which fulcrum-decap stands in
// for, move the mark to the inner header (RFC 6040 §4.2,
// INET_ECN_decapsulate), so the backend's TCP echoes it with ECE and the
// client slows down. Through fulcrum-decap the mark must arrive too.
func TestECNThroughAgentInNetns(t *testing.T) {
	needNetns(t)
	bin := buildAgent(t)
	lbns, bens := setupNetns(t)
	startAgent(t, bens, bin)
	serveHTTP(t, bens)
	lb := openPacketSocket(t, lbns, "veth-lb")

	// Each socket the agent reads: a raw IPv4 socket, whose packets
	// decap.Strip sees whole, outer header included; a raw IPv6 socket
	// and the GUE UDP sockets, which deliver the payload only, so the
	// outer TOS or traffic class comes as control data.
	for i, tc := range []struct {
		name   string
		kind   decap.Kind
		outer6 bool
	}{
		{"gre over ipv4", decap.GRE, false},
		{"gre over ipv6", decap.GRE, true},
		{"gue over ipv4", decap.GUE, false},
		{"gue over ipv6", decap.GUE, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tunnel := func(outerECN uint8, inner []byte) []byte {
				return ecnTunnel(t, tc.kind, tc.outer6, outerECN, inner)
			}
			cport, isn := layers.TCPPort(42424+i), uint32(1000)
			// An ECN-setup SYN (RFC 3168 §6.1.1: ECE and CWR, not ECT itself).
			syn := ecnPacket(t, &layers.TCP{SrcPort: cport, DstPort: 80, Seq: isn, SYN: true, ECE: true, CWR: true, Window: 64240}, 0, nil)
			var synack *layers.TCP
			for try := 0; try < 20 && synack == nil; try++ {
				lb.send(t, tunnel(0, syn))
				synack = lb.expect(t, 250*time.Millisecond, func(_, _ netip.Addr, tcp *layers.TCP) bool {
					return tcp.DstPort == cport && tcp.SYN && tcp.ACK
				}, vipAddr4, client4)
			}
			if synack == nil {
				t.Fatal("no SYN-ACK")
			}
			if !synack.ECE {
				t.Skip("the backend's TCP did not agree to ECN (net.ipv4.tcp_ecn)")
			}
			// The request, ECT(0) inside, marked CE outside on the way.
			req := []byte("GET / HTTP/1.0\r\nHost: vip\r\n\r\n")
			data := ecnPacket(t, &layers.TCP{SrcPort: cport, DstPort: 80, Seq: isn + 1, Ack: synack.Seq + 1, ACK: true, PSH: true, Window: 64240}, 2, req)
			lb.send(t, tunnel(3, data))
			sawReply, sawECE := false, false
			lb.expect(t, 3*time.Second, func(_, _ netip.Addr, tcp *layers.TCP) bool {
				if tcp.DstPort != cport || tcp.SYN || tcp.Ack != isn+1+uint32(len(req)) {
					return false
				}
				sawReply = true
				sawECE = sawECE || tcp.ECE
				return sawECE
			}, vipAddr4, client4)
			lb.send(t, tunnel(0, ecnPacket(t, &layers.TCP{SrcPort: cport, DstPort: 80, Seq: isn + 1 + uint32(len(req)), RST: true}, 0, nil)))
			if !sawReply {
				t.Fatal("no answer to the request")
			}
			if !sawECE {
				t.Errorf("the backend acknowledged the CE-marked request without ECE: the outer header's Congestion Experienced mark was lost in decapsulation (RFC 6040 §4.2)")
			}
		})
	}
}

// ecnTunnel is inner (an IPv4 packet) tunnelled from the LB to the
// backend by kind over the outer family, with outerECN in the outer
// header's ECN field.
func ecnTunnel(t testing.TB, kind decap.Kind, outer6 bool, outerECN uint8, inner []byte) []byte {
	eth := &layers.Ethernet{SrcMAC: lbMAC, DstMAC: beMAC, EthernetType: layers.EthernetTypeIPv4}
	proto := layers.IPProtocolGRE
	if kind == decap.GUE {
		proto = layers.IPProtocolUDP
	}
	var ip gopacket.SerializableLayer
	if outer6 {
		eth.EthernetType = layers.EthernetTypeIPv6
		ip = &layers.IPv6{Version: 6, HopLimit: 64, TrafficClass: outerECN, NextHeader: proto, SrcIP: lbAddr6.AsSlice(), DstIP: beAddr6.AsSlice()}
	} else {
		ip = &layers.IPv4{Version: 4, TTL: 64, TOS: outerECN, Flags: layers.IPv4DontFragment, Protocol: proto, SrcIP: lbAddr4.AsSlice(), DstIP: beAddr4.AsSlice()}
	}
	if kind == decap.GRE {
		return serialize(t, eth, ip, &layers.GRE{Protocol: layers.EthernetTypeIPv4}, gopacket.Payload(inner))
	}
	udp := &layers.UDP{SrcPort: 50123, DstPort: layers.UDPPort(decap.DefaultGUEPort)}
	udp.SetNetworkLayerForChecksum(ip.(gopacket.NetworkLayer))
	return serialize(t, eth, ip, udp, gopacket.Payload{0, byte(layers.IPProtocolIPv4), 0, 0}, gopacket.Payload(inner))
}

// ecnPacket is the client's IPv4 TCP packet to the VIP with the given ECN
// field.
func ecnPacket(t *testing.T, tcp *layers.TCP, ecn uint8, payload []byte) []byte {
	ip := &layers.IPv4{Version: 4, TTL: 64, TOS: ecn, Flags: layers.IPv4DontFragment, Protocol: layers.IPProtocolTCP,
		SrcIP: client4.AsSlice(), DstIP: vipAddr4.AsSlice()}
	tcp.SetNetworkLayerForChecksum(ip)
	return serialize(t, ip, tcp, gopacket.Payload(payload))
}
