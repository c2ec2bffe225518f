package packet

import (
	"encoding/binary"

	"github.com/fulcrumlb/fulcrum/header"
)

// Limits the parser enforces. They bound the work per packet, whatever the
// packet claims.
const (
	// MaxVLANs is the number of stacked 802.1Q/802.1ad tags followed
	// (QinQ: an outer service tag and an inner customer tag).
	MaxVLANs = 2
	// MaxExtHeaders is the number of IPv6 extension headers followed before
	// the packet is dropped. RFC 8200 section 4.1 recommends an order in
	// which each appears at most once (destination options twice), so a
	// legitimate chain has at most 7; more means a loop or an attack.
	MaxExtHeaders = 8
)

var be = binary.BigEndian

// Parse decodes frame into p. It returns OK or the reason the frame is
// malformed; on a non-OK reason the contents of p are unspecified. A frame
// that is not IP (ARP, LLDP, ...) is OK with p.L3 == L3Other.
//
// Parse never reads past len(frame), never allocates and never panics.
// Bytes past the IP packet's own length (Ethernet padding) are ignored.
func Parse(frame []byte, p *Parsed) Reason {
	*p = Parsed{}
	if len(frame) < header.EthernetMinimumSize {
		return TruncatedEthernet
	}
	off := header.EthernetTypeOffset
	et := be.Uint16(frame[off:])
	for et == EtherTypeVLAN || et == EtherTypeQinQ {
		if p.NumVLANs == MaxVLANs {
			return TooManyVLANs
		}
		if len(frame) < off+6 {
			return TruncatedVLAN
		}
		p.VLANs[p.NumVLANs] = be.Uint16(frame[off+2:])
		p.NumVLANs++
		off += header.VLANTagSize
		et = be.Uint16(frame[off:])
	}
	off += 2
	p.EtherType = et
	p.L3Off = uint16(off)
	switch et {
	case EtherTypeIPv4:
		p.L3 = L3IPv4
		return parseIPv4(frame, off, p)
	case EtherTypeIPv6:
		p.L3 = L3IPv6
		return parseIPv6(frame, off, p)
	}
	p.L3 = L3Other
	return OK
}

func parseIPv4(frame []byte, off int, p *Parsed) Reason {
	b := header.IPv4(frame[off:])
	if len(b) < header.IPv4MinimumSize {
		return TruncatedIPv4
	}
	if b.Version() != header.IPv4Version {
		return BadIPv4Version
	}
	ihl := b.HeaderLength()
	if ihl < header.IPv4MinimumSize {
		return BadIPv4HeaderLen
	}
	if len(b) < ihl {
		return TruncatedIPv4
	}
	total := int(b.TotalLength())
	if total < ihl || total > len(b) {
		return BadIPv4TotalLen
	}
	if ihl > header.IPv4MinimumSize && sourceRoute4(b[header.IPv4MinimumSize:ihl]) {
		return SourceRouted
	}
	p.IPLen = uint16(total)
	p.TOS = b.TOS()
	p.TTL = b.TTL()
	p.Proto = b.Protocol()
	ff := b.FlagsFragmentOffset()
	p.IPv4DF = ff&header.IPv4FlagDF != 0
	p.MoreFragments = ff&header.IPv4FlagMF != 0
	p.FragOffset = (ff & header.IPv4FragOffsetMask) << 3
	t := &p.Tuple
	t.Src[10], t.Src[11] = 0xff, 0xff
	t.Dst[10], t.Dst[11] = 0xff, 0xff
	*(*[4]byte)(t.Src[12:]) = b.SourceAddress()
	*(*[4]byte)(t.Dst[12:]) = b.DestinationAddress()
	t.Proto = p.Proto
	l4 := off + ihl
	p.L4Off = uint16(l4)
	p.PayloadOff = uint16(l4)
	if p.MoreFragments || p.FragOffset != 0 {
		p.Fragment = true
		p.FragID = uint32(b.ID())
		if p.FragOffset != 0 {
			// RFC 1858: a TCP fragment at offset 8 can only exist to
			// overwrite the flags of the first fragment.
			if p.Proto == ProtoTCP && p.FragOffset == 8 {
				return BadFragment
			}
			return OK
		}
	}
	return parseL4(frame[:off+total], l4, p)
}

