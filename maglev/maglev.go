// Package maglev builds Maglev consistent-hashing lookup tables (Eisenbud et
// al., "Maglev: A Fast and Reliable Software Network Load Balancer", NSDI
// 2016, section 3.4; seed chapter, section 3.4) and looks flows up in them.
//
// A table has M slots, M prime; each slot names a backend. A new flow's
// backend is the one in slot hash % M. Build fills the slots with the paper's
// Pseudocode 1: every backend walks its own permutation of the slots and the
// backends take turns claiming their most preferred free slot, so shares are
// nearly equal and a change in the backend set moves few flows besides those
// of the backends that left. Weights bend the turn-taking the way Envoy's
// maglev_lb.cc does.
//
// The table is a pure function of the set of (key, weight) pairs and of M:
// backends are taken in byte order of their keys, never in the order a
// configuration lists them, and the offset and skip come from Hash, which is
// fixed. Every load balancer instance that sees the same backends therefore
// builds the same table, so a flow that ECMP moves to another instance keeps
// its backend.
//
// A Table is immutable once Build returns it. The control plane builds a new
// table off to the side and publishes it to the dataplane with one
// atomic.Pointer[Table] Store; the lcores Load the pointer between bursts and
// never see a table change under them. Lookup does not allocate or lock.
package maglev

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
	"sync"
)

// Backend is one member of a VIP's backend set.
type Backend struct {
	// Key is the backend's stable name (its address or configured name). The
	// backend's permutation is derived from it, so renaming a backend moves
	// its flows.
	Key string
	// Weight is the backend's relative share of the slots. 0 keeps the
	// backend in the table's backend list but gives it no slots (draining).
	Weight uint32
}

// Table is a built Maglev lookup table. Obtain one from Build; the zero value
// is not usable. Its methods are safe for concurrent use.
type Table struct {
	size uint64
	red  reducer // hash % size without a division

	// Exactly one of slots16 and slots32 is set: backend indices take 2
	// bytes when there are at most 65536 backends (every realistic VIP), so
	// the default table fits in 128 KiB of cache instead of 256.
	slots16 []uint16
	slots32 []uint32

	backends []Backend // canonical order: sorted by Key bytes
	counts   []int     // slots owned, per backend
}

// Build returns the Maglev table of size m for the backend set. The order of
// backends does not matter. m must be a prime larger than len(backends) and
// at most MaxSize (DefaultSize is the usual choice). Errors wrap the
// sentinels ErrNoBackends, ErrEmptyKey, ErrDuplicateKey, ErrAllWeightsZero,
// ErrSizeNotPrime, ErrSizeTooLarge and ErrTooManyBackends.
func Build(backends []Backend, m uint64) (*Table, error) {
	if len(backends) == 0 {
		return nil, fmt.Errorf("maglev: %w", ErrNoBackends)
	}
	if m > MaxSize {
		return nil, fmt.Errorf("maglev: table size %d: %w (the limit is %d)", m, ErrSizeTooLarge, MaxSize)
	}
	// The permutation offset + j*skip (mod M) visits every slot exactly once
	// only if skip and M are coprime; with M prime every skip in 1..M-1 is.
	// With a composite M some backends would cycle through a subset of the
	// slots and the fill would never finish.
	if !IsPrime(m) {
		return nil, fmt.Errorf("maglev: table size %d: %w", m, ErrSizeNotPrime)
	}
	if uint64(len(backends)) >= m {
		return nil, fmt.Errorf("maglev: table size %d: %w: %d backends need a size larger than %d",
			m, ErrTooManyBackends, len(backends), len(backends))
	}
	for i, b := range backends {
		if b.Key == "" {
			return nil, fmt.Errorf("maglev: backends[%d] (weight %d): %w", i, b.Weight, ErrEmptyKey)
		}
	}

	canon := sortByKey(backends)
	var wmax uint32
	for i, b := range canon {
		if i > 0 && canon[i-1].Key == b.Key {
			return nil, fmt.Errorf("maglev: backend %q: %w", b.Key, ErrDuplicateKey)
		}
		wmax = max(wmax, b.Weight)
	}
	if wmax == 0 {
		return nil, fmt.Errorf("maglev: %d backend(s): %w", len(canon), ErrAllWeightsZero)
	}

	t := &Table{
		size:     m,
		red:      newReducer(m),
		backends: canon,
		counts:   make([]int, len(canon)),
	}
	turns := makeTurns(canon, m)
	if len(canon) <= 1<<16 {
		t.slots16 = make([]uint16, m)
		fill(t.slots16, turns, uint32(m), uint64(wmax))
	} else {
		t.slots32 = make([]uint32, m)
		fill(t.slots32, turns, uint32(m), uint64(wmax))
	}
	for _, tn := range turns {
		t.counts[tn.backend] = int(tn.taken)
	}
	return t, nil
}

