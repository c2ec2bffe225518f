// The seed chapter's section 3.4 comparison of flow to backend mappings
// (modulo, a hash ring, Maglev).
//
// The flow hashes are the chapter's own: Python's random.Random(seed)
// .getrandbits(64), reimplemented bit for bit (pyRandom), so with the
// chapter's seed and flow count the sampled figures are the chapter's up to
// one difference: Maglev takes backends in Fulcrum's canonical key order
// (b10 sorts before b2), where the chapter's script used list order.

package sim

import (
	"fmt"
	"io"
	"math/big"
	"math/bits"
	"slices"

	"github.com/fulcrumlb/fulcrum/maglev"
)

// The chapter's parameters.
const (
	DefaultFlows = 500_000
	DefaultSeed  = 7
	ringVnodes   = 100
	ringSeed     = 3 // the ring's points are h(f"{b}#{v}", 3)
)

// Sizes are the backend counts the chapter compares.
var Sizes = []int{10, 100}

// Figures are one scheme's measurements when one of N backends leaves.
type Figures struct {
	// LoadMax and LoadMin are the busiest and the idlest backend's load
	// before the removal, relative to an equal share (1.0).
	LoadMax, LoadMin float64
	// Moved is the percentage of flows whose backend changes; Needless, of
	// flows whose backend changes although it is still there.
	Moved, Needless float64
}

// Row is one scheme at one backend count: the figures sampled over the
// flows and the same figures computed exactly over all hashes.
type Row struct {
	N       int
	Scheme  string
	Sampled Figures
	Exact   Figures
}

// Line formats figures as the chapter's script prints them.
func (f Figures) Line(n int, scheme string) string {
	return fmt.Sprintf("N=%-3d %-17s load max/min %.3f/%.3f  flows moved %5.2f%%  of which needlessly %5.2f%%",
		n, scheme, f.LoadMax, f.LoadMin, f.Moved, f.Needless)
}

// mapping is one scheme before and after the removal. pick returns a
// backend's number i (backend "b<i>"); exact computes the figures over the
// whole 64-bit hash space (or, for Maglev, the whole table).
type mapping struct {
	name          string
	before, after func(hash uint64) int
	exact         func() (Figures, error)
}

// Compare runs the comparison over flows hashes drawn with seed, for each
// backend count in Sizes: backends "b0".."b<n-1>", the one removed is
// backends[n/2], as in the chapter.
func Compare(flows int, seed uint64) ([]Row, error) {
	if flows <= 0 {
		return nil, fmt.Errorf("flows %d: must be positive", flows)
	}
	rng := newPyRandom(seed)
	hashes := make([]uint64, flows)
	for i := range hashes {
		hashes[i] = rng.uint64()
	}
	var rows []Row
	for _, n := range Sizes {
		gone := n / 2
		left := make([]int, 0, n-1)
		for i := range n {
			if i != gone {
				left = append(left, i)
			}
		}
		mag, err := maglevMapping(n, left, gone)
		if err != nil {
			return nil, err
		}
		for _, m := range []mapping{moduloMapping(n, left, gone), ringMapping(n, left, gone), mag} {
			exact, err := m.exact()
			if err != nil {
				return nil, err
			}
			rows = append(rows, Row{N: n, Scheme: m.name, Sampled: sample(hashes, n, gone, m), Exact: exact})
		}
	}
	return rows, nil
}

// sample is the chapter's measuring loop.
func sample(hashes []uint64, n, gone int, m mapping) Figures {
	load := make([]int, n)
	moved, needless := 0, 0
	for _, h := range hashes {
		a, b := m.before(h), m.after(h)
		load[a]++
		if a != b {
			moved++
			if a != gone {
				needless++
			}
		}
	}
	share := float64(len(hashes)) / float64(n)
	return Figures{
		LoadMax:  float64(slices.Max(load)) / share,
		LoadMin:  float64(slices.Min(load)) / share,
		Moved:    100 * float64(moved) / float64(len(hashes)),
		Needless: 100 * float64(needless) / float64(len(hashes)),
	}
}

