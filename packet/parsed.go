// Package packet decodes the headers of an Ethernet frame into one small
// value, Parsed, straight from the frame's bytes: no allocation, no copy of
// the payload, no panic on any input. It is the dataplane's first stage.
//
// Like Tailscale's net/packet it trades code size for speed: IPv4 and IPv6
// each have their own straight-line decoder instead of a generic layer
// walker, so the common case (Ethernet, IPv4, TCP) is a handful of bounds
// checks and loads.
package packet

import (
	"github.com/fulcrumlb/fulcrum/flow"
	"github.com/fulcrumlb/fulcrum/header"
)

// L3 says what the frame carries above Ethernet.
type L3 uint8

const (
	L3Other L3 = iota // not IP (ARP, LLDP, ...): EtherType tells which
	L3IPv4
	L3IPv6
)

// IP protocol numbers the parser knows.
const (
	ProtoICMP   = header.ProtoICMP
	ProtoTCP    = header.ProtoTCP
	ProtoUDP    = header.ProtoUDP
	ProtoGRE    = header.ProtoGRE
	ProtoICMPv6 = header.ProtoICMPv6
)

// EtherTypes the parser knows.
const (
	EtherTypeIPv4 = header.EtherTypeIPv4
	EtherTypeARP  = header.EtherTypeARP
	EtherTypeIPv6 = header.EtherTypeIPv6
	EtherTypeVLAN = header.EtherTypeVLAN // 802.1Q
	EtherTypeQinQ = header.EtherTypeQinQ // 802.1ad
)

// TCP flag bits as they sit in the TCP header's 13th byte.
const (
	TCPFin = header.TCPFlagFin
	TCPSyn = header.TCPFlagSyn
	TCPRst = header.TCPFlagRst
	TCPPsh = header.TCPFlagPsh
	TCPAck = header.TCPFlagAck
	TCPUrg = header.TCPFlagUrg
)

// Parsed is the decoded view of one frame. Offsets are from the start of the
// frame. The dataplane keeps one per packet of a burst and reuses it.
type Parsed struct {
	// Tuple is the flow's 5-tuple. For a fragmented IPv4/IPv6 packet the
	// ports are zero in every fragment (the 3-tuple), so all fragments of a
	// datagram hash alike; see Frag.
	Tuple flow.Tuple

	L3        L3
	EtherType uint16    // the innermost EtherType, after VLAN tags
	VLANs     [2]uint16 // TCI of the outer and inner tag, in wire order
	NumVLANs  uint8

	L3Off      uint16 // start of the IP header (= Ethernet header length)
	L4Off      uint16 // start of the transport header (after IPv4 options / IPv6 extension headers)
	PayloadOff uint16 // start of the transport payload (or L4Off when there is no transport header)
	IPLen      uint16 // IP packet length from the IP header (header + payload); bytes past it are Ethernet padding

	TTL    uint8 // IPv4 TTL or IPv6 hop limit
	TOS    uint8 // IPv4 TOS or IPv6 traffic class
	Proto  uint8 // transport protocol (after IPv6 extension headers); = Tuple.Proto
	IPv4DF bool  // IPv4 don't-fragment bit

	// Fragment state. Fragment is set for any IPv4 packet with MF set or a
	// non-zero offset, and for IPv6 with a fragment header. FragOffset is in
	// bytes. Only the first fragment (offset 0) carries the L4 header; it is
	// still decoded (flags, ICMP type) but the tuple's ports stay zero.
	Fragment      bool
	MoreFragments bool
	FragOffset    uint16
	FragID        uint32

	TCPFlags uint8 // TCP flags (TCPSyn, ...) when Proto is TCP and the header is present
	ICMPType uint8 // ICMP/ICMPv6 type and code when Proto is ICMP/ICMPv6
	ICMPCode uint8
}
