package control

import (
	"testing"
	"time"
)

// foldAfter is simCounters.period for a fold that comes d after the last
// one (the signals loop was late: its ticker drops ticks while the fold
// waits, e.g. for the plane's lock held by a long reload, or a worker did
// not answer and the fold was skipped): the counts of the whole gap land
// in one period.
func (s *simCounters) foldAfter(d time.Duration, syns, est map[string]uint64) bool {
	s.f.advance(d - time.Second)
	return s.period(syns, est)
}

func all4(n uint64) map[string]uint64 {
	return map[string]uint64{"be1": n, "be2": n, "be3": n, "be4": n}
}

// Rule 4 of the passive model: a backend is ejected only when it has been
// an outlier at every judgement for a whole window (two windows that share
// no period). One bad second is not that: with a fold every second it
// leaves the window before the rule is met. The same second followed by a
// late fold (the ticker dropped ticks) must not eject either: the late
// fold's window still holds the bad second, and the rule is timed by the
// clock, not by judgements.
func TestOneBadSecondThenLateFoldKeepsBackend(t *testing.T) {
	bad := func() (map[string]uint64, map[string]uint64) {
		return all4(30), map[string]uint64{"be1": 30, "be2": 0, "be3": 30, "be4": 30}
	}
	for _, gap := range []bool{false, true} {
		f := newFixture(t, passiveConfig)
		sim := newSim(f)
		for i := 0; i < 6; i++ { // quiet: nothing to judge
			sim.period(nil, nil)
		}
		sim.period(bad())              // be2 refuses for one second (the newest period: not judged yet)
		sim.period(all4(30), all4(30)) // fine again; the bad second is judged: an outlier
		if gap {
			sim.foldAfter(5*time.Second, all4(150), all4(150)) // five fine seconds, one late fold
		} else {
			for i := 0; i < 5; i++ {
				sim.period(all4(30), all4(30))
			}
		}
		if st := f.backend("be2"); st.Outlier || st.Ejections != 0 || st.Slots == 0 {
			t.Errorf("late fold %v: be2, which refused handshakes for one second only, was ejected: %+v", gap, st)
		}
	}
}
