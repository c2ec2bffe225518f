package encap

import (
	"encoding/binary"

	"github.com/fulcrumlb/fulcrum/header"
	"github.com/fulcrumlb/fulcrum/packet"
)

// Header is one backend's tunnel headers, prepared once when the
// dataplane's snapshot is built: everything of the outer IP and tunnel
// headers that does not depend on the packet (version, TTL, protocol,
// addresses, the GRE or GUE base header, the static part of the outer
// IPv4 checksum) is laid out in advance, so that encapsulating a packet is
// a fixed-size copy and a few stores (the lengths, TOS, ID, flow label,
// GUE source port, the checksum) instead of a store per field and the
// checks Encap repeats per packet.
//
// It serves the dataplane's fused path for the common case: a packet
// without a second chance, to a backend of the Header's kind, of the
// inner family it was prepared for. For those packets Encap and
// Header.Encap write the same bytes (TestHeaderMatchesEncap); everything
// else goes through Encap. The zero Header is not usable (Usable false).
type Header struct {
	b        [ipv6Len + udpLen + gueLen]byte // outer IP + tunnel header; per-packet fields zero
	sum      uint64                          // IPv4: the header's static words; IPv6 GUE: the pseudo-header's and UDP/GUE's static words
	maxIP    uint16                          // the largest inner IP packet that fits the MTU
	hl       uint8                           // Ethernet + outer IP + tunnel header
	shape    uint8                           // which fixed-size copy: shape* below
	etherTyp uint16                          // the outer EtherType
	innerL3  packet.L3                       // the inner family prepared for
	kind     Kind
	df       DF
	gueSum   bool   // GUE over IPv6 with a UDP checksum
	portMin  uint16 // GUE source port range (multiply-shift of the hash)
	portSpan uint64
}

// The six header shapes, kind x outer family: shape4 + kind, shape6 + kind.
const (
	shapeNone = iota // not prepared
	shapeGRE4
	shapeIPIP4
	shapeGUE4
	shapeGRE6
	shapeIPIP6
	shapeGUE6

	shape4 = shapeGRE4 // + Kind
	shape6 = shapeGRE6
)

// The shapes follow the kinds' order (checked when compiling).
var _ = [1]int{}[int(GRE)+(shapeIPIP4-shape4-int(IPIP))+(shapeGUE6-shape6-int(GUE))]

// Prepare lays out the tunnel headers toward be for packets of kind whose
// inner IP packets are IPv6 if innerV6, IPv4 otherwise. A kind or backend
// Encap would drop for gives a Header that is not Usable.
func (e *Encapsulator) Prepare(kind Kind, be *Backend, innerV6 bool) Header {
	var h Header
	if kind >= numKinds || be == nil {
		return h
	}
	outerV6 := false
	switch be.fam {
	case 4:
		if !e.hasV4 {
			return h
		}
	case 6:
		if !e.hasV6 {
			return h
		}
		outerV6 = true
	default:
		return h
	}
	ovh := Overhead(kind, outerV6)
	if e.mtu < ovh {
		return h
	}
	h.maxIP = uint16(min(e.mtu-ovh, 0xffff))
	h.hl = uint8(ethLen + ovh)
	h.kind, h.df, h.portMin, h.portSpan = kind, e.df, e.portMin, e.portSpan
	innerProto, innerEtherType := uint8(protoIPIP), uint16(etherTypeIPv4)
	h.innerL3 = packet.L3IPv4
	if innerV6 {
		innerProto, innerEtherType = protoIPv6, etherTypeIPv6
		h.innerL3 = packet.L3IPv6
	}
	proto := innerProto
	switch kind {
	case GRE:
		proto = protoGRE
	case GUE:
		proto = protoUDP
	}
	var tun []byte
	if outerV6 {
		h.etherTyp = etherTypeIPv6
		o := header.IPv6(h.b[:ipv6Len])
		o.SetNextHeader(proto)
		o.SetHopLimit(e.ttl)
		copy(o.SourceSlice(), e.src6[:])
		copy(o.DestinationSlice(), be.addr[:])
		tun = h.b[ipv6Len:]
		h.shape = shape6 + uint8(kind)
	} else {
		h.etherTyp = etherTypeIPv4
		o := header.IPv4(h.b[:ipv4Len])
		o.SetHeaderLength(ipv4Len)
		o.SetTTL(e.ttl)
		o.SetProtocol(proto)
		o.SetSourceAddress(e.src4)
		o.SetDestinationAddress([4]byte(be.addr[:4]))
		h.sum = header.IPv4HeaderSum(0, 0, 0, 0, e.ttl, proto) + e.src4Sum + be.sum
		tun = h.b[ipv4Len:]
		h.shape = shape4 + uint8(kind)
	}
	switch kind {
	case GRE:
		header.GRE(tun).SetProtocolType(innerEtherType)
	case GUE:
		header.UDP(tun).SetDestinationPort(e.guePort)
		header.GUE(tun[udpLen:]).Encode(innerProto)
		if outerV6 && !e.zeroCsum {
			h.gueSum = true
			// Everything of the checksum but the length (twice), the
			// source port and the inner packet.
			h.sum = header.PseudoHeaderSum(e.src6Sum+be.sum, protoUDP, 0) + uint64(e.guePort) + uint64(innerProto)
		}
	}
	return h
}

