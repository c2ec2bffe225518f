package header

import "github.com/fulcrumlb/fulcrum/internal/inetsum"

// IPv4 field offsets (RFC 791 §3.1).
const (
	IPv4VersIHLOffset  = 0
	IPv4TOSOffset      = 1
	IPv4TotalLenOffset = 2
	IPv4IDOffset       = 4
	IPv4FlagsOffset    = 6 // flags and fragment offset, one 16-bit word
	IPv4TTLOffset      = 8
	IPv4ProtocolOffset = 9
	IPv4ChecksumOffset = 10
	IPv4SrcAddrOffset  = 12
	IPv4DstAddrOffset  = 16

	// IPv4MinimumSize is a header without options (IHL 5).
	IPv4MinimumSize = 20
	// IPv4Version is the version nibble's value.
	IPv4Version = 4
)

// Bits of the IPv4 flags/fragment-offset word.
const (
	IPv4FlagDF         = 0x4000 // don't fragment
	IPv4FlagMF         = 0x2000 // more fragments
	IPv4FragOffsetMask = 0x1fff // in 8-octet units
)

// IPv4 is a view of an IPv4 header (and, when the slice goes on, its
// payload). Every accessor needs the first IPv4MinimumSize bytes; the
// checksum needs HeaderLength.
type IPv4 []byte

// Version is the version nibble (4 for an IPv4 header).
func (b IPv4) Version() uint8 { return b[IPv4VersIHLOffset] >> 4 }

// HeaderLength is the header's length in bytes, options included (IHL×4).
func (b IPv4) HeaderLength() int { return int(b[IPv4VersIHLOffset]&0x0f) * 4 }

// TOS is the type-of-service byte (DSCP and ECN).
func (b IPv4) TOS() uint8 { return b[IPv4TOSOffset] }

// TotalLength is the packet's length, header included, as the header says.
func (b IPv4) TotalLength() uint16 { return be.Uint16(b[IPv4TotalLenOffset:]) }

// ID is the identification field.
func (b IPv4) ID() uint16 { return be.Uint16(b[IPv4IDOffset:]) }

// FlagsFragmentOffset is the flags/fragment-offset word as it is on the
// wire (IPv4FlagDF, IPv4FlagMF, IPv4FragOffsetMask).
func (b IPv4) FlagsFragmentOffset() uint16 { return be.Uint16(b[IPv4FlagsOffset:]) }

// DontFragment reports whether DF is set.
func (b IPv4) DontFragment() bool { return b.FlagsFragmentOffset()&IPv4FlagDF != 0 }

// MoreFragments reports whether MF is set.
func (b IPv4) MoreFragments() bool { return b.FlagsFragmentOffset()&IPv4FlagMF != 0 }

// FragmentOffset is the fragment's offset in bytes.
func (b IPv4) FragmentOffset() uint16 { return (b.FlagsFragmentOffset() & IPv4FragOffsetMask) << 3 }

// IsFragment reports whether the packet is a fragment: MF set or a non-zero
// offset.
func (b IPv4) IsFragment() bool {
	return b.FlagsFragmentOffset()&(IPv4FlagMF|IPv4FragOffsetMask) != 0
}

// TTL is the time to live.
func (b IPv4) TTL() uint8 { return b[IPv4TTLOffset] }

// Protocol is the payload's IP protocol number.
func (b IPv4) Protocol() uint8 { return b[IPv4ProtocolOffset] }

// Checksum is the header checksum field.
func (b IPv4) Checksum() uint16 { return be.Uint16(b[IPv4ChecksumOffset:]) }

// SourceAddress is the source address.
func (b IPv4) SourceAddress() [4]byte { return [4]byte(b[IPv4SrcAddrOffset:]) }

// DestinationAddress is the destination address.
func (b IPv4) DestinationAddress() [4]byte { return [4]byte(b[IPv4DstAddrOffset:]) }

// SourceSlice is the source address's bytes, in place.
func (b IPv4) SourceSlice() []byte { return b[IPv4SrcAddrOffset : IPv4SrcAddrOffset+4] }

// DestinationSlice is the destination address's bytes, in place.
func (b IPv4) DestinationSlice() []byte { return b[IPv4DstAddrOffset : IPv4DstAddrOffset+4] }

