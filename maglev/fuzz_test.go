package maglev

import (
	"errors"
	"testing"
)

// fuzzSizes are the table sizes FuzzBuild picks from: primes small enough
// for a fuzz iteration, and non-primes that must be refused.
var fuzzSizes = []uint64{0, 1, 2, 3, 4, 5, 7, 9, 11, 13, 31, 97, 100, 101, 251, 1009, 2039}

// FuzzBuild decodes a backend set from bytes (each backend: a length byte,
// a weight byte, then the key) and checks that Build either refuses it with
// one of its sentinel errors or returns a full table in which every slot
// names a backend of weight > 0 and the counts add up.
func FuzzBuild(f *testing.F) {
	f.Add(byte(6), []byte("\x01\x01a\x01\x02b\x01\x00c"))
	f.Add(byte(14), []byte("\x02\x03ab\x02\x03ab"))
	f.Add(byte(3), []byte("\x00\x01"))
	f.Add(byte(16), []byte("\x03\xff1.1\x03\x001.2\x03\x011.3\x03\x801.4"))
	f.Fuzz(func(t *testing.T, sizeSel byte, data []byte) {
		m := fuzzSizes[int(sizeSel)%len(fuzzSizes)]
		var bs []Backend
		for len(data) >= 2 {
			n, w := int(data[0]%16), uint32(data[1])
			data = data[2:]
			n = min(n, len(data))
			// Spread weights over the whole 32-bit range now and then.
			if w >= 0xf0 {
				w = w << 24
			}
			bs = append(bs, Backend{Key: string(data[:n]), Weight: w})
			data = data[n:]
		}
		tab, err := Build(bs, m)
		if err != nil {
			for _, s := range []error{ErrNoBackends, ErrEmptyKey, ErrDuplicateKey, ErrAllWeightsZero,
				ErrSizeNotPrime, ErrSizeTooLarge, ErrTooManyBackends} {
				if errors.Is(err, s) {
					return
				}
			}
			t.Fatalf("Build: error %v wraps no sentinel", err)
		}
		if tab.Size() != int(m) || tab.Len() != len(bs) {
			t.Fatalf("Size, Len = %d, %d, want %d, %d", tab.Size(), tab.Len(), m, len(bs))
		}
		counts := make([]int, tab.Len())
		for s := range tab.Size() {
			i := tab.Slot(s)
			if i < 0 || i >= tab.Len() {
				t.Fatalf("slot %d names backend %d of %d", s, i, tab.Len())
			}
			if tab.Backend(i).Weight == 0 {
				t.Fatalf("slot %d names %q of weight 0", s, tab.Backend(i).Key)
			}
			counts[i]++
		}
		for i, c := range counts {
			if c != tab.Count(i) {
				t.Fatalf("backend %d: Count %d, slots %d", i, tab.Count(i), c)
			}
		}
	})
}

// FuzzIndex checks the division-free modulo against the % operator.
func FuzzIndex(f *testing.F) {
	f.Add(uint64(0), uint16(0))
	f.Add(^uint64(0), uint16(3))
	f.Add(uint64(65537*65537), uint16(5))
	sizes := []uint64{2, 3, 7, 1009, DefaultSize, 655373, MaxSize, 4294967291}
	f.Fuzz(func(t *testing.T, h uint64, sel uint16) {
		m := sizes[int(sel)%len(sizes)]
		tab := &Table{size: m, red: newReducer(m)}
		if got := tab.index(h); got != h%m {
			t.Fatalf("M=%d: index(%d) = %d, want %d", m, h, got, h%m)
		}
	})
}
