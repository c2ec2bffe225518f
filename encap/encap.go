package encap

import (
	"encoding/binary"

	"github.com/fulcrumlb/fulcrum/packet"
)

// Header sizes and numbers this package writes.
const (
	ethLen  = 14
	ipv4Len = 20
	ipv6Len = 40
	greLen  = 4 // RFC 2784 without the optional checksum word
	udpLen  = 8
	gueLen  = 4 // variant 0, Hlen 0: no optional fields
	icmpLen = 8 // ICMP / ICMPv6 error header up to the quote

	protoICMP   = packet.ProtoICMP
	protoIPIP   = 4 // IPv4 encapsulation (RFC 2003)
	protoTCP    = packet.ProtoTCP
	protoUDP    = packet.ProtoUDP
	protoIPv6   = 41 // IPv6 encapsulation (RFC 2473, RFC 4213)
	protoGRE    = packet.ProtoGRE
	protoICMPv6 = packet.ProtoICMPv6

	etherTypeIPv4 = packet.EtherTypeIPv4
	etherTypeIPv6 = packet.EtherTypeIPv6
)

// Overhead is the number of L3 bytes kind adds in front of the inner IP
// packet (outer IP header plus tunnel header; Ethernet is not part of the
// MTU): IPIP 20/40, GRE 24/44, GUE 32/52 for an IPv4/IPv6 outer header. An
// inner packet of at most MTU - Overhead bytes is forwarded. Unknown kinds
// report 0.
func Overhead(kind Kind, outerV6 bool) int {
	if kind >= numKinds {
		return 0
	}
	if outerV6 {
		return ipv6Len + kinds[kind].tunnelLen
	}
	return ipv4Len + kinds[kind].tunnelLen
}

// Result says what Encap did with a packet; the dataplane counts each. Every
// value but Forward and ICMPReply is a drop reason (see the package doc).
type Result uint8

const (
	// Forward: buf[start:start+length] is the encapsulated frame for the
	// backend.
	Forward Result = iota
	// ICMPReply: the packet was too big for the MTU; buf[start:start+length]
	// is now an ICMP "fragmentation needed" / ICMPv6 "packet too big" frame
	// for the client, to be sent back out. The packet itself is dropped.
	ICMPReply
	// DropTooBigNoDF: an IPv4 packet without DF was too big. Fulcrum does
	// not fragment the outer packet.
	DropTooBigNoDF
	// DropTooBigICMPError: a too-big packet is itself an ICMP or ICMPv6
	// error, which must not be answered with another (RFC 1122 §3.2.2,
	// RFC 4443 §2.4(e)).
	DropTooBigICMPError
	// DropTooBigNoReply: a too-big packet that the RFCs forbid answering:
	// a non-first IPv4 fragment, or a source or destination that is not a
	// unicast address (RFC 1122 §3.2.2, RFC 4443 §2.4(e)).
	DropTooBigNoReply
	// DropNoHeadroom: the buffer has too few bytes in front of the IP
	// header for the new headers (see MaxHeaderLen).
	DropNoHeadroom
	// DropBadPacket: off, n and the parsed offsets do not describe an IP
	// packet inside buf (a caller or parser bug, never the wire's fault).
	DropBadPacket
	// DropBadBackend: the zero Backend, or a backend of a family this
	// Encapsulator has no source address for.
	DropBadBackend
	// DropBadKind: a Kind value that is not one of Kinds.
	DropBadKind

	// NumResults is the number of Result values, for counter arrays.
	NumResults
)

var resultNames = [NumResults]string{
	Forward:             "forward",
	ICMPReply:           "icmp-reply",
	DropTooBigNoDF:      "drop-too-big-no-df",
	DropTooBigICMPError: "drop-too-big-icmp-error",
	DropTooBigNoReply:   "drop-too-big-no-reply",
	DropNoHeadroom:      "drop-no-headroom",
	DropBadPacket:       "drop-bad-packet",
	DropBadBackend:      "drop-bad-backend",
	DropBadKind:         "drop-bad-kind",
}