// sortByKey returns the backends sorted by Key bytes (the canonical order).
//
// Keys of one VIP mostly share a long prefix ("10.0.3.17:443"), so a
// comparison sort spends its time on bytes that never decide. sortByKey
// instead radix-sorts by the 8 bytes after the keys' common prefix (the
// head, padded with zeros), least significant byte first and skipping
// bytes every key shares, then sorts each run of equal heads by whole key.
// Two keys whose heads differ compare as their heads do: at the first
// differing byte either both keys have a real byte, or the shorter key has
// ended and its zero pad sorts it first, as a prefix sorts first. The
// order is exactly strings.Compare's.
func sortByKey(backends []Backend) []Backend {
	first := backends[0].Key
	lcp := len(first)
	for _, b := range backends[1:] {
		n := min(lcp, len(b.Key))
		i := 0
		for i < n && b.Key[i] == first[i] {
			i++
		}
		lcp = i
	}
	type keyed struct {
		head uint64
		i    int
	}
	ks := make([]keyed, len(backends))
	var differ uint64 // the head bits that are not the same in every key
	for i, b := range backends {
		var head uint64
		for j := range 8 {
			head <<= 8
			if lcp+j < len(b.Key) {
				head |= uint64(b.Key[lcp+j])
			}
		}
		ks[i] = keyed{head, i}
		differ |= head ^ ks[0].head
	}
	tmp := make([]keyed, len(ks))
	for shift := 0; shift < 64; shift += 8 {
		if differ>>shift&0xff == 0 {
			continue
		}
		var count [257]int
		for _, k := range ks {
			count[k.head>>shift&0xff+1]++
		}
		for d := 1; d < 257; d++ {
			count[d] += count[d-1]
		}
		for _, k := range ks {
			d := k.head >> shift & 0xff
			tmp[count[d]] = k
			count[d]++
		}
		ks, tmp = tmp, ks
	}
	canon := make([]Backend, len(ks))
	for i := range ks {
		canon[i] = backends[ks[i].i]
	}
	for i := 0; i < len(ks); {
		j := i + 1
		for j < len(ks) && ks[j].head == ks[i].head {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(canon[i:j], func(a, b Backend) int { return strings.Compare(a.Key, b.Key) })
		}
		i = j
	}
	return canon
}

// turn is a backend's state while the table fills: where its permutation
// stands and how many slots it has claimed. Kept to 24 bytes: the builder
// touches one per turn, and 1000 of them already fill most of an L1 cache.
type turn struct {
	pos     uint32 // the backend's next preferred slot: offset + next*skip (mod M)
	skip    uint32
	inv     uint32 // skip^-1 mod M for the endgame scan; 0 until first needed
	weight  uint32
	taken   uint32 // slots claimed so far
	backend uint32 // index into the canonical backend list
}

