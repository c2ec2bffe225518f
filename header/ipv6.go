package header

// IPv6 field offsets (RFC 8200 §3).
const (
	IPv6VersTCFLOffset   = 0 // version, traffic class, flow label: one 32-bit word
	IPv6PayloadLenOffset = 4
	IPv6NextHeaderOffset = 6
	IPv6HopLimitOffset   = 7
	IPv6SrcAddrOffset    = 8
	IPv6DstAddrOffset    = 24

	// IPv6MinimumSize is the fixed header.
	IPv6MinimumSize = 40
	// IPv6Version is the version nibble's value.
	IPv6Version = 6
)

// IPv6 is a view of an IPv6 fixed header (and, when the slice goes on,
// what follows it). Every accessor needs the first IPv6MinimumSize bytes.
//
// The compiler keeps a 16-byte array in memory, not in registers, so
// SourceAddress and SetSourceAddress (and the destination's) copy through
// the stack. On the fast path copy to or from SourceSlice instead: one
// 16-byte load and store.
type IPv6 []byte

// Version is the version nibble (6 for an IPv6 header).
func (b IPv6) Version() uint8 { return b[0] >> 4 }

// TrafficClass is the traffic class (DSCP and ECN).
func (b IPv6) TrafficClass() uint8 { return uint8(be.Uint16(b[IPv6VersTCFLOffset:]) >> 4) }

// FlowLabel is the 20-bit flow label.
func (b IPv6) FlowLabel() uint32 { return be.Uint32(b[IPv6VersTCFLOffset:]) & 0xfffff }

// PayloadLength is the length of what follows the fixed header.
func (b IPv6) PayloadLength() uint16 { return be.Uint16(b[IPv6PayloadLenOffset:]) }

// NextHeader is the header after the fixed header: an extension header or
// the upper-layer protocol.
func (b IPv6) NextHeader() uint8 { return b[IPv6NextHeaderOffset] }

// HopLimit is the hop limit.
func (b IPv6) HopLimit() uint8 { return b[IPv6HopLimitOffset] }

// SourceAddress is the source address.
func (b IPv6) SourceAddress() [16]byte { return [16]byte(b[IPv6SrcAddrOffset:]) }

// DestinationAddress is the destination address.
func (b IPv6) DestinationAddress() [16]byte { return [16]byte(b[IPv6DstAddrOffset:]) }

// SourceSlice is the source address's bytes, in place.
func (b IPv6) SourceSlice() []byte { return b[IPv6SrcAddrOffset : IPv6SrcAddrOffset+16] }

// DestinationSlice is the destination address's bytes, in place.
func (b IPv6) DestinationSlice() []byte { return b[IPv6DstAddrOffset : IPv6DstAddrOffset+16] }

// AddressSum is the unfolded sum of the source and destination addresses,
// the part of an upper-layer pseudo-header (RFC 8200 §8.1) the header holds.
func (b IPv6) AddressSum() uint64 {
	_ = b[IPv6MinimumSize-1]
	return uint64(be.Uint32(b[8:])) + uint64(be.Uint32(b[12:])) +
		uint64(be.Uint32(b[16:])) + uint64(be.Uint32(b[20:])) +
		uint64(be.Uint32(b[24:])) + uint64(be.Uint32(b[28:])) +
		uint64(be.Uint32(b[32:])) + uint64(be.Uint32(b[36:]))
}

// SetVersionTrafficClassFlowLabel sets the first word: version 6, traffic
// class tc and flow label fl (its low 20 bits).
func (b IPv6) SetVersionTrafficClassFlowLabel(tc uint8, fl uint32) {
	be.PutUint32(b[IPv6VersTCFLOffset:], IPv6Version<<28|uint32(tc)<<20|fl&0xfffff)
}

// SetPayloadLength sets the payload length.
func (b IPv6) SetPayloadLength(n uint16) { be.PutUint16(b[IPv6PayloadLenOffset:], n) }

// SetNextHeader sets the next header.
func (b IPv6) SetNextHeader(nh uint8) { b[IPv6NextHeaderOffset] = nh }

// SetHopLimit sets the hop limit.
func (b IPv6) SetHopLimit(v uint8) { b[IPv6HopLimitOffset] = v }

// SetSourceAddress sets the source address.
func (b IPv6) SetSourceAddress(a [16]byte) { *(*[16]byte)(b[IPv6SrcAddrOffset:]) = a }

// SetDestinationAddress sets the destination address.
func (b IPv6) SetDestinationAddress(a [16]byte) { *(*[16]byte)(b[IPv6DstAddrOffset:]) = a }

// SwapAddresses exchanges the source and destination addresses, as a reply
// built in place needs. The pseudo-header sum does not change.
func (b IPv6) SwapAddresses() {
	s, d := b.SourceAddress(), b.DestinationAddress()
	b.SetSourceAddress(d)
	b.SetDestinationAddress(s)
}
