package packet

import (
	"github.com/fulcrumlb/fulcrum/flow"
	"github.com/fulcrumlb/fulcrum/header"
)

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
		ip := header.IPv4(q)
		if len(ip) < header.IPv4MinimumSize || ip.Version() != header.IPv4Version {
			return BadICMPQuote
		}
		ihl := ip.HeaderLength()
		if ihl < header.IPv4MinimumSize || len(ip) < ihl {
			return BadICMPQuote
		}
		quoted.SetV4(ip.SourceAddress(), ip.DestinationAddress())
		quoted.Proto = ip.Protocol()
		if ip.FragmentOffset() != 0 { // a later fragment: no ports, a 3-tuple
			return OK
		}
		// A first fragment carries the transport header: the flow's
		// ports, as an unfragmented packet.
		l4 = q[ihl:]
	} else {
		ip := header.IPv6(q)
		if len(ip) < header.IPv6MinimumSize || ip.Version() != header.IPv6Version {
			return BadICMPQuote
		}
		copy(quoted.Src[:], ip.SourceSlice())
		copy(quoted.Dst[:], ip.DestinationSlice())
		quoted.V6 = true
		// The walk goes on after a first (or atomic) fragment's header,
		// whose transport header follows (the flow's ports), and stops
		// after a later fragment's: that quote is a 3-tuple.
		w := header.WalkIPv6Ext(q, header.IPv6MinimumSize, ip.NextHeader(), header.IPv6ExtAll, MaxExtHeaders)
		if w.Status != header.IPv6ExtOK || w.Fragments > 1 {
			return BadICMPQuote
		}
		if w.Fragment && w.FragOffset != 0 {
			quoted.Proto = w.Proto
			return OK
		}
		quoted.Proto = w.Proto
		l4 = q[w.Off:]
	}
	switch quoted.Proto {
	case ProtoTCP, ProtoUDP:
		if len(l4) < 4 {
			return BadICMPQuote
		}
		quoted.SrcPort, quoted.DstPort = header.Ports(l4)
	}
	return OK
}