// makeTurns derives each weighted backend's permutation exactly as the
// chapter's reference script does: offset = h(key,1) % M and
// skip = h(key,2) % (M-1) + 1, so skip is never 0 and the walk never stalls.
// Backends of weight 0 take no turns, which makes a draining backend's table
// identical, slot for slot, to the table without it.
//
// The two hashes depend on the key alone, and the control plane rebuilds
// tables of the same backends over and over (weights ramping in slow
// start, health changes): keyHashes remembers them, which saves a quarter
// of a rebuild at N = 1000 (2000 BLAKE2b hashes).
func makeTurns(canon []Backend, m uint64) []turn {
	turns := make([]turn, 0, len(canon))
	keyHashes.Lock()
	defer keyHashes.Unlock()
	if keyHashes.m == nil || len(keyHashes.m)+len(canon) > keyHashesMax {
		keyHashes.m = make(map[string][2]uint64, len(canon)) // bounded: start afresh
		keyHashes.last, keyHashes.lastHs = keyHashes.last[:0], keyHashes.lastHs[:0]
	}
	// The usual rebuild has the very keys of the one before, in the same
	// order: then their hashes come from a list instead of 2N map lookups.
	same := len(canon) == len(keyHashes.last)
	for i := 0; same && i < len(canon); i++ {
		same = canon[i].Key == keyHashes.last[i]
	}
	if !same {
		keyHashes.last, keyHashes.lastHs = keyHashes.last[:0], keyHashes.lastHs[:0]
		for _, b := range canon {
			hs, ok := keyHashes.m[b.Key]
			if !ok {
				hs = [2]uint64{keyHashes.h.sum(b.Key, 1), keyHashes.h.sum(b.Key, 2)}
				// A copy: a key cut from a configuration file's text
				// would keep the whole text alive as long as the cache
				// holds it (one file a new name, up to keyHashesMax).
				keyHashes.m[strings.Clone(b.Key)] = hs
			}
			keyHashes.last = append(keyHashes.last, b.Key)
			keyHashes.lastHs = append(keyHashes.lastHs, hs)
		}
	}
	// Barrett reductions: two divisions per backend cost more.
	modM, modM1 := newReducer(m), newReducer(m-1)
	for i, b := range canon {
		if b.Weight == 0 {
			continue
		}
		hs := keyHashes.lastHs[i]
		turns = append(turns, turn{
			pos:     uint32(modM.mod(hs[0])),
			skip:    uint32(modM1.mod(hs[1]) + 1),
			weight:  b.Weight,
			backend: uint32(i),
		})
	}
	return turns
}

// keyHashes caches Hash(key, 1) and Hash(key, 2) by backend key, up to
// keyHashesMax keys, each a copy of its own (a few MB at most;
// MaxBackends-sized fleets of distinct keys would otherwise grow it
// without end). last holds the last build's keys as given: one build's.
var keyHashes struct {
	sync.Mutex
	m map[string][2]uint64
	h namedHasher
	// The keys of the last build, in canonical order, and their hashes.
	last   []string
	lastHs [][2]uint64
}

const keyHashesMax = 1 << 16

// fill is Pseudocode 1 of the paper with Envoy's weights. The backends take
// turns in canonical order; on its turn a backend walks its permutation to
// the first free slot and claims it. Filling stops the moment the last slot
// is claimed, even in the middle of a round, as the paper's and the
// chapter's loops do.
//
// Weights: Envoy normalizes each weight to w/Σw and lets a backend take its
// turn in round i only if i·w/Σw ≥ taken·wmax/Σw, that is, only once its
// weight has "earned" another slot relative to the heaviest backend. A
// backend of the largest weight therefore takes every turn, one of a third of
// that weight every third turn, and shares come out proportional to weight.
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
// Past rebuildHeapRatio, fill visits only the backends that are due instead,
// from a heap ordered by (round, canonical index): the same turns in the
// same order, at a cost of log N per slot.
func fill[S uint16 | uint32](slots []S, turns []turn, m uint32, wmax uint64) {
	var sum uint64
	for _, t := range turns {
		sum += uint64(t.weight)
	}
	if uint64(len(turns))*wmax <= rebuildHeapRatio*sum {
		fillRounds(slots, turns, m, wmax)
	} else {
		fillHeap(slots, turns, m, wmax)
	}
}

