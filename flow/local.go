package flow

import (
	"encoding/binary"
	"math/bits"
)

// LocalHasher is a keyed hash of a tuple for one instance's own tables (the
// conntrack buckets and signatures), which no other instance reads: unlike
// the fleet hash it need not be SipHash, nor stable across versions or
// architectures. It costs three 64x64->128-bit multiplies over the tuple's
// words (the "mum" mix of wyhash), independent of each other, against
// SipHash-1-3's chain of rounds: 7.4 against 11.4 ns for IPv4, 7.7 against
// 16.7 for IPv6 (BenchmarkLocalHash, BenchmarkHash).
//
// Its keys are derived from the cluster key (NewLocalHasher), so they are as
// secret as the cluster key: a client cannot aim its flows at one bucket
// without knowing them. The mix is not a PRF the way SipHash is; an
// attacker who could observe bucket collisions (timing) might learn about
// the keys, where SipHash would keep them. The conntrack table's eviction
// policy (new entries never evict established ones) bounds what a
// collision attack could achieve anyway.
//
// A NIC's RSS hash (Toeplitz) could replace it and save the hashing
// altogether, but only if every queue's hash were symmetric and keyed
// with a secret key the NIC holds (a symmetric Toeplitz key, 0x6d5a
// repeated, is public and gives attackers the buckets), and only for the
// tuples the NIC hashes as Fulcrum does (IPv4/IPv6 TCP/UDP, not
// fragments): the dataplane would still need this hash for the rest.
type LocalHasher struct{ k [6]uint64 }

// NewLocalHasher derives a LocalHasher's keys from the cluster key: the
// fleet hash (SipHash, a PRF) of six fixed messages, so the keys are
// unrelated to the fleet hash's outputs on real flows.
func NewLocalHasher(k Key) LocalHasher {
	h := NewHasher(k)
	var l LocalHasher
	for i := range l.k {
		t := Tuple{Proto: 0xff, SrcPort: uint16(i), DstPort: 0x10ca}
		l.k[i] = h.Hash(&t) | 1
	}
	return l
}

// Hash is the local hash of t.
func (l *LocalHasher) Hash(t *Tuple) uint64 {
	a := binary.LittleEndian.Uint64(t.Src[0:8])
	b := binary.LittleEndian.Uint64(t.Src[8:16])
	c := binary.LittleEndian.Uint64(t.Dst[0:8])
	d := binary.LittleEndian.Uint64(t.Dst[8:16])
	e := uint64(t.SrcPort) | uint64(t.DstPort)<<16 | uint64(t.Proto)<<32
	if t.V6 {
		e |= 1 << 40
	}
	x := mum(a^l.k[0], b^l.k[1]) ^ mum(c^l.k[2], d^l.k[3])
	return mum(x^l.k[4], e^l.k[5])
}

// mum is the xor of the two halves of the 128-bit product of a and b.
func mum(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}
