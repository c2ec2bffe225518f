package sched

import (
	"fmt"
	"math/bits"
	"slices"
	"time"
)

// Load is one backend's state at the moment of a choice; a choice reads a
// slice of them indexed by backend position.
type Load struct {
	// Weight is the backend's configured weight (after slow start); 0
	// means the backend is not eligible (down, draining, ejected).
	Weight uint32
	// Active is the backend's load: in the dataplane the active flows the
	// LB holds for it (conntrack, summed over lcores). Negative counts as
	// 0. The simulator also feeds queued work here (see fulcrum-sim).
	Active int64
	// EWMA is the backend's latency average; only PeakEWMA reads it.
	EWMA EWMA
}

// Picker chooses a backend for a new flow. Pick returns the position of an
// eligible backend (Weight > 0) in loads, or -1 if there is none. It never
// allocates and never blocks. A Picker and the Rand it is given belong to
// one goroutine (one lcore); neither locks.
type Picker interface {
	Pick(loads []Load, rng *Rand) int
}

// Options tune the pickers New makes; the zero Options are the defaults.
// They are also a [[vip]]'s scheduler keys, which package config decodes
// into them (the toml tags are the keys).
type Options struct {
	// Draws is how many distinct candidates P2C and PeakEWMA compare: 0
	// means DefaultDraws (2), at most MaxDraws. A count at or above the
	// number of eligible backends compares them all.
	Draws int `toml:"draws"`
	// WithReplacement makes P2C and PeakEWMA draw candidates
	// independently, so that a choice may compare a backend with itself:
	// HAProxy's random(<draws>) before the patch in seed 002. It exists so
	// the simulator can show what the patch fixed; do not configure it.
	WithReplacement bool `toml:"-"`
	// Penalty is the latency PeakEWMA assumes for a backend that has no
	// sample yet; 0 means DefaultPenalty. It is rounded down to whole
	// microseconds, at least 1 µs and at most MaxSample µs. (A penalty of 0,
	// the exercise's trap, cannot be configured.)
	Penalty time.Duration `toml:"ewma_penalty"`
}

// New returns a fresh picker of kind k. Maglev has no picker: the dataplane
// uses the VIP's Maglev table (ErrNotPicker).
func New(k Kind, o Options) (Picker, error) {
	draws := o.Draws
	if draws == 0 {
		draws = DefaultDraws
	}
	if draws < 1 || draws > MaxDraws {
		return nil, fmt.Errorf("%v: %w: %d (want 1 to %d)", k, ErrDraws, o.Draws, MaxDraws)
	}
	penalty := o.Penalty
	if penalty == 0 {
		penalty = DefaultPenalty
	}
	us := penalty.Microseconds()
	if us < 1 || us > MaxSample {
		return nil, fmt.Errorf("%v: %w: %v (want 1µs to %v)", k, ErrPenalty, o.Penalty, MaxSample*time.Microsecond)
	}
	if k >= numKinds {
		return nil, fmt.Errorf("%w: %v", ErrUnknownKind, k)
	}
	if !k.IsPicker() {
		return nil, fmt.Errorf("%v: %w", k, ErrNotPicker)
	}
	return kinds[k].new(params{draws: draws, replace: o.WithReplacement, penalty: us}), nil
}

// MustNew is New for fixed, known-good arguments (tests, the simulator).
func MustNew(k Kind, o Options) Picker {
	p, err := New(k, o)
	if err != nil {
		panic(err)
	}
	return p
}

// summary is what one pass over the loads learns before drawing.
type summary struct {
	eligible int    // backends with Weight > 0
	total    uint64 // sum of their weights
	wmax     uint32 // largest weight
	last     int    // the last eligible position
}

func summarize(loads []Load) summary {
	s := summary{last: -1}
	for i := range loads {
		w := loads[i].Weight
		if w == 0 {
			continue
		}
		s.eligible++
		s.total += uint64(w)
		s.wmax = max(s.wmax, w)
		s.last = i
	}
	return s
}

// maxTries bounds the rejection sampling in draw before it falls back to an
// exact scan, so that a choice's cost stays bounded when most backends are
// ineligible or the weights are very uneven.
const maxTries = 32

// draw returns an eligible position not in taken, with probability
// proportional to its weight among those. takenW is the sum of the taken
// positions' weights; at least one eligible position must be left.
//
// It samples by rejection: a uniform position, accepted with probability
// Weight/wmax. That costs O(1) expected draws when weights are alike and
// needs no prefix sums, which would have to be rebuilt whenever a weight
// changes. After maxTries rejections it walks the weights once instead;
// rejection's outcome does not depend on the position it would have
// accepted, so the fallback leaves the distribution exact.
func draw(loads []Load, rng *Rand, s *summary, taken []int, takenW uint64) int {
	n := uint64(len(loads))
	for range maxTries {
		i := int(rng.Uint64n(n))
		w := loads[i].Weight
		if w == 0 || slices.Contains(taken, i) {
			continue
		}
		if w == s.wmax || uint32(rng.Uint64n(uint64(s.wmax))) < w {
			return i
		}
	}
	x := rng.Uint64n(s.total - takenW)
	for i := range loads {
		w := uint64(loads[i].Weight)
		if w == 0 || slices.Contains(taken, i) {
			continue
		}
		if x < w {
			return i
		}
		x -= w
	}
	return s.last // unreachable while takenW is the taken positions' weight
}

