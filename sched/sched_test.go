package sched

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"
)

func TestKind(t *testing.T) {
	for _, k := range Kinds() {
		got, err := ParseKind(k.String())
		if err != nil || got != k {
			t.Errorf("ParseKind(%q) = %v, %v; want %v", k.String(), got, err, k)
		}
		if k.IsPicker() != (k != Maglev) {
			t.Errorf("%v.IsPicker() = %v", k, k.IsPicker())
		}
	}
	want := []string{"maglev", "p2c", "least-conn", "peak-ewma", "round-robin", "random"}
	for i, k := range Kinds() {
		if k.String() != want[i] {
			t.Errorf("Kinds()[%d] = %q, want %q", i, k, want[i])
		}
	}
	if Kind(0) != Maglev {
		t.Error("the zero Kind is not Maglev")
	}
	for _, bad := range []string{"", "P2C", "leastconn", "least_conn", "maglev "} {
		_, err := ParseKind(bad)
		if !errors.Is(err, ErrUnknownKind) {
			t.Errorf("ParseKind(%q): %v, want ErrUnknownKind", bad, err)
		}
	}
	if _, err := ParseKind("wrr"); err == nil || err.Error() != `unknown scheduler "wrr" (want maglev, p2c, least-conn, peak-ewma, round-robin or random)` {
		t.Errorf("message: %v", err)
	}
	if s := Kind(200).String(); s != "Kind(200)" {
		t.Errorf("Kind(200).String() = %q", s)
	}
	if Kind(200).IsPicker() {
		t.Error("Kind(200).IsPicker()")
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		k    Kind
		o    Options
		want error
	}{
		{Maglev, Options{}, ErrNotPicker},
		{P2C, Options{Draws: -1}, ErrDraws},
		{P2C, Options{Draws: MaxDraws + 1}, ErrDraws},
		{PeakEWMA, Options{Penalty: -time.Millisecond}, ErrPenalty},
		{PeakEWMA, Options{Penalty: 999 * time.Nanosecond}, ErrPenalty},
		{PeakEWMA, Options{Penalty: (MaxSample + 1) * time.Microsecond}, ErrPenalty},
		{Kind(99), Options{}, ErrUnknownKind},
	}
	for _, tc := range tests {
		if _, err := New(tc.k, tc.o); !errors.Is(err, tc.want) {
			t.Errorf("New(%v, %+v) = %v, want %v", tc.k, tc.o, err, tc.want)
		}
	}
	for _, k := range Kinds()[1:] {
		if _, err := New(k, Options{Draws: MaxDraws, Penalty: time.Microsecond}); err != nil {
			t.Errorf("New(%v) at the limits: %v", k, err)
		}
	}
}

// TestRandKnownAnswer checks SplitMix64 against the reference
// implementation's output for seed 0 (Vigna, splitmix64.c).
func TestRandKnownAnswer(t *testing.T) {
	r := NewRand(0)
	for i, want := range []uint64{0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f, 0xf88bb8a8724c81ec} {
		if got := r.Uint64(); got != want {
			t.Errorf("output %d = %#x, want %#x", i, got, want)
		}
	}
	var zero Rand
	if zero.Uint64() != 0xe220a8397b1dcdaf {
		t.Error("the zero Rand is not NewRand(0)")
	}
}

func TestRandUniform(t *testing.T) {
	r := NewRand(1)
	const n, draws = 7, 700_000
	var counts [n]int
	for range draws {
		counts[r.Uint64n(n)]++
	}
	for i, c := range counts {
		if math.Abs(float64(c)/draws-1.0/n) > 0.003 {
			t.Errorf("Uint64n(7) gave %d %d times of %d", i, c, draws)
		}
	}
	if got := r.Uint64n(1); got != 0 {
		t.Errorf("Uint64n(1) = %d", got)
	}
	var sum float64
	for range 100_000 {
		f := r.Float64()
		if f < 0 || f >= 1 {
			t.Fatalf("Float64() = %v", f)
		}
		sum += f
	}
	if m := sum / 100_000; math.Abs(m-0.5) > 0.005 {
		t.Errorf("Float64 mean %v", m)
	}
}

func micros(ms int64) int64 { return ms * 1000 }

