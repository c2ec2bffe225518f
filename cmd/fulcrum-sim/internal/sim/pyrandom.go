package sim

// pyRandom is MT19937 seeded and read exactly as CPython's random module
// does it (Modules/_randommodule.c), so that the comparison draws the same
// flow hashes as the seed chapter's script: random.Random(seed) seeds with
// init_by_array over the seed's 32-bit words, least significant first, and
// getrandbits(64) joins two outputs with the first as the LOW 32 bits.
type pyRandom struct {
	mt  [mtN]uint32
	idx int
}

const (
	mtN = 624
	mtM = 397
)

// newPyRandom is random.Random(seed) for a non-negative integer seed.
func newPyRandom(seed uint64) *pyRandom {
	key := []uint32{uint32(seed)} // seed 0 is the key [0], as in CPython
	if hi := uint32(seed >> 32); hi != 0 {
		key = append(key, hi)
	}
	r := &pyRandom{}
	r.initByArray(key)
	return r
}

func (r *pyRandom) initGenrand(s uint32) {
	r.mt[0] = s
	for i := 1; i < mtN; i++ {
		r.mt[i] = 1812433253*(r.mt[i-1]^(r.mt[i-1]>>30)) + uint32(i)
	}
	r.idx = mtN
}

func (r *pyRandom) initByArray(key []uint32) {
	r.initGenrand(19650218)
	i, j := 1, 0
	for k := max(mtN, len(key)); k > 0; k-- {
		r.mt[i] = (r.mt[i] ^ ((r.mt[i-1] ^ (r.mt[i-1] >> 30)) * 1664525)) + key[j] + uint32(j)
		i++
		j++
		if i >= mtN {
			r.mt[0] = r.mt[mtN-1]
			i = 1
		}
		if j >= len(key) {
			j = 0
		}
	}
	for k := mtN - 1; k > 0; k-- {
		r.mt[i] = (r.mt[i] ^ ((r.mt[i-1] ^ (r.mt[i-1] >> 30)) * 1566083941)) - uint32(i)
		i++
		if i >= mtN {
			r.mt[0] = r.mt[mtN-1]
			i = 1
		}
	}
	r.mt[0] = 0x80000000 // MSB is 1, assuring a non-zero initial array
}

// uint32 is genrand_uint32.
func (r *pyRandom) uint32() uint32 {
	const upper, lower, matrixA = 0x80000000, 0x7fffffff, 0x9908b0df
	if r.idx >= mtN {
		for k := 0; k < mtN; k++ {
			y := r.mt[k]&upper | r.mt[(k+1)%mtN]&lower
			v := r.mt[(k+mtM)%mtN] ^ y>>1
			if y&1 != 0 {
				v ^= matrixA
			}
			r.mt[k] = v
		}
		r.idx = 0
	}
	y := r.mt[r.idx]
	r.idx++
	y ^= y >> 11
	y ^= y << 7 & 0x9d2c5680
	y ^= y << 15 & 0xefc60000
	y ^= y >> 18
	return y
}

// uint64 is getrandbits(64).
func (r *pyRandom) uint64() uint64 {
	lo := r.uint32()
	return uint64(r.uint32())<<32 | uint64(lo)
}
