package maglev

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// The builder must produce, slot for slot, the table the old builder
// (oldbuild_test.go) produced for the same input: every instance of the
// fleet, old and new, must agree. Random weighted inputs over sizes and
// weight shapes that take both fill strategies (rounds and heap) and the
// endgame.
func TestBuilderMatchesOld(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 3))
	sizes := []uint64{7, 13, 251, 1021, 4099, DefaultSize}
	cases := 300
	if testing.Short() {
		cases = 60
	}
	for c := 0; c < cases; c++ {
		m := sizes[rng.IntN(len(sizes))]
		n := 1 + rng.IntN(int(min(m-1, 1200)))
		var weight func(i int) uint32
		switch rng.IntN(5) {
		case 0:
			weight = equal
		case 1:
			weight = func(int) uint32 { return 1 + rng.Uint32N(10) }
		case 2:
			weight = func(int) uint32 { return rng.Uint32N(100) } // zeros too
		case 3: // one heavy backend: the heap strategy
			heavy := rng.IntN(n)
			weight = func(i int) uint32 {
				if i == heavy {
					return 1000
				}
				return 1 + rng.Uint32N(2)
			}
		default: // slow-start style: scaled weights, some tiny
			weight = func(int) uint32 { return 1 + rng.Uint32N(1<<20) }
		}
		bs := names(fmt.Sprintf("b%d-", c), n, weight)
		if allZero(bs) {
			bs[0].Weight = 1
		}
		rng.Shuffle(len(bs), func(i, j int) { bs[i], bs[j] = bs[j], bs[i] })
		tab, err := Build(bs, m)
		if err != nil {
			t.Fatalf("case %d (M=%d, N=%d): %v", c, m, n, err)
		}
		want := oldBuild(bs, m)
		for i := range want {
			if got := tab.Slot(i); got != int(want[i]) {
				t.Fatalf("case %d (M=%d, N=%d): slot %d is backend %d, the old builder gave %d", c, m, n, i, got, want[i])
			}
		}
		// Reusing the builder's scratch must not change the next table.
		again, err := Build(bs, m)
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if again.Slot(i) != int(want[i]) {
				t.Fatalf("case %d: second build differs at slot %d", c, i)
			}
		}
	}
}

func allZero(bs []Backend) bool {
	for _, b := range bs {
		if b.Weight != 0 {
			return false
		}
	}
	return true
}

// BenchmarkBuildOld is the old builder on BenchmarkBuild's weighted cases,
// to compare the two in one run on a shared machine.
func BenchmarkBuildOld(b *testing.B) {
	for _, n := range []int{100, 1000} {
		for _, mix := range []struct {
			name   string
			weight func(i int) uint32
		}{
			{"equal", equal},
			{"mixed", func(i int) uint32 { return uint32(i*7)%10 + 1 }},
		} {
			bs := names("10.0.0.", n, mix.weight)
			b.Run(fmt.Sprintf("M=%d/N=%d/%s", DefaultSize, n, mix.name), func(b *testing.B) {
				for b.Loop() {
					oldBuild(bs, DefaultSize)
				}
			})
		}
	}
}

// BenchmarkBuildVsOld alternates the new builder, cold (its key hash cache
// emptied first: backends it never saw) and warm (a rebuild of the same
// backends), and the old builder on M = 65537, N = 1000, and reports the
// fastest build of each in ms, which a busy shared machine disturbs least.
// Run with -benchtime 1x.
func BenchmarkBuildVsOld(b *testing.B) {
	for _, mix := range []struct {
		name   string
		weight func(i int) uint32
	}{
		{"equal", equal},
		{"mixed", func(i int) uint32 { return uint32(i*7)%10 + 1 }},
	} {
		bs := names("10.0.0.", 1000, mix.weight)
		b.Run(mix.name, func(b *testing.B) {
			cold, warm, old := time.Duration(1<<62), time.Duration(1<<62), time.Duration(1<<62)
			for b.Loop() {
				for range 40 {
					keyHashes.Lock()
					keyHashes.m = nil
					keyHashes.Unlock()
					t0 := time.Now()
					if _, err := Build(bs, DefaultSize); err != nil {
						b.Fatal(err)
					}
					t1 := time.Now()
					if _, err := Build(bs, DefaultSize); err != nil {
						b.Fatal(err)
					}
					t2 := time.Now()
					oldBuild(bs, DefaultSize)
					t3 := time.Now()
					cold, warm, old = min(cold, t1.Sub(t0)), min(warm, t2.Sub(t1)), min(old, t3.Sub(t2))
				}
			}
			b.ReportMetric(float64(cold.Microseconds())/1000, "cold-min-ms")
			b.ReportMetric(float64(warm.Microseconds())/1000, "warm-min-ms")
			b.ReportMetric(float64(old.Microseconds())/1000, "old-min-ms")
		})
	}
}

