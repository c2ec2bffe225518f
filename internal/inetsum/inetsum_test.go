package inetsum

import (
	"math/rand/v2"
	"testing"
)

// naive is RFC 1071's reference loop: 16-bit words, carry folded each step.
func naive(b []byte) uint16 {
	var s uint32
	for i := 0; i < len(b); i += 2 {
		w := uint32(b[i]) << 8
		if i+1 < len(b) {
			w |= uint32(b[i+1])
		}
		s += w
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

func TestAgainstRFC1071Loop(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for n := 0; n < 2000; n++ {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		if got, want := Fold(Add(0, b)), naive(b); got != want {
			t.Fatalf("len %d: %#04x, RFC 1071 loop %#04x", n, got, want)
		}
	}
	// RFC 1071 section 3's worked example: 00 01 f2 03 f4 f5 f6 f7 sums to ddf2.
	if got := Fold(Add(0, []byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7})); got != 0xddf2 {
		t.Errorf("RFC 1071 example: %#04x, want 0xddf2", got)
	}
}