// AddressSum is the unfolded sum of the source and destination addresses,
// the part of a TCP/UDP pseudo-header (RFC 768) the header holds.
func (b IPv4) AddressSum() uint64 {
	return uint64(be.Uint32(b[IPv4SrcAddrOffset:])) + uint64(be.Uint32(b[IPv4DstAddrOffset:]))
}

// SetHeaderLength sets version 4 and IHL for a header of hl bytes (a
// multiple of 4, at most 60).
func (b IPv4) SetHeaderLength(hl int) { b[IPv4VersIHLOffset] = IPv4Version<<4 | uint8(hl/4) }

// SetTOS sets the type-of-service byte.
func (b IPv4) SetTOS(v uint8) { b[IPv4TOSOffset] = v }

// SetTotalLength sets the total length.
func (b IPv4) SetTotalLength(n uint16) { be.PutUint16(b[IPv4TotalLenOffset:], n) }

// SetID sets the identification field.
func (b IPv4) SetID(id uint16) { be.PutUint16(b[IPv4IDOffset:], id) }

// SetFlagsFragmentOffset sets the flags/fragment-offset word.
func (b IPv4) SetFlagsFragmentOffset(v uint16) { be.PutUint16(b[IPv4FlagsOffset:], v) }

// SetTTL sets the time to live.
func (b IPv4) SetTTL(v uint8) { b[IPv4TTLOffset] = v }

// SetProtocol sets the payload's protocol number.
func (b IPv4) SetProtocol(p uint8) { b[IPv4ProtocolOffset] = p }

// SetChecksum sets the header checksum field.
func (b IPv4) SetChecksum(c uint16) { be.PutUint16(b[IPv4ChecksumOffset:], c) }

// SetSourceAddress sets the source address.
func (b IPv4) SetSourceAddress(a [4]byte) { *(*[4]byte)(b[IPv4SrcAddrOffset:]) = a }

// SetDestinationAddress sets the destination address.
func (b IPv4) SetDestinationAddress(a [4]byte) { *(*[4]byte)(b[IPv4DstAddrOffset:]) = a }

// SwapAddresses exchanges the source and destination addresses, as a reply
// built in place needs.
func (b IPv4) SwapAddresses() {
	s, d := b.SourceAddress(), b.DestinationAddress()
	b.SetSourceAddress(d)
	b.SetDestinationAddress(s)
}

// CalculateChecksum is the header checksum (RFC 791, RFC 1071) of the
// HeaderLength bytes, computed as if the checksum field were zero: the
// value SetChecksum stores. The common 20-byte header is five loads. A
// header whose IHL claims fewer than 20 bytes (malformed on purpose, as the
// traffic generator writes them) is summed over its first 20.
func (b IPv4) CalculateChecksum() uint16 {
	hl := b.HeaderLength()
	_ = b[IPv4MinimumSize-1]
	s := uint64(be.Uint32(b[0:])) + uint64(be.Uint32(b[4:])) +
		uint64(be.Uint16(b[8:])) + // TTL, protocol; not the checksum
		uint64(be.Uint32(b[12:])) + uint64(be.Uint32(b[16:]))
	if hl > IPv4MinimumSize {
		s = inetsum.Add(s, b[IPv4MinimumSize:hl])
	}
	return ^inetsum.Fold(s)
}

// UpdateChecksum recomputes and sets the header checksum.
func (b IPv4) UpdateChecksum() { b.SetChecksum(b.CalculateChecksum()) }

// IsChecksumValid reports whether the HeaderLength bytes, checksum field
// included, sum to all ones (RFC 1071 §1: the receiver's check).
func (b IPv4) IsChecksumValid() bool {
	return inetsum.Fold(inetsum.Add(0, b[:b.HeaderLength()])) == 0xffff
}

// IPv4HeaderSum is the unfolded checksum sum of the words of a 20-byte
// header (version 4, IHL 5) other than the addresses and the checksum. A
// writer that keeps the address sums checksums the header from the values
// it writes, ^Fold(IPv4HeaderSum(...) + address sums), instead of reading
// back the bytes just stored: that read-back costs a store-forwarding
// stall that tripled encap's time.
func IPv4HeaderSum(tos uint8, totalLength, id, flagsFragmentOffset uint16, ttl, proto uint8) uint64 {
	return (0x45<<8 | uint64(tos)) + uint64(totalLength) + uint64(id) +
		uint64(flagsFragmentOffset) + (uint64(ttl)<<8 | uint64(proto))
}
