package dataplane

import (
	"github.com/fulcrumlb/fulcrum/header"
	"github.com/fulcrumlb/fulcrum/packet"
)

// ICMP echo to a VIP is answered by the LB itself, in place: operators ping
// VIPs to check that they are reachable, and no backend needs to see it.
// Fragmented echo requests are not answered (a counted drop).

const (
	icmpEchoRequest   = header.ICMPv4EchoRequest
	icmpEchoReply     = header.ICMPv4EchoReply
	icmpv6EchoRequest = header.ICMPv6EchoRequest
	icmpv6EchoReply   = header.ICMPv6EchoReply
	echoTTL           = 64
)

// isEchoRequest reports whether p is an unfragmented ICMP or ICMPv6 echo
// request.
func isEchoRequest(p *packet.Parsed) bool {
	if p.Fragment {
		return false
	}
	return p.L3 == packet.L3IPv4 && p.Proto == packet.ProtoICMP && p.ICMPType == icmpEchoRequest && p.ICMPCode == 0 ||
		p.L3 == packet.L3IPv6 && p.Proto == packet.ProtoICMPv6 && p.ICMPType == icmpv6EchoRequest && p.ICMPCode == 0
}

// echoReply turns the echo request frame f (decoded into p) into its reply
// in place: Ethernet addresses swapped (back to the router that sent it,
// from our port), IP addresses swapped with a fresh TTL, the ICMP type
// changed and its checksum adjusted (RFC 1624). The frame keeps its length
// and VLAN tags.
func echoReply(f []byte, p *packet.Parsed, portMAC [6]byte) {
	eth := header.Ethernet(f)
	eth.SetDestination(eth.Source())
	eth.SetSource(portMAC)
	icmp := f[p.L4Off:]
	if p.L3 == packet.L3IPv4 {
		ip := header.IPv4(f[p.L3Off:])
		ip.SwapAddresses()
		ip.SetTTL(echoTTL)
		ip.UpdateChecksum()
		header.SetICMPType(icmp, icmpEchoReply)
		return
	}
	ip := header.IPv6(f[p.L3Off:])
	ip.SwapAddresses()
	ip.SetHopLimit(echoTTL)
	// The pseudo-header sum is unchanged by swapping the addresses.
	header.SetICMPType(icmp, icmpv6EchoReply)
}