// fillRounds visits every backend in every round.
//
// It is claim, written out in the loop for speed; the table must not
// change (TestBuilderMatchesOld). What makes it fast:
//
//   - Each round first lists the backends that are due (schedule), without
//     a branch per backend: whether a backend is due in a round depends
//     only on its own count, which no other backend's turn changes, so the
//     list made at the start of the round is the one the turns would meet.
//     The lists repeat with the weights' period and are replayed when it
//     is short (with weights 1..10, 11 lists for 119 rounds).
//   - While many slots are free, the walk runs inline with a branch-free
//     step, on a doubled bitmap that needs no reduction mod M per probe;
//     the next turn's first candidate is loaded ahead; once a quarter of
//     the table is taken the first two candidates are tested without a
//     branch between them, and a longer walk goes eight steps per branch
//     (walk8) until the table is 7/8 full, four after. The endgame, the
//     last sqrt(M) slots, goes through the filler, continuing the same
//     round at the next due backend.
func fillRounds[S uint16 | uint32](slots []S, turns []turn, m uint32, wmax uint64) {
	// A doubled bitmap: bits c and c+M both stand for slot c, so a
	// candidate c + j·skip (c < M, j·skip reduced mod M) is probed as it
	// is, below 2M, without reducing it mod M first; only the slot
	// claimed and the walk's base are reduced. A claim sets both bits.
	taken := make([]uint64, (2*m+63)/64)
	f := newFillerTaken(slots, m, taken[:(m+63)/64])
	endgame := f.endgame
	sched := newSchedule(turns, wmax)
	early, wide := m/4, m-m/8 // one candidate until 1/4 of the table is taken; walk8 until 7/8
	for round := uint64(1); ; round++ {
		// The list inline, not through a call: with few backends and
		// uneven weights a build has tens of thousands of short rounds.
		var due []uint32
		if sched.period == 0 || round == 1 {
			due = sched.list(round, sched.buf)
		} else {
			due = sched.replay(round)
		}
		n := len(due) - 1 // the last entry is the look-ahead's
		i, filled := 0, f.filled
		// The next turn's first candidate and its bitmap word, loaded
		// before this turn's branches: when one of them mispredicts, the
		// next turn's loads are done already (they come first in program
		// order and survive the flush).
		nc := turns[due[0]].pos
		nw := taken[nc>>6]
		for ; i < n && filled < endgame; i++ {
			t := &turns[due[i]]
			c, skip, w := nc, t.skip, nw
			nc = turns[due[i+1]].pos
			nw = taken[nc>>6]
			// While most of the table is free, the first candidate
			// alone, with a branch: it is free three times in four or
			// more, and testing a second one would be wasted work.
			if filled >= early || w&(1<<(c&63)) != 0 {
				// The first two candidates are tested without a
				// branch between them: while half the table is free
				// the first one's test is a coin toss, the pair's much
				// less often.
				c1 := c + skip // < 2M
				w1 := taken[c1>>6]
				if c1>>6 == c>>6 {
					w1 = w
				}
				t0, t1 := uint32(w>>(c&63))&1, uint32(w1>>(c1&63))&1 // 1: taken
				c ^= (c ^ c1) & -t0                                  // c1 if c is taken
				if t0&t1 != 0 && filled < wide {
					c = walk8(taken, step(c1, 0, m), skip, m)
				} else if t0&t1 != 0 {
					// Four steps ahead at a time, each computed from the
					// base c with its own stride, so the four positions
					// do not wait on each other; the first free one, in
					// walk order, wins.
					c = step(c1, 0, m)
					s2 := step(skip, skip, m)
					s3 := step(s2, skip, m)
					s4 := step(s3, skip, m)
					for {
						c1, c2, c3, c4 := c+skip, c+s2, c+s3, c+s4
						if taken[c1>>6]&(1<<(c1&63)) == 0 {
							c = c1
							break
						}
						if taken[c2>>6]&(1<<(c2&63)) == 0 {
							c = c2
							break
						}
						if taken[c3>>6]&(1<<(c3&63)) == 0 {
							c = c3
							break
						}
						c = step(c4, 0, m)
						if taken[c>>6]&(1<<(c&63)) == 0 {
							break
						}
					}
				}
			}
			c = step(c, 0, m) // the slot: below M
			cm := c + m
			bit, bitm := uint64(1)<<(c&63), uint64(1)<<(cm&63)
			taken[c>>6] |= bit
			taken[cm>>6] |= bitm
			// The next turn's word, as this claim left it (its
			// candidate's word may hold bit c, or bit c+M near the end
			// of the first half).
			if c>>6 == nc>>6 {
				nw |= bit
			}
			if cm>>6 == nc>>6 {
				nw |= bitm
			}
			slots[c] = S(t.backend)
			t.taken++
			t.pos = step(c, skip, m)
			filled++
		}
		f.filled = filled
		for ; i < n; i++ {
			if f.claim(&turns[due[i]]) {
				return
			}
		}
	}
}

