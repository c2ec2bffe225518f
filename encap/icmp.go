package encap

import (
	"encoding/binary"

	"github.com/fulcrumlb/fulcrum/header"
	"github.com/fulcrumlb/fulcrum/packet"
)

// ICMP error limits.
const (
	// icmpv4MaxLen: an ICMP error quotes as much of the datagram as fits
	// in 576 bytes in all (RFC 1812 §4.3.2.3).
	icmpv4MaxLen = 576
	// icmpv6MaxLen: an ICMPv6 error quotes as much as fits in the minimum
	// IPv6 MTU (RFC 4443 §2.4(c)).
	icmpv6MaxLen = 1280
	// minIPv6MTU: a Packet Too Big never reports less (RFC 8200 §5).
	minIPv6MTU = 1280
)

// tooBig answers a packet whose encapsulation would exceed the MTU, as
// Katran and IPVS do: the client learns the smaller path MTU (RFC 1191,
// RFC 8201) from the VIP it talks to. mtu is the largest inner packet.
func (e *Encapsulator) tooBig(buf []byte, off, ip, ipLen int, innerV6 bool, p *packet.Parsed, ovh int, srcMAC [6]byte) (int, int, Result) {
	mtu := e.mtu - ovh
	if innerV6 {
		return packetTooBig(buf, off, ip, ipLen, p, mtu, srcMAC)
	}
	return fragNeeded(buf, off, ip, ipLen, p, mtu, srcMAC)
}

// fragNeeded builds, in place, an ICMP "destination unreachable /
// fragmentation needed and DF set" (type 3 code 4, RFC 792, next-hop MTU
// per RFC 1191 §4) from the VIP to the client, quoting the packet's first
// bytes, which stay where they are.
func fragNeeded(buf []byte, off, ip, ipLen int, p *packet.Parsed, mtu int, srcMAC [6]byte) (int, int, Result) {
	if !p.IPv4DF {
		return 0, 0, DropTooBigNoDF
	}
	if p.FragOffset != 0 {
		return 0, 0, DropTooBigNoReply
	}
	if mayBeICMPError(p) {
		return 0, 0, DropTooBigICMPError
	}
	pkt := header.IPv4(buf[ip : ip+ipLen])
	client, vip := pkt.SourceAddress(), pkt.DestinationAddress()
	if !Routed4(client) || !Unicast4(vip) {
		return 0, 0, DropTooBigNoReply
	}
	const hl = ethLen + ipv4Len + icmpLen
	if ip < hl {
		return 0, 0, DropNoHeadroom
	}
	// The quote ends where the reply would outgrow the request (which
	// it may when the MTU is below 576 + Overhead): a spoofed request
	// must never get more bytes back than it sent. It still holds far
	// more than the IP header and 8 bytes RFC 792 asks for.
	q := min(ipLen-ipv4Len-icmpLen, icmpv4MaxLen-ipv4Len-icmpLen)
	if q < ipv4Len+8 {
		return 0, 0, DropTooBigNoReply // not reached: a packet too big is longer
	}
	start := ip - hl
	h := buf[start : ip+q]
	replyEthernet(buf, off, start, srcMAC, etherTypeIPv4)
	o := header.IPv4(h[ethLen : ethLen+ipv4Len])
	total := uint16(ipv4Len + icmpLen + q)
	o.SetHeaderLength(ipv4Len)
	o.SetTOS(0)
	o.SetTotalLength(total)
	o.SetID(0)
	o.SetFlagsFragmentOffset(header.IPv4FlagDF) // an atomic datagram
	o.SetTTL(DefaultTTL)
	o.SetProtocol(protoICMP)
	o.SetSourceAddress(vip)
	o.SetDestinationAddress(client)
	// From the values, as Encap does; the quoted header holds the same
	// two addresses, whose sum does not depend on their order.
	o.SetChecksum(^fold(header.IPv4HeaderSum(0, total, 0, header.IPv4FlagDF, DefaultTTL, protoICMP) + pkt.AddressSum()))
	m := header.ICMPv4(h[ethLen+ipv4Len:])
	m.SetType(header.ICMPv4DstUnreachable)
	m.SetCode(header.ICMPv4FragNeededCode)
	m.SetChecksum(0)
	m.SetRestOfHeader(uint32(mtu)) // unused, then the next-hop MTU
	m.SetChecksum(^fold(sumBytes(m)))
	return start, hl + q, ICMPReply
}

