package header

import "github.com/fulcrumlb/fulcrum/internal/inetsum"

// Pseudo-header sums. A transport checksum (TCP, UDP, ICMPv6) covers a
// pseudo-header of the addresses, the protocol and the upper-layer length
// (RFC 9293 §3.1, RFC 768, RFC 8200 §8.1) besides the segment. Sums are
// unfolded, as in internal/inetsum, and folded once by the caller.

// PseudoHeaderSum is the unfolded sum of a pseudo-header whose addresses
// sum to addrSum (IPv4.AddressSum, IPv6.AddressSum): the IPv4 and IPv6
// layouts differ, but their sums are the same terms.
func PseudoHeaderSum(addrSum uint64, proto uint8, length int) uint64 {
	return addrSum + uint64(proto) + uint64(length)
}

// Checksum is the Internet checksum (RFC 1071) of b on top of the unfolded
// sum initial: the value a checksum field holds.
func Checksum(b []byte, initial uint64) uint16 { return ^inetsum.Fold(inetsum.Add(initial, b)) }

func foldSum(s uint64) uint16 { return inetsum.Fold(s) }