// TestEWMAWorkedExample is seed 003's worked example and its common
// mistakes.
func TestEWMAWorkedExample(t *testing.T) {
	var e EWMA
	if us, ok := e.Micros(); ok || us != 0 {
		t.Errorf("zero EWMA = %d, %v; want 0, false", us, ok)
	}
	for _, step := range []struct{ sample, want int64 }{
		{micros(100), 100_000}, // the first sample starts the average, not 30 ms
		{micros(200), 130_000},
		{micros(1000), 391_000}, // not 0.7*1000 + 0.3*130 = 739 (reversed alpha)
	} {
		e.Observe(step.sample)
		if us, ok := e.Micros(); !ok || us != step.want {
			t.Fatalf("after %d µs: %d, %v; want %d", step.sample, us, ok, step.want)
		}
	}
	// Truncation, not rounding: (3*2 + 7*1) / 10 = 1.3 -> 1; and
	// (3*9 + 7*1) / 10 = 3.4 -> 3; (3*5 + 7*3) / 10 = 3.6 -> 3.
	var f EWMA
	for _, step := range []struct{ sample, want int64 }{{1, 1}, {2, 1}, {9, 3}, {5, 3}} {
		f.Observe(step.sample)
		if us, _ := f.Micros(); us != step.want {
			t.Errorf("after %d: %d, want %d", step.sample, us, step.want)
		}
	}
	// A 0 µs sample is a sample.
	var z EWMA
	z.Observe(0)
	if us, ok := z.Micros(); !ok || us != 0 {
		t.Errorf("after a 0 sample: %d, %v", us, ok)
	}
	// Clamping.
	var c EWMA
	c.Observe(-5)
	if us, _ := c.Micros(); us != 0 {
		t.Errorf("negative sample gives %d", us)
	}
	c.Observe(math.MaxInt64)
	if us, _ := c.Micros(); us != (3*MaxSample)/10 {
		t.Errorf("huge sample gives %d", us)
	}
}

func TestEWMAPeak(t *testing.T) {
	var e EWMA
	for _, step := range []struct{ sample, want int64 }{
		{micros(100), 100_000},
		{micros(1000), 1_000_000}, // a higher sample replaces the average
		{micros(100), 730_000},    // a lower one decays it: (300 + 7000) / 10
		{micros(730), 730_000},
		{micros(100), 541_000},
	} {
		e.ObservePeak(step.sample)
		if us, _ := e.Micros(); us != step.want {
			t.Fatalf("after %d µs: %d, want %d", step.sample, us, step.want)
		}
	}
}

func TestCost(t *testing.T) {
	// "A backend that answers in 10 ms but already holds 9 requests costs
	// 10 * 10 = 100, the same as an idle backend averaging 100 ms."
	if a, b := Cost(micros(10), 9), Cost(micros(100), 0); a != b || a != 100_000 {
		t.Errorf("Cost = %d and %d, want 100000 both", a, b)
	}
	if got := Cost(0, 5); got != 0 {
		t.Errorf("Cost(0, 5) = %d: the exercise's trap is 0", got)
	}
	if got := Cost(MaxSample*4, math.MaxInt64); got != MaxSample*(MaxActive+1) {
		t.Errorf("Cost saturates at %d", got)
	}
	if got := Cost(7, -3); got != 7 {
		t.Errorf("Cost(7, -3) = %d", got)
	}
}

func eq(ws ...uint32) []Load {
	ls := make([]Load, len(ws))
	for i, w := range ws {
		ls[i].Weight = w
	}
	return ls
}

// TestWeightedShares draws many times with fixed loads: random honours the
// weights, and round robin exactly.
func TestWeightedShares(t *testing.T) {
	weights := []uint32{1, 2, 3, 0, 4}
	for _, k := range []Kind{Random, RoundRobin} {
		t.Run(k.String(), func(t *testing.T) {
			p := MustNew(k, Options{})
			r := NewRand(42)
			loads := eq(weights...)
			const picks = 200_000
			counts := make([]int, len(loads))
			for range picks {
				counts[p.Pick(loads, &r)]++
			}
			for i, w := range weights {
				share, want := float64(counts[i])/picks, float64(w)/10
				if math.Abs(share-want) > 0.005 {
					t.Errorf("backend %d (weight %d): share %.4f, want %.4f", i, w, share, want)
				}
			}
			if k == RoundRobin {
				for i, w := range weights {
					if counts[i] != picks/10*int(w) {
						t.Errorf("round robin gave backend %d %d picks, want exactly %d", i, counts[i], picks/10*int(w))
					}
				}
			}
		})
	}
}

