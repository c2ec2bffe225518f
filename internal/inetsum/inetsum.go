// Package inetsum is the Internet checksum (RFC 1071) arithmetic shared by
// the encapsulator and the traffic generator. Partial sums are carried
// unfolded in a uint64 as the sum of big-endian 16-bit words and folded once
// at the end, with end-around carry; a frame's worth of words cannot
// overflow 64 bits.
package inetsum

import (
	"encoding/binary"
	"math/bits"
)

// Fold reduces an unfolded sum to 16 bits with end-around carry.
func Fold(s uint64) uint16 {
	s = s>>32 + s&0xffffffff
	s = s>>32 + s&0xffffffff
	s = s>>16 + s&0xffff
	s = s>>16 + s&0xffff
	return uint16(s)
}

// Add adds b's big-endian 16-bit words to s, an odd last byte padded with
// zero (so b must end the checksummed data or be of even length). It is
// the one byte-summing loop of the project: 64-bit little-endian loads
// with a carry chain, folded and byte-swapped at the end, which RFC 1071
// §2(B) shows is the same sum (the byte order of the words does not
// matter to a ones'-complement sum, as long as it is undone at the end).
func Add(s uint64, b []byte) uint64 {
	var x, c uint64
	for len(b) >= 32 {
		x, c = bits.Add64(x, binary.LittleEndian.Uint64(b[0:8]), c)
		x, c = bits.Add64(x, binary.LittleEndian.Uint64(b[8:16]), c)
		x, c = bits.Add64(x, binary.LittleEndian.Uint64(b[16:24]), c)
		x, c = bits.Add64(x, binary.LittleEndian.Uint64(b[24:32]), c)
		b = b[32:]
	}
	for len(b) >= 8 {
		x, c = bits.Add64(x, binary.LittleEndian.Uint64(b[0:8]), c)
		b = b[8:]
	}
	if len(b) >= 4 {
		x, c = bits.Add64(x, uint64(binary.LittleEndian.Uint32(b)), c)
		b = b[4:]
	}
	if len(b) >= 2 {
		x, c = bits.Add64(x, uint64(binary.LittleEndian.Uint16(b)), c)
		b = b[2:]
	}
	if len(b) == 1 {
		// An even offset: in little-endian words it is the low byte.
		x, c = bits.Add64(x, uint64(b[0]), c)
	}
	x, c = bits.Add64(x, 0, c)
	x += c // x is 0 when it carried here, so this cannot carry again
	return s + uint64(bits.ReverseBytes16(Fold(x)))
}
