package flow

import (
	"math/bits"
	"testing"
	"unsafe"
)

// The local hash spreads regular flows (sequential addresses and ports,
// the worst case for a weak mix) evenly over the conntrack's bucket bits
// (the low bits) and signature bits (the top 8), depends on the key, and
// tells the families apart.
func TestLocalHashSpreads(t *testing.T) {
	l := NewLocalHasher(Key{1, 2, 3})
	const buckets, n = 1 << 12, 1 << 18
	var low [buckets]int
	var top [256]int
	for i := 0; i < n; i++ {
		tp := mustTuple(t, "198.51.100.10", "203.0.113.7", uint16(1024+i%4096), 80, 6)
		tp.Src[15] = byte(i >> 12)
		tp.Src[14] = byte(i >> 20)
		h := l.Hash(&tp)
		low[h&(buckets-1)]++
		top[h>>56]++
	}
	// Binomial: mean 64 per bucket, sd 8; 1024 per signature, sd 32.
	for b, c := range low {
		if c < 64-6*8 || c > 64+6*8 {
			t.Fatalf("bucket %d holds %d of %d flows, want 64 ± 48", b, c, n)
		}
	}
	for s, c := range top {
		if c < 1024-6*32 || c > 1024+6*32 {
			t.Fatalf("signature %#x on %d of %d flows, want 1024 ± 192", s, c, n)
		}
	}
	// Every input bit reaches about half the output bits.
	base := mustTuple(t, "2001:db8::1", "2001:db8:ffff::7", 443, 12345, 6)
	h0 := l.Hash(&base)
	for bit := 0; bit < 38*8-7; bit++ { // the tuple's bytes but V6
		tp := base
		b := (*[38]byte)(unsafePointer(&tp))
		b[bit/8] ^= 1 << (bit % 8)
		if d := bits.OnesCount64(h0 ^ l.Hash(&tp)); d < 12 || d > 52 {
			t.Fatalf("flipping input bit %d changes %d output bits", bit, d)
		}
	}
	v4 := mustTuple(t, "198.51.100.10", "203.0.113.7", 1, 2, 6)
	v6 := v4
	v6.V6 = true
	if l.Hash(&v4) == l.Hash(&v6) {
		t.Fatal("IPv4 and IPv6 tuples of the same bytes hash alike")
	}
	if m := NewLocalHasher(Key{1, 2, 4}); m.Hash(&v4) == l.Hash(&v4) {
		t.Fatal("the local hash does not depend on the key")
	}
}

func BenchmarkLocalHash(b *testing.B) {
	l := NewLocalHasher(Key{1, 2, 3})
	for _, tc := range []struct {
		name string
		tp   Tuple
	}{
		{"v4", mustTuple(b, "198.51.100.10", "203.0.113.7", 40000, 80, 6)},
		{"v6", mustTuple(b, "2001:db8::1", "2001:db8:ffff::7", 443, 12345, 6)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			tp := tc.tp
			var sink uint64
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				tp.SrcPort = uint16(i)
				sink += l.Hash(&tp)
			}
			_ = sink
		})
	}
}

func unsafePointer(t *Tuple) unsafe.Pointer { return unsafe.Pointer(t) }
