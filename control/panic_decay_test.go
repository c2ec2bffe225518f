package control

// A backend panic mode used while down, back up just after panic mode
// ended: the two instances of a fleet that saw the same blip must build the
// same table, whichever order their own checks' verdicts came in.

import (
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/dataplane"
)

// upWeb is a "web" VIP of 5 checked backends, all up, slow_start 30 s.
func upWeb(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t, checkedWeb(5, "30s"))
	f.allUp()
	return f
}

// intoPanic gives web's backends names the verdict down, and fails the
// test unless web is in panic mode then.
func (f *fixture) intoPanic(names ...string) {
	f.t.Helper()
	for _, n := range names {
		f.setHealthOf("web", n, false)
	}
	if !f.plane.Panicked()["web"] {
		f.t.Fatalf("not in panic mode with %v down", names)
	}
}

// outOfPanic gives web's backends names the verdict up, and fails the
// test if web is still in panic mode then.
func (f *fixture) outOfPanic(names ...string) {
	f.t.Helper()
	for _, n := range names {
		f.setHealthOf("web", n, true)
	}
	if f.plane.Panicked()["web"] {
		f.t.Fatalf("still in panic mode with %v up", names)
	}
}

// sameNewFlows fails the test if instances a and b send any of probeFlows
// new flows of web to different backends.
func sameNewFlows(t *testing.T, a, b *fixture, when string) {
	t.Helper()
	if d := compareChoices(t, fixtureKey(t, a), a.shared.Services.Load(), b.shared.Services.Load()); d["web"] != 0 {
		t.Errorf("%d of %d new flows go to different backends on the two instances %s", d["web"], probeFlows, when)
	}
}

// ejectFor ejects web's backend name for d from now, as a passive
// ejection does (eject), rebuilds, and returns its state.
func (f *fixture) ejectFor(name string, d time.Duration) *backendState {
	f.t.Helper()
	f.plane.mu.Lock()
	st := f.plane.backends[dataplane.BackendRef{VIP: "web", Backend: name}]
	st.passive.backoff = d
	st.passive.until = f.plane.now().Add(d)
	if st.health != HealthDown {
		st.outSince = f.plane.now()
	}
	f.plane.mu.Unlock()
	f.rebuild()
	return st
}

// endEjectionNow ends st's ejection at the clock's time and rebuilds; it
// fails the test if the ejection does not end.
func (f *fixture) endEjectionNow(st *backendState) {
	f.t.Helper()
	f.plane.mu.Lock()
	ended := f.plane.endEjection(st, f.plane.now())
	f.plane.mu.Unlock()
	if !ended {
		f.t.Fatalf("%s's ejection did not end", st.name)
	}
	f.rebuild()
}

// panicBlip runs one instance through a blip: be2..be5 go down (panic mode,
// 1 of 5 healthy, uses them at full weight), one second later be3 and be4
// come back (panic mode over) and be2 comes back at be2After from then,
// negative for before. The fixture is left at be2's verdict, rebuilt.
func panicBlip(t *testing.T, slowStart string, be2After time.Duration) *fixture {
	t.Helper()
	f := newFixture(t, checkedWeb(5, slowStart))
	f.allUp()
	f.intoPanic("be2", "be3", "be4", "be5")
	f.advance(time.Second)
	if be2After < 0 {
		f.setHealthOf("web", "be2", true)
		f.advance(-be2After)
	}
	f.outOfPanic("be3", "be4")
	if be2After >= 0 {
		if w := pubBackend(t, f.shared, "web", "be2").Weight; w != 0 {
			t.Fatalf("be2 down after panic mode: weight %d, want 0", w)
		}
		f.advance(be2After)
		f.setHealthOf("web", "be2", true)
	}
	return f
}