// Usable reports whether h was prepared for a kind and backend Encap
// forwards to.
func (h *Header) Usable() bool { return h.shape != shapeNone }

// Fits reports whether Header.Encap takes the parsed packet p for a
// tunnel of kind: the kind and the inner family h was prepared for, within
// the MTU. (Headroom is the caller's: HeaderLen bytes before the inner IP
// header.)
func (h *Header) Fits(kind Kind, p *packet.Parsed) bool {
	return h.shape != shapeNone && kind == h.kind && p.L3 == h.innerL3 && p.IPLen <= h.maxIP
}

// HeaderLen is the Ethernet, outer IP and tunnel headers' length: the
// headroom Header.Encap needs in front of the inner IP header.
func (h *Header) HeaderLen() int { return int(h.hl) }

// Encap encapsulates, in place, the packet buf[off:off+n] that p
// describes with a tunnel of kind, as Encap does for a packet without a
// second chance, and returns the new frame's start and length. The caller
// has checked Fits and that the inner IP header starts at least HeaderLen
// bytes into buf; if it has not (or p's offsets do not lie in the
// frame), Encap returns a zero length and changes nothing.
func (h *Header) Encap(buf []byte, off, n int, p *packet.Parsed, kind Kind, hash uint64, dstMAC, srcMAC *[6]byte) (start, length int) {
	ipLen, l3, hl := int(p.IPLen), int(p.L3Off), int(h.hl)
	ip := off + l3
	if !h.Fits(kind, p) || off < 0 || n < 0 || n > len(buf)-off || l3 < ethLen || ipLen > n-l3 || ip < hl || hl < ethLen+ipv4Len || hl > ethLen+len(h.b) {
		return 0, 0
	}
	start = ip - hl
	f := buf[start:ip:ip][:hl] // 34 <= hl <= 66, which the writes below need
	// Array assignments: copy would first test whether the two overlap.
	*(*[6]byte)(f[0:6]) = *dstMAC
	*(*[6]byte)(f[6:12]) = *srcMAC
	binary.BigEndian.PutUint16(f[12:14], h.etherTyp)
	o := f[ethLen:]
	// The template in 16-byte array copies, which compile to one load and
	// one store each (a variable-length copy, or an array of 32, calls
	// memmove; a loop of 8-byte words kept its index on the stack): the
	// header's first 16 or 32 bytes and the 16 or 32 that end it,
	// overlapping in the middle with the same bytes. Every header is 20
	// to 52 bytes (IPv4 + GRE, IPIP or GUE: 24, 20, 32; IPv6: 44, 40, 52).
	ovh := hl - ethLen
	*(*[16]byte)(o[0:16]) = *(*[16]byte)(h.b[0:16])
	if ovh > 32 {
		*(*[16]byte)(o[16:32]) = *(*[16]byte)(h.b[16:32])
		*(*[16]byte)(o[ovh-32 : ovh-16]) = *(*[16]byte)(h.b[ovh-32 : ovh-16])
	}
	*(*[16]byte)(o[ovh-16 : ovh]) = *(*[16]byte)(h.b[ovh-16 : ovh])
	var tun []byte
	if h.shape >= shape6 {
		// As Encap: the flow label carries the flow's hash (RFC 6438),
		// never zero.
		label := uint32(hash>>44) & 0xfffff
		if label == 0 {
			label = 1
		}
		binary.BigEndian.PutUint32(o[0:4], header.IPv6Version<<28|uint32(p.TOS)<<20|label)
		binary.BigEndian.PutUint16(o[4:6], uint16(ovh-ipv6Len+ipLen))
		tun = o[ipv6Len:ovh]
	} else {
		total := uint16(ovh + ipLen)
		var id, frag uint16
		if h.df == DFSet || (h.df == DFInherit && (h.innerL3 == packet.L3IPv6 || p.IPv4DF)) {
			frag = header.IPv4FlagDF
		} else {
			id = uint16(hash >> 16)
			if h.innerL3 == packet.L3IPv4 {
				id += binary.BigEndian.Uint16(buf[ip+4 : ip+6])
			}
		}
		o[1] = p.TOS
		binary.BigEndian.PutUint16(o[2:4], total)
		binary.BigEndian.PutUint16(o[4:6], id)
		binary.BigEndian.PutUint16(o[6:8], frag)
		binary.BigEndian.PutUint16(o[10:12], ^fold(h.sum+uint64(p.TOS)+uint64(total)+uint64(id)+uint64(frag)))
		tun = o[ipv4Len:ovh]
	}
	if h.kind == GUE {
		sport := h.portMin + uint16((uint64(uint32(hash))*h.portSpan)>>32)
		ulen := udpLen + gueLen + ipLen
		binary.BigEndian.PutUint16(tun[0:2], sport)
		binary.BigEndian.PutUint16(tun[4:6], uint16(ulen))
		if h.gueSum {
			c := ^fold(h.sum + 2*uint64(ulen) + uint64(sport) + innerSum(buf[ip:ip+ipLen], h.innerL3 == packet.L3IPv6))
			if c == 0 {
				c = 0xffff
			}
			binary.BigEndian.PutUint16(tun[6:8], c)
		}
	}
	return start, hl + ipLen
}