// TestRandomUnevenWeights exercises the exact fallback of draw: one heavy
// backend among many light and ineligible ones makes rejection sampling
// give up often.
func TestRandomUnevenWeights(t *testing.T) {
	loads := make([]Load, 200)
	loads[7].Weight = 1 << 30
	loads[150].Weight = 1 << 30
	for i := 160; i < 200; i++ {
		loads[i].Weight = 1 << 24
	}
	p, r := MustNew(Random, Options{}), NewRand(5)
	counts := map[int]int{}
	const picks = 100_000
	for range picks {
		counts[p.Pick(loads, &r)]++
	}
	total := float64(2<<30 + 40<<24)
	for _, i := range []int{7, 150, 165} {
		want := float64(loads[i].Weight) / total
		if got := float64(counts[i]) / picks; math.Abs(got-want) > 0.01 {
			t.Errorf("backend %d: share %.4f, want %.4f", i, got, want)
		}
	}
}

func TestRoundRobinSmooth(t *testing.T) {
	// nginx's own example: weights 5, 1, 1 give a a b a c a a.
	p, loads := MustNew(RoundRobin, Options{}), eq(5, 1, 1)
	var got []byte
	for range 14 {
		got = append(got, "abc"[p.Pick(loads, nil)])
	}
	if string(got) != "aabacaaaabacaa" {
		t.Errorf("sequence %s, want aabacaa twice", got)
	}
	// Equal weights rotate in position order; a drained backend is skipped.
	p, loads = MustNew(RoundRobin, Options{}), eq(1, 1, 0, 1)
	got = got[:0]
	for range 6 {
		got = append(got, "abcd"[p.Pick(loads, nil)])
	}
	if string(got) != "abdabd" {
		t.Errorf("sequence %s, want abdabd", got)
	}
	// A change in the number of backends starts over.
	loads = eq(1, 1)
	if i := p.Pick(loads, nil); i != 0 {
		t.Errorf("after the set changed: %d, want 0", i)
	}
}

func TestLeastConn(t *testing.T) {
	tests := []struct {
		name  string
		loads []Load
		want  int
	}{
		{"least active", []Load{{Weight: 1, Active: 3}, {Weight: 1, Active: 1}, {Weight: 1, Active: 2}}, 1},
		{"weighted", []Load{{Weight: 1, Active: 2}, {Weight: 4, Active: 8}}, 1},              // 3/1 > 9/4
		{"idle: heavier wins", []Load{{Weight: 1}, {Weight: 3}, {Weight: 2}}, 1},             // 1/1, 1/3, 1/2
		{"skip ineligible", []Load{{Weight: 0, Active: 0}, {Weight: 1, Active: 50}}, 1},      //
		{"negative active is 0", []Load{{Weight: 1, Active: 1}, {Weight: 1, Active: -9}}, 1}, //
		{"none eligible", []Load{{Weight: 0}, {Weight: 0}}, -1},
		{"empty", nil, -1},
	}
	p, r := MustNew(LeastConn, Options{}), NewRand(1)
	for _, tc := range tests {
		for range 50 {
			if got := p.Pick(tc.loads, &r); got != tc.want {
				t.Fatalf("%s: %d, want %d", tc.name, got, tc.want)
			}
		}
	}
	// Ties are broken uniformly at random, not by position.
	loads := []Load{{Weight: 1, Active: 2}, {Weight: 1, Active: 1}, {Weight: 2, Active: 3}, {Weight: 1, Active: 1}}
	counts := make([]int, len(loads))
	for range 30_000 {
		counts[p.Pick(loads, &r)]++
	}
	if counts[0] != 0 {
		t.Errorf("the most loaded backend was picked %d times", counts[0])
	}
	for _, i := range []int{1, 2, 3} { // 2/1, 4/2, 2/1: a three-way tie
		if math.Abs(float64(counts[i])/30_000-1.0/3) > 0.02 {
			t.Errorf("tie: backend %d picked %d of 30000", i, counts[i])
		}
	}
}

