package encap

import (
	"github.com/fulcrumlb/fulcrum/header"
	"github.com/fulcrumlb/fulcrum/internal/inetsum"
)

// Internet checksum (RFC 1071) helpers. Partial sums are carried unfolded in
// a uint64 as the sum of big-endian 16-bit words; folding with end-around
// carry happens once, at the end. Sums of a few hundred terms cannot
// overflow 64 bits.

// fold reduces an unfolded sum to 16 bits (one implementation for the
// project, in internal/inetsum).
func fold(s uint64) uint16 { return inetsum.Fold(s) }

// sumBytes is the ones'-complement sum of b as big-endian 16-bit words, an
// odd last byte padded with zero: the project's one summing loop,
// inetsum.Add.
func sumBytes(b []byte) uint64 { return inetsum.Add(0, b) }

// innerSum is the ones'-complement sum of the IP packet pkt, which the
// outer UDP checksum of GUE over IPv6 must cover. For the common inner
// packets it costs a constant few loads instead of a pass over the payload:
// the checksum a sender put in an IPv4 header, a TCP, UDP or ICMPv6 segment
// makes that part sum to zero together with its pseudo-header, so the part's
// own sum is the negated pseudo-header sum (Linux calls this local checksum
// offload, Documentation/networking/checksum-offloads.rst). An inner packet
// whose own checksum is wrong thus gets a wrong outer checksum too and is
// dropped by the backend, which would have dropped it anyway. Everything
// else (fragments, IPv6 extension headers, UDP without checksum, other
// protocols, lengths that disagree with the header) is summed byte by byte.
func innerSum(pkt []byte, v6 bool) uint64 {
	if !v6 {
		ip := header.IPv4(pkt)
		if len(ip) < ipv4Len {
			return sumBytes(pkt)
		}
		ihl := ip.HeaderLength()
		if ihl < ipv4Len || ihl > len(pkt) || int(ip.TotalLength()) != len(pkt) || ip.IsFragment() {
			return sumBytes(pkt)
		}
		seg := len(pkt) - ihl
		// A valid IPv4 header sums to 0xffff, which is zero; only the
		// segment contributes.
		switch proto := ip.Protocol(); proto {
		case protoTCP, protoUDP:
			if !segChecksummed(pkt[ihl:], proto) {
				return sumBytes(pkt)
			}
			return uint64(^fold(header.PseudoHeaderSum(ip.AddressSum(), proto, seg)))
		case protoICMP:
			// The ICMP checksum covers the message alone.
			if seg < 8 {
				return sumBytes(pkt)
			}
			return 0
		}
		return sumBytes(pkt)
	}
	ip := header.IPv6(pkt)
	if len(ip) < ipv6Len || ipv6Len+int(ip.PayloadLength()) != len(pkt) {
		return sumBytes(pkt)
	}
	switch nh := ip.NextHeader(); nh {
	case protoTCP, protoUDP, protoICMPv6:
		if !segChecksummed(pkt[ipv6Len:], nh) {
			return sumBytes(pkt)
		}
		hdr := inetsum.Add(0, pkt[:ipv6Len])
		return hdr + uint64(^fold(header.PseudoHeaderSum(ip.AddressSum(), nh, len(pkt)-ipv6Len)))
	}
	return sumBytes(pkt)
}

// segChecksummed reports whether seg is long enough to hold its protocol's
// header and carries a checksum (UDP may send zero: none).
func segChecksummed(seg []byte, proto uint8) bool {
	switch proto {
	case protoTCP:
		return len(seg) >= header.TCPMinimumSize
	case protoUDP:
		// The UDP checksum covers the UDP length only, which is also the
		// pseudo-header's length: a surplus area past it (RFC 9868 UDP
		// options) is not covered, so the shortcut does not hold.
		return len(seg) >= header.UDPMinimumSize && header.UDP(seg).Checksum() != 0 &&
			int(header.UDP(seg).Length()) == len(seg)
	case protoICMPv6:
		return len(seg) >= header.ICMPv6MinimumSize
	}
	return false
}
