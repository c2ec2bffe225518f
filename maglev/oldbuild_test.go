package maglev

// The table builder as it was before the round-3 speed-up (issue 13),
// kept verbatim (names prefixed "old") as the reference the new builder
// must match slot for slot: TestBuilderMatchesOld. Do not optimise it.

import (
	"math"
	"slices"
	"strings"
)

// oldBuild is the old Build's fill over the canonical backend list: the
// backend index of every slot.
func oldBuild(backends []Backend, m uint64) []uint32 {
	canon := slices.Clone(backends)
	slices.SortFunc(canon, func(a, b Backend) int { return strings.Compare(a.Key, b.Key) })
	var wmax uint32
	for _, b := range canon {
		wmax = max(wmax, b.Weight)
	}
	turns := oldMakeTurns(canon, m)
	slots := make([]uint32, m)
	oldFill(slots, turns, uint32(m), uint64(wmax))
	return slots
}

// oldTurn is a backend's state while the table fills: where its permutation
// stands and how many slots it has claimed. Kept to 24 bytes: the builder
// touches one per turn, and 1000 of them already fill most of an L1 cache.
type oldTurn struct {
	pos     uint32 // the backend's next preferred slot: offset + next*skip (mod M)
	skip    uint32
	inv     uint32 // skip^-1 mod M for the endgame scan; 0 until first needed
	weight  uint32
	taken   uint32 // slots claimed so far
	backend uint32 // index into the canonical backend list
}

// oldMakeTurns derives each weighted backend's permutation exactly as the
// chapter's reference script does: offset = h(key,1) % M and
// skip = h(key,2) % (M-1) + 1, so skip is never 0 and the walk never stalls.
// Backends of weight 0 take no turns, which makes a draining backend's table
// identical, slot for slot, to the table without it.
func oldMakeTurns(canon []Backend, m uint64) []oldTurn {
	var h namedHasher
	turns := make([]oldTurn, 0, len(canon))
	for i, b := range canon {
		if b.Weight == 0 {
			continue
		}
		turns = append(turns, oldTurn{
			pos:     uint32(h.sum(b.Key, 1) % m),
			skip:    uint32(h.sum(b.Key, 2)%(m-1) + 1),
			weight:  b.Weight,
			backend: uint32(i),
		})
	}
	return turns
}

// oldFill is Pseudocode 1 of the paper with Envoy's weights. The backends take
// turns in canonical order; on its oldTurn a backend walks its permutation to
// the first free slot and claims it. Filling stops the moment the last slot
// is claimed, even in the middle of a round, as the paper's and the
// chapter's loops do.
//
// Weights: Envoy normalizes each weight to w/Σw and lets a backend take its
// oldTurn in round i only if i·w/Σw ≥ taken·wmax/Σw, that is, only once its
// weight has "earned" another slot relative to the heaviest backend. A
// backend of the largest weight therefore takes every oldTurn, one of a third of
// that weight every third oldTurn, and shares come out proportional to weight.
// Multiplying both sides by Σw gives the same test in integers,
// i·w ≥ taken·wmax, which we use instead of Envoy's doubles: it is exact, so
// every architecture (with or without fused multiply-add) builds the same
// table. Both sides stay below 2^64 because i and taken are at most M and
// weights are 32-bit. With all weights equal the test always passes and the
// loop is exactly the chapter's Python loop.
//
// Visiting every backend in every round costs N·wmax/Σw checks per slot,
// which is about 1 for even weights but up to N when one backend outweighs
// all others together (1000 backends, one of weight 1000: 65 million checks).
// Past oldRebuildHeapRatio, oldFill visits only the backends that are due instead,
// from a heap ordered by (round, canonical index): the same turns in the
// same order, at a cost of log N per slot.
func oldFill[S uint16 | uint32](slots []S, turns []oldTurn, m uint32, wmax uint64) {
	var sum uint64
	for _, t := range turns {
		sum += uint64(t.weight)
	}
	if uint64(len(turns))*wmax <= oldRebuildHeapRatio*sum {
		oldFillRounds(slots, turns, m, wmax)
	} else {
		oldFillHeap(slots, turns, m, wmax)
	}
}

// oldFillRounds visits every backend in every round.
func oldFillRounds[S uint16 | uint32](slots []S, turns []oldTurn, m uint32, wmax uint64) {
	f := oldNewFiller(slots, m)
	for round := uint64(1); ; round++ {
		for k := range turns {
			t := &turns[k]
			if round*uint64(t.weight) < uint64(t.taken)*wmax {
				continue // this backend has had its share for now
			}
			if f.claim(t) {
				return
			}
		}
	}
}