// schedule lists the backends due in each round of fillRounds, in
// canonical order.
//
// Which backends are due in a round depends only on the round and the
// weights: a due backend always gets its slot (the table is not full yet,
// so its walk finds one), so after round r-1 a backend has taken exactly
// the slots of the rounds in which it was due, and by induction it holds
// floor((r-1)·w/wmax) + 1 of them at round r ≥ 2. The test r·w ≥
// taken·wmax then reads floor(r·w/wmax) > floor((r-1)·w/wmax): the
// backend is due when r·w crosses a multiple of wmax, which repeats every
// wmax/gcd(w, wmax) rounds. From round 2 on the lists therefore repeat
// with the period P, the least common multiple of those over the
// backends, a divisor of wmax: with equal weights P = 1, with weights
// 1..10 P divides 10. When P is small (periodCap) the first P lists are
// kept and replayed instead of testing every backend in every round (at
// M = 65537, N = 1000 and weights 1..10: 119 rounds, 11 lists made).
// TestBuilderMatchesOld checks the replay against the old builder, which
// tests every round.
type schedule struct {
	turns  []turn
	wmax   uint64
	period uint64     // 0: lists are not kept
	lists  [][]uint32 // lists[(round-2) % period]
	buf    []uint32   // the list of the round, when it is made afresh
}

// periodCap bounds the period whose lists are kept, and so their memory:
// at most periodCap·(N+1) entries.
const periodCap = 64

func newSchedule(turns []turn, wmax uint64) *schedule {
	s := &schedule{turns: turns, wmax: wmax, period: 1}
	for k := range turns {
		w := uint64(turns[k].weight)
		if s.period*w%wmax == 0 {
			continue // w's period wmax/gcd(w, wmax) divides the period already
		}
		b := wmax / gcd(w, wmax)
		s.period = s.period / gcd(s.period, b) * b
		if s.period > periodCap {
			s.period = 0
			break
		}
	}
	if s.period > 0 {
		s.lists = make([][]uint32, s.period)
	}
	s.buf = make([]uint32, len(turns)+1) // round 1's list, and every round's without a period
	return s
}

// replay returns the list of round ≥ 2, made by list the first time its
// place in the period comes round, followed by one more entry (a valid
// index for the claim loop's look-ahead, never claimed for).
func (s *schedule) replay(round uint64) []uint32 {
	j := (round - 2) % s.period
	if s.lists[j] == nil {
		s.lists[j] = s.list(round, make([]uint32, len(s.turns)+1))
	}
	return s.lists[j]
}

// list tests every backend, without a branch per backend (with mixed
// weights the test is a coin toss, and a branch on it mispredicts every
// other time), and returns due[:n+1].
func (s *schedule) list(round uint64, due []uint32) []uint32 {
	n := 0
	for k := range s.turns {
		t := &s.turns[k]
		due[n] = uint32(k)
		inc := 0
		if round*uint64(t.weight) >= uint64(t.taken)*s.wmax {
			inc = 1
		}
		n += inc
	}
	due[n] = due[0]
	return due[:n+1]
}

// gcd returns the greatest common divisor of a and b, not both 0.
func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// walk8 returns the first free candidate after the taken slot c < M on
// the walk of stride skip, as a position below 2M in fillRounds' doubled
// bitmap, testing eight steps at a time without a branch between them.
// Until the table is 7/8 full, a walk past the first two candidates is a
// few steps long and each step's test is close to a coin toss: one branch
// per eight steps mispredicts far less than one per step (measured: 20 to
// 50 µs of a build at M = 65537, N = 1000). Past that, most blocks of
// eight find nothing, and the four-stride loop of fillRounds is faster.
func walk8(taken []uint64, c, skip, m uint32) uint32 {
	s2 := step(skip, skip, m)
	s3, s4 := step(s2, skip, m), step(s2, s2, m)
	for {
		// Two bases four steps apart: three multiples of skip to reduce
		// per walk instead of seven.
		d := step(c, s4, m)
		c1, c2, c3, c4, c5, c6, c7, c8 := c+skip, c+s2, c+s3, c+s4, d+skip, d+s2, d+s3, d+s4
		free := ^(taken[c1>>6]>>(c1&63))&1 |
			(^(taken[c2>>6]>>(c2&63))&1)<<1 |
			(^(taken[c3>>6]>>(c3&63))&1)<<2 |
			(^(taken[c4>>6]>>(c4&63))&1)<<3 |
			(^(taken[c5>>6]>>(c5&63))&1)<<4 |
			(^(taken[c6>>6]>>(c6&63))&1)<<5 |
			(^(taken[c7>>6]>>(c7&63))&1)<<6 |
			(^(taken[c8>>6]>>(c8&63))&1)<<7
		if free != 0 {
			cs := [8]uint32{c1, c2, c3, c4, c5, c6, c7, c8}
			return cs[bits.TrailingZeros64(free)&7] // the first free one in walk order
		}
		c = step(c8, 0, m)
	}
}