// randomPicker is one weighted random draw: each eligible backend with
// probability Weight/sum of weights. The chapter's "random" (seed 000,
// section 1.1): it looks at nothing, so bursts land by chance.
type randomPicker struct{}

func (randomPicker) Pick(loads []Load, rng *Rand) int {
	s := summarize(loads)
	switch s.eligible {
	case 0:
		return -1
	case 1:
		return s.last
	}
	return draw(loads, rng, &s, nil, 0)
}

// roundRobin is nginx's smooth weighted round robin
// (ngx_http_upstream_get_peer): every choice adds each eligible backend's
// weight to its current value, picks the largest and subtracts the total
// from it. Weights 5, 1, 1 give a a b a c a a, spreading a's turns instead
// of a a a a a b c. Equal weights give plain rotation in position order.
//
// The state is per position and per picker (one per lcore). When the
// number of backends changes the picker starts over; a caller that
// reorders backends without changing their number makes a new picker.
type roundRobin struct {
	cur []int64
}

func (r *roundRobin) Pick(loads []Load, _ *Rand) int {
	if len(r.cur) != len(loads) {
		r.cur = make([]int64, len(loads)) // once per change of the backend set
	}
	var total int64
	best := -1
	for i := range loads {
		w := int64(loads[i].Weight)
		if w == 0 {
			continue
		}
		r.cur[i] += w
		total += w
		if best < 0 || r.cur[i] > r.cur[best] {
			best = i
		}
	}
	if best >= 0 {
		r.cur[best] -= total
	}
	return best
}

// bestOf keeps the candidate with the lowest score/Weight: over all
// eligible backends (least-conn), or over draws weighted draws (p2c,
// peak-ewma), distinct unless replace. The score is Active+1, or for
// peak-ewma Cost(latency, Active) with the penalty as the latency of a
// backend that has no sample.
type bestOf struct {
	all     bool
	draws   int
	replace bool
	peak    bool
	penalty int64 // µs
}

func (p *bestOf) Pick(loads []Load, rng *Rand) int {
	if p.all {
		return p.scan(loads, rng)
	}
	s := summarize(loads)
	switch {
	case s.eligible == 0:
		return -1
	case s.eligible == 1:
		return s.last
	case !p.replace && p.draws >= s.eligible:
		// Drawing every eligible backend without replacement compares
		// them all: skip the random numbers.
		return p.scan(loads, rng)
	}
	var taken [MaxDraws]int
	var takenW uint64
	best, bestScore, ties := -1, uint64(0), uint64(0)
	for k := range p.draws {
		var i int
		if p.replace {
			i = draw(loads, rng, &s, nil, 0)
		} else {
			i = draw(loads, rng, &s, taken[:k], takenW)
			taken[k] = i
			takenW += uint64(loads[i].Weight)
		}
		best, bestScore, ties = p.consider(loads, rng, i, best, bestScore, ties)
	}
	return best
}

// scan considers every eligible backend; -1 if there is none.
func (p *bestOf) scan(loads []Load, rng *Rand) int {
	best, bestScore, ties := -1, uint64(0), uint64(0)
	for i := range loads {
		if loads[i].Weight != 0 {
			best, bestScore, ties = p.consider(loads, rng, i, best, bestScore, ties)
		}
	}
	return best
}

// consider compares candidate i with the best so far. Among equal
// candidates each is kept with equal probability (reservoir sampling:
// the k-th tie replaces the best with probability 1/k).
func (p *bestOf) consider(loads []Load, rng *Rand, i, best int, bestScore, ties uint64) (int, uint64, uint64) {
	sc := p.score(loads[i])
	if best < 0 {
		return i, sc, 1
	}
	switch c := compare(sc, loads[i].Weight, bestScore, loads[best].Weight); {
	case c < 0:
		return i, sc, 1
	case c == 0:
		ties++
		if rng.Uint64n(ties) == 0 {
			return i, sc, ties
		}
		return best, bestScore, ties
	}
	return best, bestScore, ties
}

func (p *bestOf) score(l Load) uint64 {
	if !p.peak {
		return clampActive(l.Active) + 1
	}
	lat, ok := l.EWMA.Micros()
	if !ok {
		lat = p.penalty
	}
	// A measured 0 µs would make the cost 0 whatever the load, and the
	// backend would take every flow: count it as 1 µs so that load still
	// counts (Finagle guards the same case).
	return Cost(max(lat, 1), l.Active)
}

// compare orders a/wa and b/wb exactly, by cross-multiplying in 128 bits:
// -1 if a/wa < b/wb, 0 if equal, +1 if greater.
func compare(a uint64, wa uint32, b uint64, wb uint32) int {
	if wa == wb { // the common case: equal weights
		switch {
		case a < b:
			return -1
		case a > b:
			return 1
		}
		return 0
	}
	h1, l1 := bits.Mul64(a, uint64(wb))
	h2, l2 := bits.Mul64(b, uint64(wa))
	switch {
	case h1 < h2 || (h1 == h2 && l1 < l2):
		return -1
	case h1 == h2 && l1 == l2:
		return 0
	}
	return 1
}
