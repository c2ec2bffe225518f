package maglev

import "strconv"

// Hash is the chapter's h(name, seed) (seed chapter, section 3.4): the first
// 8 bytes, read big-endian, of BLAKE2b with an 8-byte digest over the string
// "<name>/<seed>". BLAKE2b's digest size is a parameter of the hash itself,
// so this is not a truncated BLAKE2b-512. Build derives each backend's offset
// (seed 1) and skip (seed 2) from it; it is part of the fleet's contract,
// because every instance must compute the same table from the same backends.
func Hash(name string, seed uint64) uint64 {
	var h namedHasher
	return h.sum(name, seed)
}

// namedHasher reuses one buffer across the 2N hashes of a build.
type namedHasher struct {
	buf []byte
}

func (h *namedHasher) sum(name string, seed uint64) uint64 {
	h.buf = append(h.buf[:0], name...)
	h.buf = append(h.buf, '/')
	h.buf = strconv.AppendUint(h.buf, seed, 10)
	return blake2b8(h.buf)
}
