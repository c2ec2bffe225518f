package header

import "encoding/binary"

var be = binary.BigEndian

// IP protocol numbers (IANA "Assigned Internet Protocol Numbers"); for IPv6
// the same numbers name the next header.
const (
	ProtoHopByHop = 0  // IPv6 hop-by-hop options (RFC 8200 §4.3)
	ProtoICMP     = 1  // ICMP (RFC 792)
	ProtoIPIP     = 4  // IPv4 encapsulation (RFC 2003)
	ProtoTCP      = 6  // TCP (RFC 9293)
	ProtoUDP      = 17 // UDP (RFC 768)
	ProtoIPv6     = 41 // IPv6 encapsulation (RFC 2473, RFC 4213)
	ProtoRouting  = 43 // IPv6 routing header (RFC 8200 §4.4)
	ProtoFragment = 44 // IPv6 fragment header (RFC 8200 §4.5)
	ProtoGRE      = 47 // GRE (RFC 2784)
	ProtoAH       = 51 // authentication header (RFC 4302)
	ProtoICMPv6   = 58 // ICMPv6 (RFC 4443)
	ProtoNoNext   = 59 // IPv6 no next header (RFC 8200 §4.7)
	ProtoDestOpts = 60 // IPv6 destination options (RFC 8200 §4.6)
)

// EtherTypes (IEEE 802 numbers).
const (
	EtherTypeIPv4 = 0x0800
	EtherTypeARP  = 0x0806
	EtherTypeIPv6 = 0x86DD
	EtherTypeVLAN = 0x8100 // 802.1Q
	EtherTypeQinQ = 0x88A8 // 802.1ad
)
