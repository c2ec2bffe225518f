package encap

import (
	"github.com/fulcrumlb/fulcrum/header"
	"github.com/fulcrumlb/fulcrum/packet"
)

// Header sizes and numbers this package writes.
const (
	ethLen  = header.EthernetMinimumSize
	ipv4Len = header.IPv4MinimumSize
	ipv6Len = header.IPv6MinimumSize
	greLen  = header.GREMinimumSize // RFC 2784 without the optional checksum word
	udpLen  = header.UDPMinimumSize
	gueLen  = header.GUEMinimumSize    // variant 0, Hlen 0: no optional fields
	icmpLen = header.ICMPv4MinimumSize // ICMP / ICMPv6 error header up to the quote

	protoICMP   = header.ProtoICMP
	protoIPIP   = header.ProtoIPIP
	protoTCP    = header.ProtoTCP
	protoUDP    = header.ProtoUDP
	protoIPv6   = header.ProtoIPv6
	protoGRE    = header.ProtoGRE
	protoICMPv6 = header.ProtoICMPv6

	etherTypeIPv4 = header.EtherTypeIPv4
	etherTypeIPv6 = header.EtherTypeIPv6
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
	return e.EncapChance(buf, off, n, p, hash, kind, be, nil, dstMAC, srcMAC)
}

