package decap

import (
	"errors"
	"testing"
)

// Edge cases from a mutation audit of package decap: each test fails on a
// mutant that every other test of the package let through.

// A GRE header announcing a key (Fulcrum's second chance) with fewer than
// the key's four bytes after it is truncated: refused, never read past
// the end (the mutant that wanted three bytes read a byte beyond the
// payload, within the slice's capacity, and took it for the key).
func TestEdgeGREKeyOneByteShort(t *testing.T) {
	d, err := New(Config{Kinds: []Kind{GRE}})
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < 4; n++ {
		b := append([]byte{0x20, 0x00, 0x08, 0x00}, make([]byte, n)...) // K set, IPv4, n bytes of key
		_, _, err := d.StripPayload(47, b)
		if !errors.Is(err, ErrTruncated) {
			t.Errorf("GRE with key flag and %d key bytes: %v, want ErrTruncated", n, err)
		}
	}
}

// A second chance in 240.0.0.0/4 (reserved, and the broadcast address)
// is refused like 0.0.0.0/8: no backend has such an address.
func TestEdgeGREChanceIn240Refused(t *testing.T) {
	d, err := New(Config{Kinds: []Kind{GRE}})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range [][4]byte{{240, 0, 0, 1}, {255, 255, 255, 255}} {
		b := append([]byte{0x20, 0x00, 0x08, 0x00}, a[:]...)
		b = append(b, innerSYN(t, false)...)
		if _, _, err := d.StripPayload(47, b); !errors.Is(err, ErrSecondChance) {
			t.Errorf("GRE key %v: %v, want ErrSecondChance", a, err)
		}
	}
}