// moduloMapping is backends[hash % len(backends)].
//
// Exact figures: hash % n and hash % (n-1) repeat with period L = n(n-1)
// (consecutive integers are coprime), so over the 2^64 hashes
// 2^64 = Q·L + R the number of moved hashes is Q·(moves in one period) +
// (moves in [0, R)); likewise residue r < 2^64 mod n gets one hash more
// than the others, which shows only past the 18th digit.
func moduloMapping(n int, left []int, gone int) mapping {
	un := uint64(n)
	return mapping{
		name:   "modulo",
		before: func(h uint64) int { return int(h % un) },
		after:  func(h uint64) int { return left[h%uint64(len(left))] },
		exact: func() (Figures, error) {
			q, r := bits.Div64(1, 0, un) // 2^64 = q·n + r
			load := make([]u128, n)
			for i := range load {
				load[i] = u128{lo: q}
				if uint64(i) < r {
					load[i] = u128{lo: q + 1}
				}
			}
			period := un * uint64(len(left))
			pq, pr := bits.Div64(1, 0, period)
			var inPeriod, inRest, needPeriod, needRest uint64
			for k := range period {
				a := int(k % un)
				if a == left[k%uint64(len(left))] {
					continue
				}
				inPeriod++
				if a != gone {
					needPeriod++
				}
				if k < pr {
					inRest++
					if a != gone {
						needRest++
					}
				}
			}
			moved := mul(pq, inPeriod).add(u128{lo: inRest})
			needless := mul(pq, needPeriod).add(u128{lo: needRest})
			return loadFigures(load, n, twoTo64, moved, needless), nil
		},
	}
}

