package maglev

import (
	"encoding/binary"
	"math/bits"
)

// blake2b8 is BLAKE2b (RFC 7693) with an 8-byte digest and no key, over
// msg: the first 8 bytes of the digest, read big-endian. It is Hash's
// function written out for that one digest size, without the hash.Hash
// state, its copies and its padding buffer: a backend key and its seed
// make a single 128-byte block, hashed about twice as fast
// (TestBlake2b8MatchesXCrypto checks it against golang.org/x/crypto).
func blake2b8(msg []byte) uint64 {
	h := blake2bIV
	h[0] ^= 0x01010000 | 8 // parameter block: digest length 8, no key, fanout 1, depth 1
	var block [16]uint64
	t := uint64(0)
	for len(msg) > 128 {
		t += 128
		for i := range block {
			block[i] = binary.LittleEndian.Uint64(msg[8*i:])
		}
		blake2bCompress(&h, &block, t, false)
		msg = msg[128:]
	}
	// The last block, zero-padded; an empty message is one zero block.
	var last [128]byte
	copy(last[:], msg)
	t += uint64(len(msg))
	for i := range block {
		block[i] = binary.LittleEndian.Uint64(last[8*i:])
	}
	blake2bCompress(&h, &block, t, true)
	return bits.ReverseBytes64(h[0]) // the digest is h[0]'s bytes, little-endian first
}

var blake2bIV = [8]uint64{
	0x6a09e667f3bcc908, 0xbb67ae8584caa73b, 0x3c6ef372fe94f82b, 0xa54ff53a5f1d36f1,
	0x510e527fade682d1, 0x9b05688c2b3e6c1f, 0x1f83d9abfb41bd6b, 0x5be0cd19137e2179,
}

// blake2bSigma is the message word schedule of RFC 7693, section 2.7;
// rounds 10 and 11 reuse rows 0 and 1.
var blake2bSigma = [12][16]uint8{
	{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
	{14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
	{11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
	{7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
	{9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
	{2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
	{12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
	{13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
	{6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
	{10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
	{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
	{14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
}

// blake2bCompress is the compression function F of RFC 7693, section 3.2,
// with the byte counter t below 2^64 (its high word 0).
func blake2bCompress(h *[8]uint64, m *[16]uint64, t uint64, final bool) {
	v0, v1, v2, v3, v4, v5, v6, v7 := h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]
	v8, v9, v10, v11 := blake2bIV[0], blake2bIV[1], blake2bIV[2], blake2bIV[3]
	v12, v13, v14, v15 := blake2bIV[4]^t, blake2bIV[5], blake2bIV[6], blake2bIV[7]
	if final {
		v14 = ^v14
	}
	for r := range 12 {
		s := &blake2bSigma[r]
		// G on the columns, then on the diagonals (RFC 7693, section 3.1).
		v0, v4, v8, v12 = blake2bG(v0, v4, v8, v12, m[s[0]], m[s[1]])
		v1, v5, v9, v13 = blake2bG(v1, v5, v9, v13, m[s[2]], m[s[3]])
		v2, v6, v10, v14 = blake2bG(v2, v6, v10, v14, m[s[4]], m[s[5]])
		v3, v7, v11, v15 = blake2bG(v3, v7, v11, v15, m[s[6]], m[s[7]])
		v0, v5, v10, v15 = blake2bG(v0, v5, v10, v15, m[s[8]], m[s[9]])
		v1, v6, v11, v12 = blake2bG(v1, v6, v11, v12, m[s[10]], m[s[11]])
		v2, v7, v8, v13 = blake2bG(v2, v7, v8, v13, m[s[12]], m[s[13]])
		v3, v4, v9, v14 = blake2bG(v3, v4, v9, v14, m[s[14]], m[s[15]])
	}
	h[0] ^= v0 ^ v8
	h[1] ^= v1 ^ v9
	h[2] ^= v2 ^ v10
	h[3] ^= v3 ^ v11
	h[4] ^= v4 ^ v12
	h[5] ^= v5 ^ v13
	h[6] ^= v6 ^ v14
	h[7] ^= v7 ^ v15
}

// blake2bG is the mixing function G of RFC 7693, section 3.1.
func blake2bG(a, b, c, d, x, y uint64) (uint64, uint64, uint64, uint64) {
	a += b + x
	d = bits.RotateLeft64(d^a, -32)
	c += d
	b = bits.RotateLeft64(b^c, -24)
	a += b + y
	d = bits.RotateLeft64(d^a, -16)
	c += d
	b = bits.RotateLeft64(b^c, -63)
	return a, b, c, d
}