// step is (c + skip) mod m for c, skip < m <= MaxSize, without a branch:
// whether the walk wraps around depends on the backend's skip (about half
// the steps of a large skip wrap), so a branch on it mispredicts often.
func step(c, skip, m uint32) uint32 {
	c += skip
	return c - m&^uint32(int32(c-m)>>31) // c-m < 0 (as int32): keep c
}

// fillHeap visits only the backends that are due.
func fillHeap[S uint16 | uint32](slots []S, turns []turn, m uint32, wmax uint64) {
	f := newFiller(slots, m)
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
		// this one again: a backend takes at most one turn per round. The
		// table is full by round M, so capping at 2^32-1 (to keep the packed
		// key intact) changes nothing.
		next := max(round+1, (uint64(t.taken)*wmax+uint64(t.weight)-1)/uint64(t.weight))
		next = min(next, 1<<32-1)
		due[0] = next<<32 | k
		siftDown(due)
	}
}

// rebuildHeapRatio is the N·wmax/Σw (checks per slot of the round loop) above
// which fill switches to its heap. Measured at M = 65537, N = 1000: a check
// costs under a nanosecond, a heap turn about 40 ns, so the heap wins from a
// ratio of about 40 (one backend of weight 100 among 999 of weight 1 builds
// in 4 ms instead of 6.5; one of weight 1000, in 3.5 ms instead of 40).
const rebuildHeapRatio = 32

