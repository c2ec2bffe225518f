package sched

import "math/bits"

// Rand is a small deterministic random number generator (SplitMix64,
// Steele, Lea and Flood, "Fast splittable pseudorandom number generators",
// OOPSLA 2014): one word of state, no locks, no allocation. Each lcore owns
// one and passes it to its pickers; the simulator seeds one per run, so its
// results are reproducible. It is not for anything secret.
//
// The zero Rand is usable (it is NewRand(0)).
type Rand struct {
	s uint64
}

// NewRand returns a generator seeded with seed. Different seeds give
// unrelated sequences.
func NewRand(seed uint64) Rand { return Rand{s: seed} }

// Uint64 returns 64 uniformly distributed random bits.
func (r *Rand) Uint64() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// Uint64n returns a uniformly distributed number in [0, n), without the
// bias of a plain modulo (Lemire, "Fast random integer generation in an
// interval", 2019). n must not be 0.
func (r *Rand) Uint64n(n uint64) uint64 {
	hi, lo := bits.Mul64(r.Uint64(), n)
	if lo < n {
		thresh := -n % n
		for lo < thresh {
			hi, lo = bits.Mul64(r.Uint64(), n)
		}
	}
	return hi
}

// Float64 returns a uniformly distributed number in [0, 1) with 53
// random bits.
func (r *Rand) Float64() float64 {
	return float64(r.Uint64()>>11) * (1.0 / (1 << 53))
}
