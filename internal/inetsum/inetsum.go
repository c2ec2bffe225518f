// Package inetsum is the Internet checksum (RFC 1071) arithmetic shared by
// the encapsulator and the traffic generator. Partial sums are carried
// unfolded in a uint64 as the sum of big-endian 16-bit words and folded once
// at the end, with end-around carry; a frame's worth of words cannot
// overflow 64 bits.
package inetsum

import "encoding/binary"

// Fold reduces an unfolded sum to 16 bits with end-around carry.
func Fold(s uint64) uint16 {
	s = s>>32 + s&0xffffffff
	s = s>>32 + s&0xffffffff
	s = s>>16 + s&0xffff
	s = s>>16 + s&0xffff
	return uint16(s)
}

// Add adds b's big-endian 16-bit words to s, an odd last byte padded with
// zero (so b must end the checksummed data or be of even length).
func Add(s uint64, b []byte) uint64 {
	for len(b) >= 4 {
		s += uint64(binary.BigEndian.Uint32(b))
		b = b[4:]
	}
	if len(b) >= 2 {
		s += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint64(b[0]) << 8
	}
	return s
}