// String is the result's counter name, e.g. "drop-too-big-no-df".
func (r Result) String() string { return enumName(resultNames[:], r, "result") }

// Drop reports whether r is a drop reason (nothing to transmit).
func (r Result) Drop() bool { return r != Forward && r != ICMPReply }

// Encap encapsulates, in place, the packet that p describes toward backend
// be, or answers it with an ICMP error when it is too big.
//
// The received frame is buf[off:off+n]; the bytes of buf before off are
// headroom. p must be the parse of that frame (offsets relative to off);
// Encap checks every offset it uses against buf and never panics. hash is
// the flow hash (flow.Hasher): it picks the GUE source port and the IPv6
// flow label, so a flow keeps one outer 5-tuple. dstMAC is the next hop
// toward the backend, srcMAC the port's own address.
//
// On Forward, buf[start:start+length] is the new frame: Ethernet (no VLAN
// tag), outer IP, tunnel header, then the inner IP packet exactly as
// received, unmoved, without the original Ethernet/VLAN header and without
// any Ethernet padding past p.IPLen. On ICMPReply it is the ICMP error for
// the client (see the package doc). On a drop reason, start and length are
// zero and buf is unchanged.
func (e *Encapsulator) Encap(buf []byte, off, n int, p *packet.Parsed, hash uint64, kind Kind, be *Backend, dstMAC, srcMAC [6]byte) (start, length int, res Result) {
	if p == nil || off < 0 || n < 0 || off > len(buf) || n > len(buf)-off {
		return 0, 0, DropBadPacket
	}
	l3, ipLen := int(p.L3Off), int(p.IPLen)
	if l3 < ethLen || ipLen > n-l3 {
		return 0, 0, DropBadPacket
	}
	ip := off + l3 // the inner IP header, absolute
	innerV6 := false
	switch p.L3 {
	case packet.L3IPv4:
		if ipLen < ipv4Len || buf[ip]>>4 != 4 {
			return 0, 0, DropBadPacket
		}
	case packet.L3IPv6:
		if ipLen < ipv6Len || buf[ip]>>4 != 6 {
			return 0, 0, DropBadPacket
		}
		innerV6 = true
	default:
		return 0, 0, DropBadPacket
	}
	if kind >= numKinds {
		return 0, 0, DropBadKind
	}
	if be == nil {
		return 0, 0, DropBadBackend
	}
	outerV6 := false
	switch be.fam {
	case 4:
		if !e.hasV4 {
			return 0, 0, DropBadBackend
		}
	case 6:
		if !e.hasV6 {
			return 0, 0, DropBadBackend
		}
		outerV6 = true
	default:
		return 0, 0, DropBadBackend
	}

	ovh := Overhead(kind, outerV6)
	if ovh+ipLen > e.mtu {
		return e.tooBig(buf, off, ip, ipLen, innerV6, p, ovh, srcMAC)
	}
	hl := ethLen + ovh
	if ip < hl {
		return 0, 0, DropNoHeadroom
	}
	start = ip - hl
	h := buf[start:ip:ip]

	innerProto, innerEtherType := uint8(protoIPIP), uint16(etherTypeIPv4)
	if innerV6 {
		innerProto, innerEtherType = protoIPv6, etherTypeIPv6
	}
	var proto uint8
	switch kind {
	case GRE:
		proto = protoGRE
	case IPIP:
		proto = innerProto
	case GUE:
		proto = protoUDP
	}

	copy(h[0:6], dstMAC[:])
	copy(h[6:12], srcMAC[:])
	var tun []byte
	if outerV6 {
		binary.BigEndian.PutUint16(h[12:], etherTypeIPv6)
		o := h[ethLen : ethLen+ipv6Len]
		// RFC 6438: the tunnel's flow label carries the inner flow's
		// hash, so ECMP/LAG on the way can spread flows; zero would mean
		// "unlabelled" (RFC 6437 §2).
		label := uint32(hash>>44) & 0xfffff
		if label == 0 {
			label = 1
		}
		binary.BigEndian.PutUint32(o[0:], 6<<28|uint32(p.TOS)<<20|label)
		binary.BigEndian.PutUint16(o[4:], uint16(ovh-ipv6Len+ipLen))
		o[6] = proto
		o[7] = e.ttl
		copy(o[8:24], e.src6[:])
		copy(o[24:40], be.addr[:])
		tun = h[ethLen+ipv6Len:]
	} else {
		binary.BigEndian.PutUint16(h[12:], etherTypeIPv4)
		o := h[ethLen : ethLen+ipv4Len]
		total := uint16(ovh + ipLen)
		var id, frag uint16
		if e.df == DFSet || (e.df == DFInherit && (innerV6 || p.IPv4DF)) {
			// An atomic datagram: its ID means nothing (RFC 6864 §4.1).
			frag = 0x4000
		} else {
			// The ID matters only if a router fragments the outer packet,
			// which happens only when MTU is set above the real path MTU.
			// The inner ID (already unique per source) plus a per-flow
			// offset keeps IDs apart without shared per-core state.
			id = uint16(hash >> 16)
			if !innerV6 {
				id += binary.BigEndian.Uint16(buf[ip+4:])
			}
		}
		verTOS := uint16(0x45)<<8 | uint16(p.TOS) // TOS: RFC 2983 uniform model; ECN copied (RFC 6040 normal mode)
		ttlProto := uint16(e.ttl)<<8 | uint16(proto)
		binary.BigEndian.PutUint16(o[0:], verTOS)
		binary.BigEndian.PutUint16(o[2:], total)
		binary.BigEndian.PutUint16(o[4:], id)
		binary.BigEndian.PutUint16(o[6:], frag)
		binary.BigEndian.PutUint16(o[8:], ttlProto)
		copy(o[12:16], e.src4[:])
		copy(o[16:20], be.addr[:4])
		// The checksum is summed from the values, not read back from the
		// bytes just written: reading them back costs a store-forwarding
		// stall that tripled Encap's time.
		sum := uint64(verTOS) + uint64(total) + uint64(id) + uint64(frag) + uint64(ttlProto) + e.src4Sum + be.sum
		binary.BigEndian.PutUint16(o[10:], ^fold(sum))
		tun = h[ethLen+ipv4Len:]
	}

	switch kind {
	case GRE:
		tun[0], tun[1] = 0, 0 // C, K, S = 0, version 0
		binary.BigEndian.PutUint16(tun[2:], innerEtherType)
	case GUE:
		tun = tun[:udpLen+gueLen]
		// The source port carries the flow's entropy so the backend's
		// RSS spreads flows over its queues: a multiply-shift maps the
		// hash onto the configured range without a division.
		sport := e.portMin + uint16((uint64(uint32(hash))*e.portSpan)>>32)
		ulen := udpLen + gueLen + ipLen
		binary.BigEndian.PutUint16(tun[0:], sport)
		binary.BigEndian.PutUint16(tun[2:], e.guePort)
		binary.BigEndian.PutUint16(tun[4:], uint16(ulen))
		tun[6], tun[7] = 0, 0 // zero over IPv4: no checksum (RFC 768)
		// GUE variant 0: Ver 0, C 0, Hlen 0, Proto/ctype, Flags 0.
		tun[8], tun[9], tun[10], tun[11] = 0, innerProto, 0, 0
		if outerV6 && !e.zeroCsum {
			s := pseudoSum(e.src6Sum+be.sum, protoUDP, ulen) +
				uint64(sport) + uint64(e.guePort) + uint64(ulen) + uint64(innerProto) +
				innerSum(buf[ip:ip+ipLen], innerV6)
			c := ^fold(s)
			if c == 0 {
				c = 0xffff // RFC 768: zero means "no checksum"
			}
			binary.BigEndian.PutUint16(tun[6:], c)
		}
	}
	return start, hl + ipLen, Forward
}