func parseIPv6(frame []byte, off int, p *Parsed) Reason {
	b := header.IPv6(frame[off:])
	if len(b) < header.IPv6MinimumSize {
		return TruncatedIPv6
	}
	if b.Version() != header.IPv6Version {
		return BadIPv6Version
	}
	plen := int(b.PayloadLength())
	if header.IPv6MinimumSize+plen > len(b) {
		return BadIPv6PayloadLen
	}
	ipLen := header.IPv6MinimumSize + plen
	end := off + ipLen
	p.IPLen = uint16(ipLen)
	p.TOS = b.TrafficClass()
	p.TTL = b.HopLimit()
	t := &p.Tuple
	copy(t.Src[:], b.SourceSlice()) // not SourceAddress: see IPv6
	copy(t.Dst[:], b.DestinationSlice())
	t.V6 = true
	if mapped(&t.Src) || mapped(&t.Dst) {
		// IPv4-mapped addresses stand for IPv4 nodes inside a host's
		// stack and never appear on the wire (RFC 4291 §2.5.5.2). In a
		// tuple they are also how IPv4 addresses are kept, so
		// ::ffff:203.0.113.7 would reach the IPv4 VIP 203.0.113.7, and
		// ::ffff:127.0.0.1 would pass the IPv6 martian test.
		return MappedIPv6
	}
	nh, l4 := b.NextHeader(), header.IPv6MinimumSize
	if header.IPv6ExtAll.Has(nh) { // most packets have none: no call
		w := header.WalkIPv6Ext(b[:ipLen], l4, nh, header.IPv6ExtAll, MaxExtHeaders)
		switch w.Status {
		case header.IPv6ExtTooMany:
			return TooManyExtHeaders
		case header.IPv6ExtTruncated:
			return TruncatedExtHeader
		}
		if w.RoutingLeft {
			// The destination is only a hop of a route the sender
			// chose: a VIP there would have the backend (or the nodes
			// the header names) send the packet on to addresses of the
			// sender's. A routing header with no segment left is
			// processed as if absent; one after a fragment header with
			// a non-zero offset is payload, which the walk does not
			// read.
			return SourceRouted
		}
		if w.Fragments > 1 {
			// The walk keeps the last fragment header's fields: a first
			// fragment followed by an atomic one would pass for a whole
			// packet and be routed by its ports, away from the rest of
			// its datagram. No sender puts two in a chain (RFC 8200
			// §4.1).
			return BadFragment
		}
		// An atomic fragment (offset 0, no more fragments: a whole
		// packet behind a Fragment header, which hosts send after a
		// Packet Too Big below 1280) is not a fragment: RFC 6946 has it
		// processed as the packet it carries, so it stays with its
		// connection.
		if w.Fragment && (w.FragOffset != 0 || w.MoreFragments) {
			// RFC 8200 §4.5: a fragment that would end past 65,535
			// octets of payload, or a later one with M set whose data is
			// not a multiple of 8 octets, belongs to no datagram; the
			// receiver must discard it (a first fragment with M set and
			// an odd length is left to the backend, as before).
			if n := ipLen - w.FragEnd; w.FragOffset != 0 && w.MoreFragments && n&7 != 0 || int(w.FragOffset)+n > 65535 {
				return BadFragment
			}
			p.Fragment = true
			p.FragOffset = w.FragOffset
			p.MoreFragments = w.MoreFragments
			p.FragID = w.FragID
		}
		nh, l4 = w.Proto, w.Off
	}
	l4 += off
	p.Proto = nh
	t.Proto = nh
	p.L4Off = uint16(l4)
	p.PayloadOff = uint16(l4)
	if p.Fragment && p.FragOffset != 0 {
		// RFC 1858, as for IPv4: a TCP fragment at offset 8 can only
		// exist to overwrite the first fragment's flags, past the flag
		// check the first fragment passed.
		if p.Proto == ProtoTCP && p.FragOffset == 8 {
			return BadFragment
		}
		return OK
	}
	return parseL4(frame[:end], l4, p)
}

