package sched

import (
	"math"
	"testing"
)

// exactBestOf is the exact probability that each position wins a choice
// of `draws` distinct weighted draws (successive sampling without
// replacement, each draw proportional to weight among those left), the
// winner being the lowest score/weight, ties shared equally. scores are
// given per position; enumerated over every ordered sequence of draws.
func exactBestOf(weights []uint32, scores []float64, draws int) []float64 {
	n := len(weights)
	out := make([]float64, n)
	var rec func(taken []int, p float64)
	rec = func(taken []int, p float64) {
		if len(taken) == draws {
			best := math.Inf(1)
			for _, i := range taken {
				best = math.Min(best, scores[i]/float64(weights[i]))
			}
			var tied []int
			for _, i := range taken {
				if scores[i]/float64(weights[i]) == best {
					tied = append(tied, i)
				}
			}
			for _, i := range tied {
				out[i] += p / float64(len(tied))
			}
			return
		}
		var left float64
		for i := range n {
			if weights[i] > 0 && !contains(taken, i) {
				left += float64(weights[i])
			}
		}
		for i := range n {
			if weights[i] > 0 && !contains(taken, i) {
				rec(append(append([]int(nil), taken...), i), p*float64(weights[i])/left)
			}
		}
	}
	rec(nil, 1)
	return out
}

func contains(s []int, x int) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

// chiSquareOK compares counts against exact probabilities with a bound
// far beyond p=1e-9 for the degrees of freedom used here (< 12): a
// chi-square of 80 has p < 1e-12 at 11 degrees of freedom.
func chiSquare(counts []int, probs []float64, n int) float64 {
	var x float64
	for i, p := range probs {
		if p == 0 {
			if counts[i] != 0 {
				return math.Inf(1)
			}
			continue
		}
		e := p * float64(n)
		d := float64(counts[i]) - e
		x += d * d / e
	}
	return x
}

// TestExactDistributions measures p2c, peak-ewma and random against
// their exact probabilities (weighted, distinct draws, ties shared), with
// ineligible positions that force draw's exact fallback, and draws of 2, 3
// and more than the eligible backends.
func TestExactDistributions(t *testing.T) {
	const n = 300_000
	cases := []struct {
		name    string
		weights []uint32
		active  []int64
	}{
		{"distinct loads", []uint32{1, 2, 3, 4, 5}, []int64{0, 3, 5, 9, 2}},
		{"ties", []uint32{1, 1, 2, 2, 1}, []int64{1, 1, 3, 3, 4}},
		{"ineligible and heavy", []uint32{0, 0, 6553500, 0, 0, 0, 100, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 100, 0, 0, 0, 200}, nil},
	}
	for _, tc := range cases {
		loads := make([]Load, len(tc.weights))
		scores := make([]float64, len(tc.weights))
		for i, w := range tc.weights {
			loads[i].Weight = w
			if tc.active != nil {
				loads[i].Active = tc.active[i]
			} else {
				loads[i].Active = int64(i % 7)
			}
			loads[i].EWMA.Observe(1000)
			scores[i] = float64(loads[i].Active + 1)
		}
		for _, k := range []Kind{P2C, PeakEWMA} {
			for _, draws := range []int{1, 2, 3, 16} {
				p, r := MustNew(k, Options{Draws: draws}), NewRand(uint64(draws)*7919+uint64(k))
				eligible := 0
				for _, w := range tc.weights {
					if w > 0 {
						eligible++
					}
				}
				want := exactBestOf(tc.weights, scores, min(draws, eligible))
				counts := make([]int, len(loads))
				for range n {
					counts[p.Pick(loads, &r)]++
				}
				if x := chiSquare(counts, want, n); x > 80 {
					t.Errorf("%s %v draws %d: chi-square %.1f; counts %v, want shares %v", tc.name, k, draws, x, counts, want)
				}
			}
		}
		p, r := MustNew(Random, Options{}), NewRand(77)
		want := exactBestOf(tc.weights, scores, 1)
		counts := make([]int, len(loads))
		for range n {
			counts[p.Pick(loads, &r)]++
		}
		if x := chiSquare(counts, want, n); x > 80 {
			t.Errorf("%s random: chi-square %.1f; counts %v, want %v", tc.name, x, counts, want)
		}
	}
}