// The round loop replays the due lists of the first period of rounds when
// the weights' period (a divisor of the largest weight) is at most
// periodCap, and tests every backend in every round otherwise. Weights
// around the cap, on tables large enough for many periods of rounds, slot
// for slot against the old builder, which always tests every backend.
func TestBuilderMatchesOldPeriodic(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 31))
	for c, wmax := range []uint32{2, 6, 12, 60, 63, periodCap, periodCap + 1, 96, 128, 1000} {
		for _, m := range []uint64{1021, 4099, DefaultSize} {
			n := 2 + rng.IntN(300)
			bs := names(fmt.Sprintf("p%d-", c), n, func(i int) uint32 {
				if i == 0 {
					return wmax
				}
				if rng.IntN(2) == 0 { // a divisor of wmax: a short period
					d := 1 + rng.Uint32N(wmax)
					for wmax%d != 0 {
						d--
					}
					return d
				}
				return 1 + rng.Uint32N(wmax)
			})
			rng.Shuffle(len(bs), func(i, j int) { bs[i], bs[j] = bs[j], bs[i] })
			tab, err := Build(bs, m)
			if err != nil {
				t.Fatalf("wmax %d, M=%d, N=%d: %v", wmax, m, n, err)
			}
			want := oldBuild(bs, m)
			for i := range want {
				if got := tab.Slot(i); got != int(want[i]) {
					t.Fatalf("wmax %d, M=%d, N=%d: slot %d is backend %d, the old builder gave %d", wmax, m, n, i, got, want[i])
				}
			}
		}
	}
}

// The period of a set of weights: the least common multiple of
// wmax/gcd(w, wmax), and 0 past periodCap.
func TestSchedulePeriod(t *testing.T) {
	for _, tc := range []struct {
		weights []uint32
		want    uint64
	}{
		{[]uint32{1, 1, 1}, 1},
		{[]uint32{5, 5}, 1},
		{[]uint32{10, 5, 2, 1}, 10},
		{[]uint32{12, 3, 4}, 12},
		{[]uint32{12, 6, 4}, 6},
		{[]uint32{12, 8}, 3},
		{[]uint32{periodCap, 1}, periodCap},
		{[]uint32{periodCap + 1, 1}, 0},
		{[]uint32{1 << 20, 3}, 0},
	} {
		turns := make([]turn, len(tc.weights))
		var wmax uint64
		for i, w := range tc.weights {
			turns[i].weight = w
			wmax = max(wmax, uint64(w))
		}
		if got := newSchedule(turns, wmax).period; got != tc.want {
			t.Errorf("weights %v: period %d, want %d", tc.weights, got, tc.want)
		}
	}
}

// Rebuilds of the same keys (the key hash cache's fast path) with the
// weights changing between builds, some to 0 and back, then a different
// key set and back: every table slot for slot as the old builder's.
func TestBuilderRebuildSameKeys(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 43))
	for _, m := range []uint64{251, 4099, DefaultSize} {
		bs := names("r-", 200, equal)
		other := names("o-", 150, equal)
		for round := range 12 {
			in := bs
			if round%4 == 3 {
				in = other
			}
			for i := range in {
				in[i].Weight = rng.Uint32N(6) // zeros too
			}
			in[rng.IntN(len(in))].Weight = 7
			rng.Shuffle(len(in), func(i, j int) { in[i], in[j] = in[j], in[i] })
			tab, err := Build(in, m)
			if err != nil {
				t.Fatal(err)
			}
			want := oldBuild(in, m)
			for i := range want {
				if got := tab.Slot(i); got != int(want[i]) {
					t.Fatalf("M=%d, build %d: slot %d is backend %d, the old builder gave %d", m, round, i, got, want[i])
				}
			}
		}
	}
}