// The blip of the fleet lab: on instance A be2's check passed 13 ms before
// be3's and be4's (panic mode still on: no slow start); on instance B 44 ms
// after (panic mode over). B cut be2 to slow_start_min (10%) and ramped it
// for the whole 30 s, so the two tables differed for 30 s and a flow ECMP
// moved between them could reach another backend. B now brings be2 back
// where it stood less 44 ms of the ramp: the same weight as A's, and the
// same table.
func TestPanicEndedJustBeforeSameTable(t *testing.T) {
	a := panicBlip(t, "30s", -13*time.Millisecond)
	b := panicBlip(t, "30s", 44*time.Millisecond)
	wa, wb := pubBackend(t, a.shared, "web", "be2").Weight, pubBackend(t, b.shared, "web", "be2").Weight
	if wa != WeightScale || wb != wa {
		t.Errorf("be2 back 13 ms before panic mode ended: weight %d; 44 ms after: %d (want both %d)", wa, wb, WeightScale)
	}
	sameNewFlows(t, a, b, "")
}

// The decay's arithmetic, and its end: be2, used by panic mode at full
// weight, stays down for part of slow_start (30 s) after panic mode ends,
// and comes back at 1 - gap/slow_start of its weight (never below
// slow_start_min), then ramps on at slow start's rate. Down for slow_start
// or longer, it ramps from slow_start_min as any backend back up does.
func TestPanicEndedRampPosition(t *testing.T) {
	for _, c := range []struct {
		gap        time.Duration
		want, next int // weight when back; 6 s later
	}{
		{7500 * time.Millisecond, 75, 95},
		{15 * time.Second, 50, 70},
		{27 * time.Second, 10, 30},
		{30 * time.Second, 10, 20},
		{time.Hour, 10, 20},
	} {
		f := panicBlip(t, "30s", c.gap)
		got := pubBackend(t, f.shared, "web", "be2").Weight
		f.advance(6 * time.Second)
		f.rebuild()
		next := pubBackend(t, f.shared, "web", "be2").Weight
		if got != c.want || next != c.next {
			t.Errorf("be2 back %v after panic mode ended: weight %d, 6 s later %d; want %d, %d", c.gap, got, next, c.want, c.next)
		}
		if !f.backend("be2").SlowStart {
			t.Errorf("be2 back %v after panic mode ended: API slow_start false", c.gap)
		}
	}
}

// Panic mode gives every backend its full weight, a ramping one included,
// while its ramp goes on by the clock: be2, back up 5 s into a 30 s slow
// start (17%), is at full weight while panic mode lasts and, 6 s into its
// ramp when panic mode ends, at 20% after it, where an instance that never
// entered panic mode has it (TestPanicOnOneInstanceKeepsRampInStep).
func TestPanicSuspendsRamps(t *testing.T) {
	f := upWeb(t)
	f.setHealthOf("web", "be2", false)
	f.advance(time.Second)
	f.setHealthOf("web", "be2", true)
	f.advance(5 * time.Second)
	f.rebuild()
	if w := pubBackend(t, f.shared, "web", "be2").Weight; w != 17 {
		t.Fatalf("be2 5 s into a 30 s slow start: weight %d, want 17", w)
	}
	f.intoPanic("be3", "be4", "be5")
	during, dead := pubBackend(t, f.shared, "web", "be2").Weight, pubBackend(t, f.shared, "web", "be3").Weight
	f.advance(time.Second)
	f.outOfPanic("be3")
	after := pubBackend(t, f.shared, "web", "be2").Weight
	if during != WeightScale || after != 20 {
		t.Errorf("be2 ramping when panic mode began: weight %d in panic mode (be3, down, %d), %d after; want %d, 20", during, dead, after, WeightScale)
	}
}

// The same for a passive ejection: be2 is ejected until 3 s after panic
// mode (which used it) ends. Its ejection's end brings it back at 90% of
// its weight (3 s of a 30 s slow start lost), not at slow_start_min.
func TestPanicEndedEjectionEndDecays(t *testing.T) {
	f := upWeb(t)
	st := f.ejectFor("be2", 10*time.Second)
	f.intoPanic("be3", "be4", "be5")
	f.advance(7 * time.Second)
	f.outOfPanic("be3", "be4")
	f.advance(3 * time.Second)
	f.endEjectionNow(st)
	if w := pubBackend(t, f.shared, "web", "be2").Weight; w != 90 {
		t.Errorf("be2's ejection over 3 s after panic mode (which used it) ended: weight %d, want 90", w)
	}
}