// packetTooBig builds, in place, an ICMPv6 "packet too big" (type 2 code 0,
// RFC 4443 §3.2) from the VIP to the client. The MTU field is clamped to
// 1280, the IPv6 minimum: with MTU < 1280 + Overhead a client cannot go
// below 1280, so its 1280-byte packets keep being refused (see the package
// doc).
func packetTooBig(buf []byte, off, ip, ipLen int, p *packet.Parsed, mtu int, srcMAC [6]byte) (int, int, Result) {
	if mayBeICMPError(p) {
		return 0, 0, DropTooBigICMPError
	}
	pkt := header.IPv6(buf[ip : ip+ipLen])
	client, vip := pkt.SourceAddress(), pkt.DestinationAddress()
	// Packet Too Big may answer a multicast destination (RFC 4443
	// §2.4(e.3)); the source must still name one node (e.6).
	if !Routed6(client) {
		return 0, 0, DropTooBigNoReply
	}
	const hl = ethLen + ipv6Len + icmpLen
	if ip < hl {
		return 0, 0, DropNoHeadroom
	}
	q := min(ipLen-ipv6Len-icmpLen, icmpv6MaxLen-ipv6Len-icmpLen) // never longer than the request (fragNeeded)
	if q < ipv6Len+8 {
		return 0, 0, DropTooBigNoReply // not reached: a packet too big is longer
	}
	mtu = max(mtu, minIPv6MTU)
	start := ip - hl
	h := buf[start : ip+q]
	replyEthernet(buf, off, start, srcMAC, etherTypeIPv6)
	o := header.IPv6(h[ethLen : ethLen+ipv6Len])
	o.SetVersionTrafficClassFlowLabel(0, 0)
	o.SetPayloadLength(uint16(icmpLen + q))
	o.SetNextHeader(protoICMPv6)
	o.SetHopLimit(DefaultTTL)
	o.SetSourceAddress(vip)
	o.SetDestinationAddress(client)
	m := header.ICMPv6(h[ethLen+ipv6Len:])
	m.SetType(header.ICMPv6PacketTooBig)
	m.SetCode(0)
	m.SetChecksum(0)
	m.SetMTU(uint32(mtu))
	s := header.PseudoHeaderSum(pkt.AddressSum(), protoICMPv6, icmpLen+q) + sumBytes(m) // the same addresses, swapped
	m.SetChecksum(^fold(s))
	return start, hl + q, ICMPReply
}

// replyEthernet writes at buf[start:] an untagged Ethernet header back to
// the router that sent the frame at buf[off:], as Katran does: its MAC is
// read before the new header overwrites the old one.
func replyEthernet(buf []byte, off, start int, srcMAC [6]byte, etherType uint16) {
	router := header.Ethernet(buf[off:]).Source()
	header.Ethernet(buf[start:start+ethLen]).Encode(router, srcMAC, etherType)
}

// mayBeICMPError reports whether p is an ICMP/ICMPv6 error, or a fragment of
// an ICMP/ICMPv6 message that might be one: either must not be answered with
// another error (RFC 1122 §3.2.2, RFC 4443 §2.4(e.1)).
func mayBeICMPError(p *packet.Parsed) bool {
	return p.IsICMPError() || p.Fragment && (p.Proto == protoICMP || p.Proto == protoICMPv6)
}

// Unicast4 reports whether a names one host: not 0/8 ("this network"),
// 127/8 (loopback), 224/4 (multicast) or 240/4 (reserved, broadcast).
// Routed4 builds on it.
func Unicast4(a [4]byte) bool {
	return a[0] != 0 && a[0] != 127 && a[0] < 224
}

// Routed4 reports whether a can be the source of a packet that reached
// the LB through a router: Unicast4, and not link-local (169.254.0.0/16),
// which no router forwards (RFC 3927 §2.7). A backend answering such a
// source would send its reply to a host of its own link (169.254.169.254
// is many clouds' metadata service). The dataplane's martian-source test
// and the too-big reply's destination use it.
func Routed4(a [4]byte) bool { return Unicast4(a) && (a[0] != 169 || a[1] != 254) }

// Routed6 is Routed4 for IPv6: Unicast6, and not link-local (fe80::/10),
// which routers never forward to another link (RFC 4291 §2.5.6).
func Routed6(a [16]byte) bool { return Unicast6(a) && (a[0] != 0xfe || a[1]&0xc0 != 0x80) }

// Unicast6 reports whether a names one node: not unspecified, loopback,
// multicast (ff00::/8) or IPv4-mapped (::ffff:0:0/96), which must not
// appear on the wire (RFC 4291 2.5.5.2; Linux's ip6_rcv_core drops it as
// a source) and would carry any IPv4 martian (::ffff:127.0.0.1,
// ::ffff:255.255.255.255) past the IPv4 test.
func Unicast6(a [16]byte) bool {
	hi, lo := binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(a[8:])
	return a[0] != 0xff && (hi != 0 || lo > 1 && lo>>32 != 0xffff)
}
