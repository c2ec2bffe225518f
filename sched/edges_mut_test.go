package sched

import (
	"errors"
	"math"
	"testing"
	"time"
)

// Edge cases that no other test of the package pinned down: a mutation
// audit changed each line they guard (a comparison, a condition, a
// constant) and every other test still passed.

// The largest penalty New documents (MaxSample µs) is accepted.
func TestPenaltyUpperBoundAccepted(t *testing.T) {
	if _, err := New(PeakEWMA, Options{Penalty: MaxSample * time.Microsecond}); err != nil {
		t.Fatalf("New(peak-ewma, penalty = MaxSample µs): %v, want accepted", err)
	}
}

// A kind just past the last is unknown, not "not a picker".
func TestNewFirstUnknownKind(t *testing.T) {
	if _, err := New(numKinds, Options{}); !errors.Is(err, ErrUnknownKind) {
		t.Fatalf("New(Kind(%d)): %v, want ErrUnknownKind", numKinds, err)
	}
}

// WithReplacement draws independently even when draws >= eligible
// backends: with 2 equal backends and 2 draws, the loaded one is chosen
// whenever both draws land on it (1 choice in 4). Skipping the draws and
// comparing both (as without replacement) hides exactly what the option
// is there to show.
func TestWithReplacementDrawsEvenWhenDrawsCoverAll(t *testing.T) {
	for _, k := range []Kind{P2C, PeakEWMA} {
		p := MustNew(k, Options{WithReplacement: true})
		loads := []Load{{Weight: 1, Active: 0}, {Weight: 1, Active: 1000}}
		rng := NewRand(1)
		loaded := 0
		const n = 4000
		for range n {
			if p.Pick(loads, &rng) == 1 {
				loaded++
			}
		}
		// Exactly Binomial(4000, 1/4): 1000 expected, 0 impossible.
		if loaded < n/8 || loaded > 3*n/8 {
			t.Errorf("%v with replacement: loaded backend chosen %d of %d times, want about %d", k, loaded, n, n/4)
		}
	}
}

// The second, distinct draw of p2c excludes the first draw's weight from
// the exact fallback walk: with one heavy backend (drawn first almost
// always, and then rejected 32 times) the second candidate is uniform
// among the light ones, not always the last position.
func TestDistinctDrawFallbackUniform(t *testing.T) {
	p := MustNew(P2C, Options{})
	loads := []Load{{Weight: 1 << 30, Active: MaxActive}, {Weight: 1}, {Weight: 1}, {Weight: 1}}
	rng := NewRand(7)
	var got [4]int
	for range 3000 {
		got[p.Pick(loads, &rng)]++
	}
	for i := 1; i < 4; i++ {
		if got[i] < 500 {
			t.Errorf("light backend %d chosen %d of 3000 times, want about 1000 (counts %v)", i, got[i], got)
		}
	}
}

// compare in 128 bits: a product whose high word is larger wins even when
// its low word is smaller.
func TestCompareHighWordDecides(t *testing.T) {
	// a/wa = 2^63 against b/wb = 3/4: a*wb = 2^65 (high 2, low 0), b*wa = 3.
	if got := compare(1<<63, 1, 3, 4); got != 1 {
		t.Fatalf("compare(2^63/1, 3/4) = %d, want 1", got)
	}
	if got := compare(3, 4, 1<<63, 1); got != -1 {
		t.Fatalf("compare(3/4, 2^63/1) = %d, want -1", got)
	}
	// At the pickers: peak-ewma with a slow heavy backend and a fast light one.
	p := MustNew(PeakEWMA, Options{Draws: 2})
	var slow, fast EWMA
	slow.ObservePeak(MaxSample)
	fast.ObservePeak(1)
	loads := []Load{{Weight: 4, Active: MaxActive, EWMA: slow}, {Weight: 1, Active: 2, EWMA: fast}}
	rng := NewRand(3)
	for range 100 {
		if i := p.Pick(loads, &rng); i != 1 {
			t.Fatalf("peak-ewma chose the backend of cost ~2^64/4 over one of cost 3: %d", i)
		}
	}
	_ = uint64(math.MaxUint64)
}

// Round robin starts over when the number of backends changes, down as
// well as up (the package doc): the sequence after a shrink is a fresh
// picker's.
func TestRoundRobinStartsOverOnShrink(t *testing.T) {
	p := MustNew(RoundRobin, Options{})
	three := []Load{{Weight: 1}, {Weight: 1}, {Weight: 1}}
	two := []Load{{Weight: 1}, {Weight: 1}}
	if got := p.Pick(three, nil); got != 0 {
		t.Fatalf("first pick %d, want 0", got)
	}
	fresh := MustNew(RoundRobin, Options{})
	for i := range 4 {
		if got, want := p.Pick(two, nil), fresh.Pick(two, nil); got != want {
			t.Fatalf("pick %d after shrinking 3 -> 2: %d, a fresh picker's is %d", i, got, want)
		}
	}
}

// ObservePeak: any sample above the average replaces it, even by 1 µs.
func TestObservePeakOneAbove(t *testing.T) {
	var e EWMA
	e.ObservePeak(1000)
	e.ObservePeak(1001)
	if us, _ := e.Micros(); us != 1001 {
		t.Fatalf("ObservePeak(1000, 1001) = %d µs, want 1001", us)
	}
}

// ObservePeak decays a faster sample with the exercise's truncating
// arithmetic: (3*2 + 7*100)/10 = 70.6 -> 70.
func TestObservePeakDecayTruncates(t *testing.T) {
	var e EWMA
	e.ObservePeak(100)
	e.ObservePeak(2)
	if us, _ := e.Micros(); us != 70 {
		t.Fatalf("ObservePeak(100, 2) = %d µs, want 70", us)
	}
}
