package dataplane

import (
	"encoding/binary"

	"github.com/fulcrumlb/fulcrum/internal/inetsum"
	"github.com/fulcrumlb/fulcrum/packet"
)

// ICMP echo to a VIP is answered by the LB itself, in place: operators ping
// VIPs to check that they are reachable, and no backend needs to see it.
// Fragmented echo requests are not answered (a counted drop).

const (
	icmpEchoRequest   = 8
	icmpEchoReply     = 0
	icmpv6EchoRequest = 128
	icmpv6EchoReply   = 129
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
	copy(f[0:6], f[6:12])
	copy(f[6:12], portMAC[:])
	ip := f[p.L3Off:]
	icmp := f[p.L4Off:]
	if p.L3 == packet.L3IPv4 {
		var a [4]byte
		copy(a[:], ip[12:16])
		copy(ip[12:16], ip[16:20])
		copy(ip[16:20], a[:])
		ip[8] = echoTTL
		ihl := int(ip[0]&0x0f) * 4
		ip[10], ip[11] = 0, 0
		binary.BigEndian.PutUint16(ip[10:], ^inetsum.Fold(inetsum.Add(0, ip[:ihl])))
		adjustType(icmp, icmpEchoReply)
		return
	}
	var a [16]byte
	copy(a[:], ip[8:24])
	copy(ip[8:24], ip[24:40])
	copy(ip[24:40], a[:])
	ip[7] = echoTTL
	// The pseudo-header sum is unchanged by swapping the addresses.
	adjustType(icmp, icmpv6EchoReply)
}

// adjustType sets the ICMP type byte and updates the checksum
// incrementally: HC' = ~(~HC + ~m + m') (RFC 1624, eqn. 3).
func adjustType(icmp []byte, typ uint8) {
	old := uint64(binary.BigEndian.Uint16(icmp[0:2]))
	icmp[0] = typ
	now := uint64(binary.BigEndian.Uint16(icmp[0:2]))
	hc := uint64(^binary.BigEndian.Uint16(icmp[2:4]))
	sum := hc + (^old & 0xffff) + now
	binary.BigEndian.PutUint16(icmp[2:4], ^inetsum.Fold(sum))
}
