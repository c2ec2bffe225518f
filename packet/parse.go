package packet

import "encoding/binary"

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
	if len(frame) < 14 {
		return TruncatedEthernet
	}
	off := 12
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
		off += 4
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
	b := frame[off:]
	if len(b) < 20 {
		return TruncatedIPv4
	}
	if b[0]>>4 != 4 {
		return BadIPv4Version
	}
	ihl := int(b[0]&0x0f) * 4
	if ihl < 20 {
		return BadIPv4HeaderLen
	}
	if len(b) < ihl {
		return TruncatedIPv4
	}
	total := int(be.Uint16(b[2:]))
	if total < ihl || total > len(b) {
		return BadIPv4TotalLen
	}
	p.IPLen = uint16(total)
	p.TOS = b[1]
	p.TTL = b[8]
	p.Proto = b[9]
	ff := be.Uint16(b[6:])
	p.IPv4DF = ff&0x4000 != 0
	p.MoreFragments = ff&0x2000 != 0
	p.FragOffset = (ff & 0x1fff) << 3
	t := &p.Tuple
	t.Src[10], t.Src[11] = 0xff, 0xff
	t.Dst[10], t.Dst[11] = 0xff, 0xff
	copy(t.Src[12:], b[12:16])
	copy(t.Dst[12:], b[16:20])
	t.Proto = p.Proto
	l4 := off + ihl
	p.L4Off = uint16(l4)
	p.PayloadOff = uint16(l4)
	if p.MoreFragments || p.FragOffset != 0 {
		p.Fragment = true
		p.FragID = uint32(be.Uint16(b[4:]))
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

// isIPv6Ext reports whether nh is an IPv6 extension header the parser walks.
func isIPv6Ext(nh uint8) bool {
	switch nh {
	case 0, 43, 44, 60, 51: // hop-by-hop, routing, fragment, destination options, AH
		return true
	}
	return false
}

func parseIPv6(frame []byte, off int, p *Parsed) Reason {
	b := frame[off:]
	if len(b) < 40 {
		return TruncatedIPv6
	}
	if b[0]>>4 != 6 {
		return BadIPv6Version
	}
	plen := int(be.Uint16(b[4:]))
	if 40+plen > len(b) {
		return BadIPv6PayloadLen
	}
	end := off + 40 + plen
	p.IPLen = uint16(40 + plen)
	p.TOS = uint8(be.Uint16(b[0:]) >> 4)
	p.TTL = b[7]
	t := &p.Tuple
	copy(t.Src[:], b[8:24])
	copy(t.Dst[:], b[24:40])
	t.V6 = true
	nh := b[6]
	l4 := off + 40
	for n := 0; isIPv6Ext(nh); n++ {
		if n == MaxExtHeaders {
			return TooManyExtHeaders
		}
		if l4+8 > end {
			return TruncatedExtHeader
		}
		h := frame[l4:end]
		var hlen int
		switch nh {
		case 44: // fragment header, RFC 8200 4.5: fixed 8 bytes
			hlen = 8
			fo := be.Uint16(h[2:])
			p.Fragment = true
			p.FragOffset = fo &^ 7
			p.MoreFragments = fo&1 != 0
			p.FragID = be.Uint32(h[4:])
		case 51: // AH, RFC 4302: length in 4-octet units minus 2
			hlen = (int(h[1]) + 2) * 4
		default: // length in 8-octet units, not counting the first 8
			hlen = (int(h[1]) + 1) * 8
		}
		if l4+hlen > end {
			return TruncatedExtHeader
		}
		nh = h[0]
		l4 += hlen
		if p.Fragment && p.FragOffset != 0 {
			// The rest of a non-first fragment is payload, not headers.
			break
		}
	}
	p.Proto = nh
	t.Proto = nh
	p.L4Off = uint16(l4)
	p.PayloadOff = uint16(l4)
	if p.Fragment && p.FragOffset != 0 {
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
		if len(b) < 20 {
			return TruncatedTCP
		}
		doff := int(b[12]>>4) * 4
		if doff < 20 || doff > len(b) {
			return TruncatedTCP
		}
		p.TCPFlags = b[13]
		if badTCPFlags>>(p.TCPFlags&0x3f)&1 != 0 {
			return BadTCPFlags
		}
		p.PayloadOff = uint16(off + doff)
	case ProtoUDP:
		if len(b) < 8 {
			return TruncatedUDP
		}
		ul := int(be.Uint16(b[4:]))
		// Only a complete datagram's length can be checked against the
		// IP payload; a first fragment carries part of it.
		if ul < 8 || (!p.Fragment && ul > len(b)) {
			return BadUDPLen
		}
		p.PayloadOff = uint16(off + 8)
	case ProtoICMP, ProtoICMPv6:
		if len(b) < 8 {
			return TruncatedICMP
		}
		p.ICMPType, p.ICMPCode = b[0], b[1]
		p.PayloadOff = uint16(off + 8)
		return OK
	default:
		return OK
	}
	if !p.Fragment {
		p.Tuple.SrcPort = be.Uint16(b[0:])
		p.Tuple.DstPort = be.Uint16(b[2:])
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
