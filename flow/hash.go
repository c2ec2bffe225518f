package flow

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/bits"
	"strings"
)

// Key is the 128-bit cluster hash key. Every instance of a fleet must use the
// same key; a secret key also keeps an attacker from aiming flows at one
// conntrack bucket or one backend.
type Key [16]byte

// ParseKey reads a key written as 32 hexadecimal digits.
func ParseKey(s string) (Key, error) {
	var k Key
	// The errors never quote s: a key mistyped by a character is still
	// nearly all of the fleet's secret, and they reach logs and the
	// journal.
	if len(s) != 32 {
		return k, fmt.Errorf("cluster hash key: want 32 hex digits (128 bits), have %d characters", len(s))
	}
	if _, err := hex.Decode(k[:], []byte(s)); err != nil {
		var ib hex.InvalidByteError
		if errors.As(err, &ib) {
			return Key{}, fmt.Errorf("cluster hash key: character %d is not a hex digit", strings.IndexByte(s, byte(ib))+1)
		}
		return Key{}, errors.New("cluster hash key: want 32 hex digits (128 bits)")
	}
	return k, nil
}

// String is the key in 32 hexadecimal digits.
func (k Key) String() string { return hex.EncodeToString(k[:]) }

// ID names the key without revealing it: the first 8 bytes of the
// SHA-256 of a fixed label and the key, in 16 hexadecimal digits. Every
// instance of a fleet shows the same ID; one that shows another places
// most flows elsewhere, though its tables (which the key does not enter)
// are the same.
func (k Key) ID() string {
	sum := sha256.Sum256(append([]byte("fulcrum hash key id\n"), k[:]...))
	return hex.EncodeToString(sum[:8])
}

// Hasher computes the fleet flow hash: SipHash-1-3 keyed by the cluster key
// over a fixed byte layout of the tuple (see Message). SipHash was designed
// for exactly this job, a keyed hash over short attacker-chosen inputs that
// resists hash flooding; the 1-3 round variant (the one Rust's standard hash
// map uses) costs about half of 2-4 and keeps that property in practice.
// The dataplane computes it once per packet, under the VIP's hash fields
// (HashFields), for the Maglev slot and the tunnel's entropy fields;
// conntrack's buckets use the instance-local LocalHasher.
type Hasher struct{ k0, k1 uint64 }

// NewHasher returns the hasher for a cluster key. SipHash reads the key as
// two little-endian 64-bit words.
func NewHasher(k Key) Hasher {
	return Hasher{k0: binary.LittleEndian.Uint64(k[0:8]), k1: binary.LittleEndian.Uint64(k[8:16])}
}

// Message appends the exact bytes the flow hash covers to dst and returns it.
// IPv4 (16 bytes): src(4) dst(4) sport(2, big-endian) dport(2) proto(1) 0x04 0x00 0x00.
// IPv6 (40 bytes): src(16) dst(16) sport(2) dport(2) proto(1) 0x06 0x00 0x00.
// It is the specification; Hash computes SipHash-1-3 over these bytes without
// building them.
func (t *Tuple) Message(dst []byte) []byte {
	if t.V6 {
		dst = append(dst, t.Src[:]...)
		dst = append(dst, t.Dst[:]...)
	} else {
		dst = append(dst, t.Src[12:]...)
		dst = append(dst, t.Dst[12:]...)
	}
	dst = binary.BigEndian.AppendUint16(dst, t.SrcPort)
	dst = binary.BigEndian.AppendUint16(dst, t.DstPort)
	fam := byte(4)
	if t.V6 {
		fam = 6
	}
	return append(dst, t.Proto, fam, 0, 0)
}

// Hash is the flow hash of t over its 5-tuple (HashFields for a VIP's own
// setting). It allocates nothing.
func (h Hasher) Hash(t *Tuple) uint64 { return h.sum(t, Fields{}) }

// sum is SipHash-1-3 over t's MessageFields under f, computed from t's
// words in registers: the fields f ignores are masked out of the words
// (not out of a copy of t), and the mode and prefix bytes go where the
// 5-tuple has padding. Under the 5-tuple it is two predictable branches
// more than hashing Message.
func (h Hasher) sum(t *Tuple, f Fields) uint64 {
	// The last message word: sport and dport in wire (big-endian) order,
	// proto, family, mode, prefix, read little-endian as SipHash does.
	tail := uint64(bits.ReverseBytes16(t.SrcPort)) |
		uint64(bits.ReverseBytes16(t.DstPort))<<16 |
		uint64(t.Proto)<<32
	if f.Mode != FiveTuple {
		if f.Mode == ThreeTuple {
			tail &= 0xff << 32 // the protocol only
		} else {
			tail = 0 // src-ip, src-ip-prefix: not the protocol either
		}
		tail |= uint64(f.Mode) << 48
	}
	v0 := h.k0 ^ 0x736f6d6570736575
	v1 := h.k1 ^ 0x646f72616e646f6d
	v2 := h.k0 ^ 0x6c7967656e657261
	v3 := h.k1 ^ 0x7465646279746573
	var n uint64
	if t.V6 {
		tail |= 6 << 40
		n = 40
		s0, s1 := binary.LittleEndian.Uint64(t.Src[0:8]), binary.LittleEndian.Uint64(t.Src[8:16])
		d0, d1 := binary.LittleEndian.Uint64(t.Dst[0:8]), binary.LittleEndian.Uint64(t.Dst[8:16])
		if f.Mode >= SrcIP {
			d0, d1 = 0, 0
			if f.Mode == SrcIPPrefix {
				// The prefix mask in network (big-endian) bit order,
				// byte-swapped onto the little-endian words.
				p := uint(f.Prefix6)
				s0 &= bits.ReverseBytes64(^uint64(0) << (64 - min(p, 64)))
				s1 &= bits.ReverseBytes64(^uint64(0) << (128 - max(p, 64))) // p <= 64: a shift of 64, all zero
				tail |= uint64(p) << 56
			}
		}
		for _, m := range [...]uint64{s0, s1, d0, d1} {
			v3 ^= m
			v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
			v0 ^= m
		}
	} else {
		tail |= 4 << 40
		n = 16
		s, d := binary.LittleEndian.Uint32(t.Src[12:16]), binary.LittleEndian.Uint32(t.Dst[12:16])
		if f.Mode >= SrcIP {
			d = 0
			if f.Mode == SrcIPPrefix {
				p := uint(f.Prefix4)
				s &= bits.ReverseBytes32(^uint32(0) << (32 - p))
				tail |= uint64(p) << 56
			}
		}
		m := uint64(s) | uint64(d)<<32
		v3 ^= m
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
		v0 ^= m
	}
	v3 ^= tail
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0 ^= tail
	// Length block: a message whose length is a multiple of 8 ends with a
	// block holding only the length in its top byte.
	m := n << 56
	v3 ^= m
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0 ^= m
	v2 ^= 0xff
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	return v0 ^ v1 ^ v2 ^ v3
}

// sipRound is one SipRound; small enough for the compiler to inline, so
// the state stays in registers.
func sipRound(v0, v1, v2, v3 uint64) (uint64, uint64, uint64, uint64) {
	v0 += v1
	v1 = bits.RotateLeft64(v1, 13) ^ v0
	v0 = bits.RotateLeft64(v0, 32)
	v2 += v3
	v3 = bits.RotateLeft64(v3, 16) ^ v2
	v0 += v3
	v3 = bits.RotateLeft64(v3, 21) ^ v0
	v2 += v1
	v1 = bits.RotateLeft64(v1, 17) ^ v2
	v2 = bits.RotateLeft64(v2, 32)
	return v0, v1, v2, v3
}
