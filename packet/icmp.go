package packet

import "github.com/fulcrumlb/fulcrum/flow"

// IsICMPError reports whether p is an ICMP or ICMPv6 error message, the kind
// that quotes the packet that caused it (RFC 792, RFC 4443 section 2.1).
func (p *Parsed) IsICMPError() bool {
	if p.Fragment {
		return false
	}
	switch {
	case p.L3 == L3IPv4 && p.Proto == ProtoICMP:
		switch p.ICMPType {
		case 3, 4, 5, 11, 12: // unreachable, source quench, redirect, time exceeded, parameter problem
			return true
		}
	case p.L3 == L3IPv6 && p.Proto == ProtoICMPv6:
		return p.ICMPType < 128 // 1-4: unreachable, too big, time exceeded, parameter problem
	}
	return false
}

// ParseICMPError decodes the packet quoted by the ICMP error p (decoded from
// frame) and stores its 5-tuple in quoted. The quote starts 8 bytes into the
// ICMP message and holds at least the IP header and the first 8 bytes of the
// transport header (enough for the ports); its own length fields describe
// the original packet and are not checked against the quote.
//
// The quoted packet is one the backend sent toward the client (DSR: from
// the VIP), so quoted.Reverse() is the client's flow, whose hash finds the
// backend that owns it.
func ParseICMPError(frame []byte, p *Parsed, quoted *flow.Tuple) Reason {
	*quoted = flow.Tuple{}
	if !p.IsICMPError() {
		return NotICMPError
	}
	end := int(p.L3Off) + int(p.IPLen)
	start := int(p.L4Off) + 8
	if end > len(frame) || start > end {
		return BadICMPQuote
	}
	q := frame[start:end]
	var l4 []byte
	if p.L3 == L3IPv4 {
		if len(q) < 20 || q[0]>>4 != 4 {
			return BadICMPQuote
		}
		ihl := int(q[0]&0x0f) * 4
		if ihl < 20 || len(q) < ihl {
			return BadICMPQuote
		}
		var s, d [4]byte
		copy(s[:], q[12:16])
		copy(d[:], q[16:20])
		quoted.SetV4(s, d)
		quoted.Proto = q[9]
		if be.Uint16(q[6:])&0x3fff != 0 { // quoted packet was a fragment: 3-tuple
			return OK
		}
		l4 = q[ihl:]
	} else {
		if len(q) < 40 || q[0]>>4 != 6 {
			return BadICMPQuote
		}
		copy(quoted.Src[:], q[8:24])
		copy(quoted.Dst[:], q[24:40])
		quoted.V6 = true
		nh := q[6]
		o := 40
		for n := 0; isIPv6Ext(nh); n++ {
			if n == MaxExtHeaders || o+8 > len(q) {
				return BadICMPQuote
			}
			if nh == 44 {
				quoted.Proto = q[o]
				return OK // a fragment: 3-tuple, whatever follows
			}
			hlen := (int(q[o+1]) + 1) * 8
			if nh == 51 {
				hlen = (int(q[o+1]) + 2) * 4
			}
			nh = q[o]
			o += hlen
		}
		if o > len(q) {
			return BadICMPQuote
		}
		quoted.Proto = nh
		l4 = q[o:]
	}
	switch quoted.Proto {
	case ProtoTCP, ProtoUDP:
		if len(l4) < 4 {
			return BadICMPQuote
		}
		quoted.SrcPort = be.Uint16(l4[0:])
		quoted.DstPort = be.Uint16(l4[2:])
	}
	return OK
}