// siftDown restores the heap property of h after h[0] grew.
func siftDown(h []uint64) {
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

// filler holds the table being filled and finds each backend's next free
// slot.
type filler[S uint16 | uint32] struct {
	slots   []S
	taken   []uint64 // occupancy bitmap: 8 KiB for M = 65537, so it stays in L1
	m       uint32
	filled  uint32
	endgame uint32   // filled count from which the endgame scan replaces the walk
	free    []uint32 // the empty slots, in the endgame
	red     reducer
}

// endgameFactor sets when filling stops walking permutations: once at most
// endgameFactor·sqrt(M) slots are empty. Walking to a free slot costs about
// M/E probes when E slots are empty; scanning the E empty slots costs E
// multiplications, so the two meet near E = sqrt(M) (times the ratio of
// their costs). Measured with BenchmarkBuild, the endgame saves about 15%
// of a build at M = 65537 and at M = 655373.
const endgameFactor = 1

func newFiller[S uint16 | uint32](slots []S, m uint32) *filler[S] {
	return newFillerTaken(slots, m, make([]uint64, (m+63)/64))
}

// newFillerTaken is newFiller with the caller's bitmap, whose first M bits
// are the slots'.
func newFillerTaken[S uint16 | uint32](slots []S, m uint32, taken []uint64) *filler[S] {
	return &filler[S]{
		slots:   slots,
		taken:   taken,
		m:       m,
		endgame: m - min(m, uint32(endgameFactor*math.Sqrt(float64(m)))),
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
func (f *filler[S]) claim(t *turn) bool {
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
			f.free = freeSlots(f.taken, m)
		}
		if t.inv == 0 {
			t.inv = inverse(t.skip, m)
		}
		bi := f.nearest(t)
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

// nearest returns the index in f.free of the free slot that comes first on
// t's walk: the one the fewest steps ahead, (e - pos)·skip^-1 mod M steps
// for slot e. Steps are distinct for distinct slots (multiplying by skip^-1
// is a bijection mod M), so the order of f.free does not matter.
//
// (e - pos)·inv ≡ e·inv + (M - pos)·inv, and with M ≤ MaxSize < 2^23 both
// products and their sum stay below 2^47: no wrap-around test per slot.
// The loop has no data-dependent branch: the reduction's last subtraction
// and the running minimum of steps<<32 | index are conditional moves.
func (f *filler[S]) nearest(t *turn) int {
	inv, mm, recip := uint64(t.inv), uint64(f.m), f.red.recip
	k := uint64(f.m-t.pos) * inv
	best := ^uint64(0)
	for i, e := range f.free {
		x := uint64(e)*inv + k
		q, _ := bits.Mul64(x, recip)
		r := x - q*mm // in [0, 2M)
		r = min(r, r-mm)
		best = min(best, r<<32|uint64(i))
	}
	return int(uint32(best))
}

// freeSlots lists the slots whose bit is clear, in increasing order. It
// visits the clear bits only (a word at a time, lowest first), not every
// slot: in the endgame a few hundred of the M bits are clear.
func freeSlots(taken []uint64, m uint32) []uint32 {
	var free []uint32
	for w, bitsSet := range taken {
		for clear := ^bitsSet; clear != 0; clear &= clear - 1 {
			if c := uint32(w*64 + bits.TrailingZeros64(clear)); c < m {
				free = append(free, c)
			}
		}
	}
	return free
}

// inverse returns x^-1 mod m for m prime and 0 < x < m (extended Euclid).
// 32-bit divisions, cheaper than 64-bit ones: the remainders stay below m
// and the coefficients' magnitudes at most m, and m ≤ MaxSize < 2^31.
func inverse(x, m uint32) uint32 {
	a, b := x, m
	u, v := int32(1), int32(0)
	for b != 0 {
		q := a / b
		a, b = b, a-q*b
		u, v = v, u-int32(q)*v
	}
	if u < 0 {
		u += int32(m)
	}
	return uint32(u)
}

// reducer computes x mod m without a division instruction (a 64-bit DIV
// costs tens of cycles). It is Barrett reduction: with recip =
// floor((2^64-1)/m), q = floor(x·recip/2^64) falls short of floor(x/m) by at
// most 1, because the truncation error is below x/2^64 < 1; so r = x - q·m
// lies in [0, 2m) and one conditional subtraction makes it exact for every
// 64-bit x.
type reducer struct{ m, recip uint64 }

func newReducer(m uint64) reducer { return reducer{m: m, recip: ^uint64(0) / m} }

func (r reducer) mod(x uint64) uint64 {
	q, _ := bits.Mul64(x, r.recip)
	x -= q * r.m
	if x >= r.m {
		x -= r.m
	}
	return x
}

// Lookup returns the index, in Backends order, of the backend that owns the
// slot hash % Size(). It is a division-free modulo (two multiplications)
// and one array read, with no allocation.
func (t *Table) Lookup(hash uint64) int {
	i := t.index(hash)
	if t.slots16 != nil {
		return int(t.slots16[i])
	}
	return int(t.slots32[i])
}

// index returns hash % size, exactly, for every hash.
func (t *Table) index(hash uint64) uint64 { return t.red.mod(hash) }

// Size returns M, the number of slots.
func (t *Table) Size() int { return int(t.size) }

// Len returns the number of backends, including those of weight 0.
func (t *Table) Len() int { return len(t.backends) }

// Backend returns backend i in canonical order (sorted by Key).
func (t *Table) Backend(i int) Backend { return t.backends[i] }

// Backends returns a copy of the backend list in canonical order (sorted by
// Key); Lookup and Slot return indices into it.
func (t *Table) Backends() []Backend { return slices.Clone(t.backends) }

// Slot returns the index of the backend that owns slot i, 0 <= i < Size().
func (t *Table) Slot(i int) int {
	if t.slots16 != nil {
		return int(t.slots16[i])
	}
	return int(t.slots32[i])
}

// Count returns the number of slots backend i owns.
func (t *Table) Count(i int) int { return t.counts[i] }

// Counts returns the number of slots each backend owns, in Backends order.
func (t *Table) Counts() []int { return slices.Clone(t.counts) }