// parseL4 decodes the transport header at off; ip ends where the IP packet
// ends. For a first fragment the header is decoded but the ports are not
// put in the tuple, so every fragment of a datagram hashes alike.
func parseL4(ip []byte, off int, p *Parsed) Reason {
	b := ip[off:]
	switch p.Proto {
	case ProtoTCP:
		if len(b) < header.TCPMinimumSize {
			return TruncatedTCP
		}
		tcp := header.TCP(b)
		doff := tcp.DataOffset()
		if doff < header.TCPMinimumSize || doff > len(b) {
			return TruncatedTCP
		}
		p.TCPFlags = tcp.Flags()
		if badTCPFlags>>(p.TCPFlags&0x3f)&1 != 0 {
			return BadTCPFlags
		}
		p.PayloadOff = uint16(off + doff)
	case ProtoUDP:
		if len(b) < header.UDPMinimumSize {
			return TruncatedUDP
		}
		ul := int(header.UDP(b).Length())
		// Only a complete datagram's length can be checked against the
		// IP payload; a first fragment carries part of it.
		if ul < header.UDPMinimumSize || (!p.Fragment && ul > len(b)) {
			return BadUDPLen
		}
		p.PayloadOff = uint16(off + header.UDPMinimumSize)
	case ProtoICMP, ProtoICMPv6:
		if len(b) < header.ICMPv4MinimumSize { // = ICMPv6MinimumSize
			return TruncatedICMP
		}
		icmp := header.ICMPv4(b) // ICMPv6 has type and code alike
		p.ICMPType, p.ICMPCode = icmp.Type(), icmp.Code()
		p.PayloadOff = uint16(off + header.ICMPv4MinimumSize)
		return OK
	default:
		return OK
	}
	if !p.Fragment {
		p.Tuple.SrcPort, p.Tuple.DstPort = header.Ports(b)
	}
	return OK
}

// badTCPFlags has bit f set for each combination f of the six classic TCP
// flags (FIN..URG; ECE and CWR do not matter) that no TCP stack sends: SYN
// with RST or FIN (RFC 793 never combines them; scanners and stack
// fingerprinters do), no flag at all (a null scan: even a RST-less
// segment carries ACK once the connection exists), and FIN+PSH+URG
// without ACK (an Xmas scan). Linux's conntrack (tcp_valid_flags) refuses
// the same. One shift and mask per TCP packet classifies them.
var badTCPFlags = func() (m uint64) {
	for f := uint64(0); f < 64; f++ {
		syn, rst, fin := f&TCPSyn != 0, f&TCPRst != 0, f&TCPFin != 0
		xmas := f&(TCPFin|TCPPsh|TCPUrg|TCPAck) == TCPFin|TCPPsh|TCPUrg
		if syn && (rst || fin) || f == 0 || xmas {
			m |= 1 << f
		}
	}
	return m
}()

// sourceRoute4 reports whether the IPv4 options opts carry a loose or
// strict source route (RFC 791 LSRR, SSRR). The header's destination is
// then only the next hop of a route the sender chose: a VIP there would
// have the backend, or the hosts the route names, relay the packet on to
// the route's final address, which need not be a VIP. RFC 7126 §4.3-4.4
// has routers drop such packets by default, and Linux hosts refuse them
// (accept_source_route = 0). A malformed option list ends the walk: the
// backend's kernel refuses it.
func sourceRoute4(opts []byte) bool {
	for i := 0; i < len(opts); {
		switch t := opts[i]; t {
		case 0: // end of option list
			return false
		case 1: // no operation
			i++
			continue
		case 0x83, 0x89: // LSRR, SSRR (copied flag set)
			return true
		}
		if i+1 >= len(opts) || opts[i+1] < 2 {
			return false
		}
		i += int(opts[i+1])
	}
	return false
}

// mapped reports whether a is an IPv4-mapped IPv6 address (::ffff:0:0/96).
func mapped(a *[16]byte) bool {
	return binary.LittleEndian.Uint64(a[0:8]) == 0 && binary.LittleEndian.Uint32(a[8:12]) == 0xffff0000
}