// ringMapping is a consistent-hash ring with ringVnodes points per backend
// at h(f"{b}#{v}", 3), sorted as Python sorts (hash, name) tuples; a hash
// goes to the first point above it (bisect_right), wrapping around.
//
// Exact figures: point i owns the hashes in [p(i-1), p(i)), point 0 also the
// wrap-around from the last point, so a backend's load is the sum of its
// arcs. After the removal the remaining points are a subset of the old ones,
// so each old arc goes to the first remaining point at or after its own.
func ringMapping(n int, left []int, gone int) mapping {
	type point struct {
		at      uint64
		backend int
	}
	build := func(ids []int) []point {
		pts := make([]point, 0, len(ids)*ringVnodes)
		for _, id := range ids {
			for v := range ringVnodes {
				pts = append(pts, point{maglev.Hash(fmt.Sprintf("b%d#%d", id, v), ringSeed), id})
			}
		}
		slices.SortFunc(pts, func(a, b point) int {
			if a.at != b.at {
				if a.at < b.at {
					return -1
				}
				return 1
			}
			// Python compares the names "b<i>" next, as strings.
			return compareStrings(fmt.Sprint("b", a.backend), fmt.Sprint("b", b.backend))
		})
		return pts
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	before, after := build(all), build(left)
	pick := func(pts []point) func(uint64) int {
		return func(h uint64) int {
			// bisect_right: the first point strictly above h.
			i, _ := slices.BinarySearchFunc(pts, h, func(p point, h uint64) int {
				if p.at <= h {
					return -1
				}
				return 1
			})
			return pts[i%len(pts)].backend
		}
	}
	return mapping{
		name:   "ring, 100 vnodes",
		before: pick(before),
		after:  pick(after),
		exact: func() (Figures, error) {
			load := make([]u128, n)
			var moved, needless u128
			// The owner after the removal of the arc ending at point i: the
			// first surviving point at or after i, wrapping around.
			next := -1
			for i := range before {
				if before[i].backend != gone {
					next = before[i].backend
					break
				}
			}
			for i := len(before) - 1; i >= 0; i-- {
				p := before[i]
				if p.backend != gone {
					next = p.backend
				}
				prev := before[(i+len(before)-1)%len(before)].at
				arc := u128{lo: p.at - prev} // wraps modulo 2^64 for point 0
				load[p.backend] = load[p.backend].add(arc)
				if next != p.backend {
					moved = moved.add(arc)
					if p.backend != gone {
						needless = needless.add(arc)
					}
				}
			}
			return loadFigures(load, n, twoTo64, moved, needless), nil
		},
	}
}

// maglevMapping is maglev.Build at the default size, the daemon's code path.
//
// Exact figures: a hash's slot is hash % M, so each slot carries 1/M of the
// hashes (up to 2^64 mod M extra hashes in some slots, a 10^-15 effect): the
// load is the slot counts over M/N and the moved flows are the changed slots
// (maglev.Diff) over M.
func maglevMapping(n int, left []int, gone int) (mapping, error) {
	build := func(ids []int) (*maglev.Table, []int, error) {
		bs := make([]maglev.Backend, len(ids))
		for i, id := range ids {
			bs[i] = maglev.Backend{Key: fmt.Sprint("b", id), Weight: 1}
		}
		t, err := maglev.Build(bs, maglev.DefaultSize)
		if err != nil {
			return nil, nil, err
		}
		// Table indices are in canonical key order; map them back to b<i>.
		num := make([]int, t.Len())
		for i := range num {
			if _, err := fmt.Sscanf(t.Backend(i).Key, "b%d", &num[i]); err != nil {
				return nil, nil, err
			}
		}
		return t, num, nil
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	tb, nb, err := build(all)
	if err != nil {
		return mapping{}, err
	}
	ta, na, err := build(left)
	if err != nil {
		return mapping{}, err
	}
	return mapping{
		name:   fmt.Sprintf("maglev M=%d", maglev.DefaultSize),
		before: func(h uint64) int { return nb[tb.Lookup(h)] },
		after:  func(h uint64) int { return na[ta.Lookup(h)] },
		exact: func() (Figures, error) {
			load := make([]u128, n)
			for i, c := range tb.Counts() {
				load[nb[i]] = u128{lo: uint64(c)}
			}
			d, err := maglev.Diff(tb, ta)
			if err != nil {
				return Figures{}, err
			}
			return loadFigures(load, n, u128{lo: uint64(tb.Size())},
				u128{lo: uint64(d.Changed)}, u128{lo: uint64(d.Needless)}), nil
		},
	}, nil
}

// loadFigures turns per-backend shares of a space of the given size into
// Figures.
func loadFigures(load []u128, n int, space, moved, needless u128) Figures {
	most, least := load[0], load[0]
	for _, l := range load[1:] {
		if l.less(least) {
			least = l
		}
		if most.less(l) {
			most = l
		}
	}
	// load/(space/n) = load·n/space
	scale := func(x u128) float64 {
		r := new(big.Rat).SetFrac(x.big(), space.big())
		f, _ := r.Mul(r, new(big.Rat).SetInt64(int64(n))).Float64()
		return f
	}
	return Figures{
		LoadMax:  scale(most),
		LoadMin:  scale(least),
		Moved:    100 * fraction(moved, space),
		Needless: 100 * fraction(needless, space),
	}
}

// u128 counts hashes: the whole 64-bit space has 2^64 of them, one more than
// a uint64 holds.
type u128 struct{ hi, lo uint64 }

var twoTo64 = u128{hi: 1}

func mul(a, b uint64) u128 {
	hi, lo := bits.Mul64(a, b)
	return u128{hi, lo}
}

func (a u128) add(b u128) u128 {
	lo, c := bits.Add64(a.lo, b.lo, 0)
	return u128{a.hi + b.hi + c, lo}
}

func (a u128) less(b u128) bool { return a.hi < b.hi || a.hi == b.hi && a.lo < b.lo }

func (a u128) big() *big.Int {
	x := new(big.Int).SetUint64(a.hi)
	return x.Lsh(x, 64).Or(x, new(big.Int).SetUint64(a.lo))
}

// fraction is a/b, rounded once, at the end.
func fraction(a, b u128) float64 {
	f, _ := new(big.Rat).SetFrac(a.big(), b.big()).Float64()
	return f
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Write prints the comparison for an operator: the chapter's table from the
// sampled flows, then the same table computed exactly.
func Write(w io.Writer, rows []Row, flows int, seed uint64) error {
	var err error
	p := func(format string, a ...any) {
		if err == nil {
			_, err = fmt.Fprintf(w, format, a...)
		}
	}
	p("Flow-to-backend mappings when one of N backends (b0..b<N-1>) is removed (b<N/2>), the load-balancing chapter, section 3.4.\n")
	p("load max/min: busiest/idlest backend before the removal, relative to an equal share; flows moved: change backend;\n")
	p("needlessly: change backend although theirs is still there. Maglev takes backends in key byte order.\n\n")
	p("Sampled over %d random flow hashes (Python random.Random(%d).getrandbits(64)):\n", flows, seed)
	for _, r := range rows {
		p("%s\n", r.Sampled.Line(r.N, r.Scheme))
	}
	p("\nExact, over all 2^64 hashes (modulo: periodic count; ring: arc lengths; maglev: slot counts and changed slots over M):\n")
	for _, r := range rows {
		p("%s\n", r.Exact.Line(r.N, r.Scheme))
	}
	return err
}
