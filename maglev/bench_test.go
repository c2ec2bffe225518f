package maglev

import (
	"fmt"
	"testing"
)

// Run with: go test ./maglev -run '^$' -bench . -benchmem -benchtime 20x
// (the machine is shared: keep -benchtime modest and -count at most 3).
func BenchmarkBuild(b *testing.B) {
	for _, m := range []uint64{DefaultSize, 655373} {
		for _, n := range []int{10, 100, 1000} {
			for _, mix := range []struct {
				name   string
				weight func(i int) uint32
			}{
				{"equal", equal},
				// Weights 1..10, spread over the key order.
				{"mixed", func(i int) uint32 { return uint32(i*7)%10 + 1 }},
				// One backend of weight 1000, the rest 1: the heap scheduler.
				{"skewed", func(i int) uint32 { return max(1, uint32(1000*(1-min(i, 1)))) }},
			} {
				bs := names("10.0.0.", n, mix.weight)
				b.Run(fmt.Sprintf("M=%d/N=%d/%s", m, n, mix.name), func(b *testing.B) {
					for b.Loop() {
						if _, err := Build(bs, m); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}

func BenchmarkLookup(b *testing.B) {
	tab, err := Build(names("10.0.0.", 100, equal), DefaultSize)
	if err != nil {
		b.Fatal(err)
	}
	var sink int
	h := uint64(0x0123456789abcdef)
	for b.Loop() {
		h = h*6364136223846793005 + 1442695040888963407 // LCG: a new hash every call
		sink += tab.Lookup(h)
	}
	_ = sink
}