// oldFillHeap visits only the backends that are due.
func oldFillHeap[S uint16 | uint32](slots []S, turns []oldTurn, m uint32, wmax uint64) {
	f := oldNewFiller(slots, m)
	// due is a min-heap of round<<32 | index: popping it yields the turns in
	// round order and, within a round, in canonical order.
	due := make([]uint64, len(turns))
	for k := range turns {
		due[k] = 1<<32 | uint64(k) // round 1: everyone, in order; already a heap
	}
	for {
		round, k := due[0]>>32, due[0]&(1<<32-1)
		t := &turns[k]
		if f.claim(t) {
			return
		}
		// The next round in which round·w ≥ taken·wmax holds, and never
		// this one again: a backend takes at most one oldTurn per round. The
		// table is full by round M, so capping at 2^32-1 (to keep the packed
		// key intact) changes nothing.
		next := max(round+1, (uint64(t.taken)*wmax+uint64(t.weight)-1)/uint64(t.weight))
		next = min(next, 1<<32-1)
		due[0] = next<<32 | k
		oldSiftDown(due)
	}
}

// oldRebuildHeapRatio is the N·wmax/Σw (checks per slot of the round loop) above
// which oldFill switches to its heap. Measured at M = 65537, N = 1000: a check
// costs under a nanosecond, a heap oldTurn about 40 ns, so the heap wins from a
// ratio of about 40 (one backend of weight 100 among 999 of weight 1 builds
// in 4 ms instead of 6.5; one of weight 1000, in 3.5 ms instead of 40).
const oldRebuildHeapRatio = 32

// oldSiftDown restores the heap property of h after h[0] grew.
func oldSiftDown(h []uint64) {
	i, n := 0, len(h)
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if c+1 < n && h[c+1] < h[c] {
			c++
		}
		if h[i] <= h[c] {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

// oldFiller holds the table being filled and finds each backend's next free
// slot.
type oldFiller[S uint16 | uint32] struct {
	slots   []S
	taken   []uint64 // occupancy bitmap: 8 KiB for M = 65537, so it stays in L1
	m       uint32
	filled  uint32
	endgame uint32   // filled count from which the endgame scan replaces the walk
	free    []uint32 // the empty slots, in the endgame
	red     reducer
}

// oldEndgameFactor sets when filling stops walking permutations: once at most
// oldEndgameFactor·sqrt(M) slots are empty. Walking to a free slot costs about
// M/E probes when E slots are empty; scanning the E empty slots costs E
// multiplications, so the two meet near E = sqrt(M) (times the ratio of
// their costs). Measured with BenchmarkBuild, the endgame saves about 15%
// of a build at M = 65537 and at M = 655373.
const oldEndgameFactor = 1

func oldNewFiller[S uint16 | uint32](slots []S, m uint32) *oldFiller[S] {
	return &oldFiller[S]{
		slots:   slots,
		taken:   make([]uint64, (m+63)/64),
		m:       m,
		endgame: m - min(m, uint32(oldEndgameFactor*math.Sqrt(float64(m)))),
		red:     newReducer(uint64(m)),
	}
}

// claim gives backend t its most preferred free slot and reports whether
// the table is now full.
//
// Speed without changing the result: the walk advances by adding skip and
// subtracting M on wrap-around instead of computing (offset + next·skip) % M
// at each step, and the free-slot test reads a bitmap rather than the slot
// array. In the endgame, when few slots are empty, the next free slot is
// found directly: free slot e lies (e - pos)·skip^-1 mod M steps ahead on
// the backend's walk (M is prime, so skip has an inverse), every slot the
// walk would pass on the way is taken, so the free slot with the fewest
// steps is the one the walk would reach.
func (f *oldFiller[S]) claim(t *oldTurn) bool {
	m := f.m
	var c uint32
	if f.filled < f.endgame {
		c = t.pos
		for f.taken[c>>6]&(1<<(c&63)) != 0 {
			c += t.skip
			if c >= m {
				c -= m
			}
		}
		f.taken[c>>6] |= 1 << (c & 63)
	} else {
		if f.free == nil {
			f.free = oldFreeSlots(f.taken, m)
		}
		if t.inv == 0 {
			t.inv = inverse(t.skip, m)
		}
		best, bi := uint64(m), 0
		for i, e := range f.free {
			ahead := e - t.pos
			if e < t.pos {
				ahead += m
			}
			if steps := f.red.mod(uint64(ahead) * uint64(t.inv)); steps < best {
				best, bi = steps, i
			}
		}
		c = f.free[bi]
		f.free[bi] = f.free[len(f.free)-1]
		f.free = f.free[:len(f.free)-1]
	}
	f.slots[c] = S(t.backend)
	t.taken++
	c += t.skip
	if c >= m {
		c -= m
	}
	t.pos = c
	f.filled++
	return f.filled == m
}

// oldFreeSlots lists the slots whose bit is clear.
func oldFreeSlots(taken []uint64, m uint32) []uint32 {
	var free []uint32
	for w, bitsSet := range taken {
		for b := 0; b < 64; b++ {
			if c := uint32(w*64 + b); c < m && bitsSet&(1<<b) == 0 {
				free = append(free, c)
			}
		}
	}
	return free
}