// TestFillUp starts from idle backends and counts every pick as a new
// active flow: the load-aware pickers spread the flows in proportion to
// the weights (least-conn exactly, p2c within a few flows).
func TestFillUp(t *testing.T) {
	weights := []uint32{1, 2, 3, 4}
	for _, tc := range []struct {
		k   Kind
		tol int64
	}{{LeastConn, 1}, {P2C, 12}, {PeakEWMA, 12}} {
		p, r := MustNew(tc.k, Options{}), NewRand(9)
		loads := eq(weights...)
		for i := range loads {
			loads[i].EWMA.Observe(1000) // equal latencies: peak-ewma ranks by load
		}
		for range 10_000 {
			loads[p.Pick(loads, &r)].Active++
		}
		for i, w := range weights {
			if want := int64(w) * 1000; abs(loads[i].Active-want) > tc.tol {
				t.Errorf("%v: backend %d (weight %d) holds %d flows, want %d ± %d", tc.k, i, w, loads[i].Active, want, tc.tol)
			}
		}
	}
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// TestDistinctDraws is the HAProxy patch's point: with distinct draws the
// most loaded backend can never win (it always loses to the other
// candidate), with replacement it wins whenever both draws land on it,
// 1/n² of the choices (1/16 with 4 backends, seed 002).
func TestDistinctDraws(t *testing.T) {
	loads := []Load{{Weight: 1, Active: 9}, {Weight: 1, Active: 1}, {Weight: 1, Active: 2}, {Weight: 1, Active: 3}}
	const picks = 160_000
	for _, k := range []Kind{P2C, PeakEWMA} {
		for _, replace := range []bool{false, true} {
			p, r := MustNew(k, Options{WithReplacement: replace}), NewRand(3)
			counts := make([]int, len(loads))
			for range picks {
				counts[p.Pick(loads, &r)]++
			}
			share := float64(counts[0]) / picks
			switch {
			case !replace && counts[0] != 0:
				t.Errorf("%v distinct: the most loaded backend won %d times", k, counts[0])
			case replace && math.Abs(share-1.0/16) > 0.003:
				t.Errorf("%v with replacement: the most loaded backend won %.4f of choices, want 1/16", k, share)
			}
			// The least loaded backend wins when drawn: distinct, in
			// 1 - (3/4 × 2/3) = 1/2 of choices; with replacement in
			// 1 - (3/4)² = 7/16.
			want := 0.5
			if replace {
				want = 7.0 / 16
			}
			if got := float64(counts[1]) / picks; math.Abs(got-want) > 0.005 {
				t.Errorf("%v replace=%v: least loaded won %.4f, want %.4f", k, replace, got, want)
			}
		}
	}
	// Two backends, one of them not eligible: always the other, even with
	// more draws than eligible backends.
	for _, k := range []Kind{P2C, PeakEWMA, LeastConn, Random, RoundRobin} {
		for _, o := range []Options{{}, {Draws: 5}, {WithReplacement: true}} {
			p, r := MustNew(k, o), NewRand(1)
			for _, ls := range [][]Load{{{Weight: 0}, {Weight: 3, Active: 100}}, {{Weight: 3, Active: 100}, {Weight: 0}}} {
				want := 1
				if ls[0].Weight != 0 {
					want = 0
				}
				for range 100 {
					if got := p.Pick(ls, &r); got != want {
						t.Fatalf("%v %+v: picked %d, want %d", k, o, got, want)
					}
				}
			}
		}
	}
}

// TestDrawNeverRepeats checks draw itself: a position already taken is
// never drawn again, and the rest keep their weighted odds.
func TestDrawNeverRepeats(t *testing.T) {
	loads := eq(1, 0, 2, 1, 4)
	s := summarize(loads)
	r := NewRand(11)
	counts := make([]int, len(loads))
	for range 80_000 {
		taken := []int{4, 2}
		i := draw(loads, &r, &s, taken, 6)
		if i == 4 || i == 2 || loads[i].Weight == 0 {
			t.Fatalf("drew %d with 4 and 2 taken", i)
		}
		counts[i]++
	}
	if math.Abs(float64(counts[0])/80_000-0.5) > 0.01 {
		t.Errorf("the two weight-1 backends left: %v", counts)
	}
}

func TestPeakEWMA(t *testing.T) {
	fast := EWMA{}
	fast.Observe(micros(10))
	slow := EWMA{}
	slow.Observe(micros(100))
	// Draws: 2 over two backends compares both, so the choice is exact.
	p, r := MustNew(PeakEWMA, Options{}), NewRand(1)
	pick := func(ls ...Load) int { return p.Pick(ls, &r) }
	if got := pick(Load{Weight: 1, Active: 10, EWMA: fast}, Load{Weight: 1, Active: 0, EWMA: slow}); got != 1 {
		t.Errorf("a busy fast backend (10 ms × 11) must lose to an idle slow one (100 ms): got %d", got)
	}
	if got := pick(Load{Weight: 1, Active: 8, EWMA: fast}, Load{Weight: 1, Active: 0, EWMA: slow}); got != 0 {
		t.Errorf("10 ms × 9 beats 100 ms × 1: got %d", got)
	}
	if got := pick(Load{Weight: 1, Active: 19, EWMA: fast}, Load{Weight: 2, Active: 0, EWMA: slow}); got != 1 {
		t.Errorf("weighted: 10 × 20 / 1 loses to 100 × 1 / 2: got %d", got)
	}
	// A measured 0 µs still counts its load.
	var zero EWMA
	zero.Observe(0)
	if got := pick(Load{Weight: 1, Active: 5, EWMA: zero}, Load{Weight: 1, Active: 0, EWMA: zero}); got != 1 {
		t.Errorf("0 µs backends: got %d, want the idle one", got)
	}
}

// TestColdStart: a backend with no sample costs the penalty, not 0 (the
// exercise's trap), so it does not take every flow; it gets flows once the
// others cost more than the penalty.
func TestColdStart(t *testing.T) {
	warm := EWMA{}
	warm.Observe(micros(1))
	for _, tc := range []struct {
		penalty time.Duration
		active  int64 // of the warm backend
		want    int
	}{
		{0, 5, 0},                    // 1 ms × 6 < 30 ms (DefaultPenalty)
		{0, 28, 0},                   // 29 ms < 30 ms
		{0, 30, 1},                   // 31 ms > 30 ms
		{5 * time.Millisecond, 3, 0}, // 4 ms < 5 ms
		{5 * time.Millisecond, 5, 1}, // 6 ms > 5 ms
		{time.Microsecond, 0, 1},     // 1 ms > 1 µs
	} {
		p, r := MustNew(PeakEWMA, Options{Penalty: tc.penalty}), NewRand(1)
		loads := []Load{{Weight: 1, Active: tc.active, EWMA: warm}, {Weight: 1}}
		if got := p.Pick(loads, &r); got != tc.want {
			t.Errorf("penalty %v, warm backend at 1 ms × %d: picked %d, want %d", tc.penalty, tc.active+1, got, tc.want)
		}
	}
	// On a fresh pool every backend costs the penalty: the first does not
	// take every flow, the load spreads.
	p, r := MustNew(PeakEWMA, Options{}), NewRand(2)
	loads := eq(1, 1, 1, 1)
	for range 400 {
		loads[p.Pick(loads, &r)].Active++
	}
	for i := range loads {
		if loads[i].Active < 90 || loads[i].Active > 110 {
			t.Errorf("fresh pool: backend %d got %d of 400", i, loads[i].Active)
		}
	}
}

func TestCompare(t *testing.T) {
	tests := []struct {
		a    uint64
		wa   uint32
		b    uint64
		wb   uint32
		want int
	}{
		{1, 1, 2, 1, -1},
		{2, 2, 1, 1, 0},
		{3, 1, 1, 1, 1},
		{math.MaxUint64, math.MaxUint32, math.MaxUint64, math.MaxUint32 - 1, -1}, // needs 128 bits
		{math.MaxUint64 - 1, math.MaxUint32, math.MaxUint64, math.MaxUint32, -1},
	}
	for _, tc := range tests {
		if got := compare(tc.a, tc.wa, tc.b, tc.wb); got != tc.want {
			t.Errorf("compare(%d/%d, %d/%d) = %d, want %d", tc.a, tc.wa, tc.b, tc.wb, got, tc.want)
		}
	}
}

func allPickers() map[string]Picker {
	ps := map[string]Picker{}
	for _, k := range Kinds()[1:] {
		ps[k.String()] = MustNew(k, Options{})
		ps[k.String()+"/replace"] = MustNew(k, Options{WithReplacement: true})
		ps[k.String()+"/draws3"] = MustNew(k, Options{Draws: 3})
	}
	return ps
}

func TestNoAllocs(t *testing.T) {
	loads := eq(1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 1, 1, 1, 1, 1, 100)
	for i := range loads {
		loads[i].Active = int64(i * 7 % 5)
		loads[i].EWMA.Observe(int64(1000 + i))
	}
	r := NewRand(1)
	for name, p := range allPickers() {
		if n := testing.AllocsPerRun(1000, func() { p.Pick(loads, &r) }); n != 0 {
			t.Errorf("%s: %v allocations per Pick", name, n)
		}
	}
}

// FuzzPick builds loads from the input and checks that every picker
// returns an eligible position, or -1 exactly when none is eligible.
func FuzzPick(f *testing.F) {
	f.Add([]byte{0, 0, 0}, uint64(1), uint8(2))
	f.Add([]byte{1, 0, 255, 3, 9, 0, 0, 7}, uint64(7), uint8(0))
	f.Add([]byte{200, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, uint64(3), uint8(16))
	f.Fuzz(func(t *testing.T, b []byte, seed uint64, draws uint8) {
		var loads []Load
		eligible := false
		for i := 0; i+1 < len(b) && len(loads) < 64; i += 2 {
			w := uint32(b[i] % 5)
			if b[i] > 250 {
				w = math.MaxUint32 - uint32(b[i+1])
			}
			l := Load{Weight: w, Active: int64(b[i+1]) - 20}
			if b[i+1]%3 != 0 {
				l.EWMA.Observe(int64(b[i+1]) * 997)
			}
			if b[i+1] == 255 {
				l.Active = math.MaxInt64
			}
			eligible = eligible || w > 0
			loads = append(loads, l)
		}
		r := NewRand(seed)
		d := int(draws%MaxDraws) + 1
		for _, k := range Kinds()[1:] {
			for _, o := range []Options{{Draws: d}, {Draws: d, WithReplacement: true}} {
				p := MustNew(k, o)
				for range 3 {
					i := p.Pick(loads, &r)
					switch {
					case !eligible && i != -1:
						t.Fatalf("%v %+v: picked %d with nothing eligible", k, o, i)
					case eligible && (i < 0 || i >= len(loads) || loads[i].Weight == 0):
						t.Fatalf("%v %+v: picked %d of %d (loads %+v)", k, o, i, len(loads), loads)
					}
				}
			}
		}
	})
}

func BenchmarkPick(b *testing.B) {
	for _, n := range []int{16, 1000} {
		loads := make([]Load, n)
		for i := range loads {
			loads[i] = Load{Weight: uint32(1 + i%3), Active: int64(i % 17)}
			loads[i].EWMA.Observe(int64(500 + i%100))
		}
		for _, k := range Kinds()[1:] {
			b.Run(fmt.Sprintf("%v/%d", k, n), func(b *testing.B) {
				p, r := MustNew(k, Options{}), NewRand(1)
				b.ReportAllocs()
				for b.Loop() {
					p.Pick(loads, &r)
				}
			})
		}
	}
}

// Kind reads and writes its configuration name as text, which is how
// package config decodes vip.scheduler and prints it back.
func TestKindText(t *testing.T) {
	for _, k := range Kinds() {
		b, _ := k.MarshalText()
		var got Kind
		if err := got.UnmarshalText(b); err != nil || got != k || string(b) != k.String() {
			t.Errorf("%v: text %q read back as %v, %v", k, b, got, err)
		}
	}
	var k Kind
	if err := k.UnmarshalText([]byte("wrr")); !errors.Is(err, ErrUnknownKind) {
		t.Errorf("wrr: %v", err)
	}
}