// EncapChance is Encap with a second chance: when ch is not nil and kind
// can carry it (CanCarry), the tunnel header names ch as the flow's
// second-chance backend (docs/second-chance.md): a GRE key holding its
// IPv4 address, or a GUE private data block holding its address. The
// field counts toward the MTU like the rest of the overhead. A ch that
// kind cannot carry is left out, as with nil.
func (e *Encapsulator) EncapChance(buf []byte, off, n int, p *packet.Parsed, hash uint64, kind Kind, be, ch *Backend, dstMAC, srcMAC [6]byte) (start, length int, res Result) {
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
		if ipLen < ipv4Len || header.IPv4(buf[ip:]).Version() != header.IPv4Version {
			return 0, 0, DropBadPacket
		}
	case packet.L3IPv6:
		if ipLen < ipv6Len || header.IPv6(buf[ip:]).Version() != header.IPv6Version {
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

	cl := chanceLen(kind, ch)
	ovh := Overhead(kind, outerV6) + cl
	if ovh+ipLen > e.mtu {
		// Whether an ICMP error can make the sender send less: not for
		// an IPv4 packet without DF, nor for an IPv6 one when the MTU
		// it would report is below 1280 (the sender never goes below).
		canShrink := p.IPv4DF || innerV6 && e.mtu-ovh >= minIPv6MTU
		if cl == 0 || canShrink || ovh-cl+ipLen > e.mtu {
			return e.tooBig(buf, off, ip, ipLen, innerV6, p, ovh, srcMAC)
		}
		// A packet no ICMP can shrink that fits without the field:
		// dropping it or answering it would lose every such packet of
		// the flow. It goes without its second chance instead, which
		// only the backend that does not know the flow needs.
		ch, cl, ovh = nil, 0, ovh-cl
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

	var tun []byte
	if outerV6 {
		header.Ethernet(h).Encode(dstMAC, srcMAC, etherTypeIPv6)
		o := header.IPv6(h[ethLen : ethLen+ipv6Len])
		// RFC 6438: the tunnel's flow label carries the inner flow's
		// hash, so ECMP/LAG on the way can spread flows; zero would mean
		// "unlabelled" (RFC 6437 §2).
		label := uint32(hash>>44) & 0xfffff
		if label == 0 {
			label = 1
		}
		o.SetVersionTrafficClassFlowLabel(p.TOS, label)
		o.SetPayloadLength(uint16(ovh - ipv6Len + ipLen))
		o.SetNextHeader(proto)
		o.SetHopLimit(e.ttl)
		copy(o.SourceSlice(), e.src6[:]) // not SetSourceAddress: see header.IPv6
		copy(o.DestinationSlice(), be.addr[:])
		tun = h[ethLen+ipv6Len:]
	} else {
		header.Ethernet(h).Encode(dstMAC, srcMAC, etherTypeIPv4)
		total := uint16(ovh + ipLen)
		var id, frag uint16
		if e.df == DFSet || (e.df == DFInherit && (innerV6 || p.IPv4DF)) {
			// An atomic datagram: its ID means nothing (RFC 6864 §4.1).
			frag = header.IPv4FlagDF
		} else {
			// The ID matters only if a router fragments the outer packet,
			// which happens only when MTU is set above the real path MTU.
			// The inner ID (already unique per source) plus a per-flow
			// offset keeps IDs apart without shared per-core state.
			id = uint16(hash >> 16)
			if !innerV6 {
				id += header.IPv4(buf[ip:]).ID()
			}
		}
		o := header.IPv4(h[ethLen : ethLen+ipv4Len])
		o.SetHeaderLength(ipv4Len)
		o.SetTOS(p.TOS) // RFC 2983 uniform model; ECN copied (RFC 6040 normal mode)
		o.SetTotalLength(total)
		o.SetID(id)
		o.SetFlagsFragmentOffset(frag)
		o.SetTTL(e.ttl)
		o.SetProtocol(proto)
		o.SetSourceAddress(e.src4)
		o.SetDestinationAddress([4]byte(be.addr[:4]))
		// The checksum is summed from the values, not read back from the
		// bytes just written (see header.IPv4HeaderSum).
		o.SetChecksum(^fold(header.IPv4HeaderSum(p.TOS, total, id, frag, e.ttl, proto) + e.src4Sum + be.sum))
		tun = h[ethLen+ipv4Len:]
	}

	switch kind {
	case GRE:
		g := header.GRE(tun)
		g.SetFlags(0) // C, K, S = 0, version 0
		g.SetProtocolType(innerEtherType)
		if cl != 0 {
			writeGREKey(tun, ch)
		}
	case GUE:
		tun = tun[:udpLen+gueLen+cl]
		// The source port carries the flow's entropy so the backend's
		// RSS spreads flows over its queues: a multiply-shift maps the
		// hash onto the configured range without a division.
		sport := e.portMin + uint16((uint64(uint32(hash))*e.portSpan)>>32)
		ulen := udpLen + gueLen + cl + ipLen
		u := header.UDP(tun)
		u.SetSourcePort(sport)
		u.SetDestinationPort(e.guePort)
		u.SetLength(uint16(ulen))
		u.SetChecksum(0) // zero over IPv4: no checksum (RFC 768)
		header.GUE(tun[udpLen:]).Encode(innerProto)
		var gueSum uint64 // the GUE header's words: proto (and Hlen, the private block)
		if cl != 0 {
			gueSum = writeGUEChance(tun[udpLen:], ch, cl)
		} else {
			gueSum = uint64(innerProto)
		}
		if outerV6 && !e.zeroCsum {
			s := header.PseudoHeaderSum(e.src6Sum+be.sum, protoUDP, ulen) +
				uint64(sport) + uint64(e.guePort) + uint64(ulen) + gueSum +
				innerSum(buf[ip:ip+ipLen], innerV6)
			c := ^fold(s)
			if c == 0 {
				c = 0xffff // RFC 768: zero means "no checksum"
			}
			u.SetChecksum(c)
		}
	}
	return start, hl + ipLen, Forward
}

// Fits reports whether Encap forwards an IP packet of ipLen bytes to be
// with kind, rather than answering it with a too-big error or dropping it
// for a bad kind or backend (headroom and parse checks aside). The
// dataplane's fused path checks it before it commits to a packet.
func (e *Encapsulator) Fits(kind Kind, be *Backend, ipLen int) bool {
	return e.FitsChance(kind, be, nil, ipLen)
}

// FitsChance is Fits for EncapChance with the second chance ch (nil: none).
func (e *Encapsulator) FitsChance(kind Kind, be, ch *Backend, ipLen int) bool {
	if kind >= numKinds || be == nil {
		return false
	}
	ipLen += chanceLen(kind, ch)
	switch be.fam {
	case 4:
		return e.hasV4 && ipv4Len+kinds[kind].tunnelLen+ipLen <= e.mtu
	case 6:
		return e.hasV6 && ipv6Len+kinds[kind].tunnelLen+ipLen <= e.mtu
	}
	return false
}

// OuterV6 is IsV6 through a pointer: the fast path asks it of a Backend
// inside a larger struct without copying the Backend.
func (b *Backend) OuterV6() bool { return b.fam == 6 }
