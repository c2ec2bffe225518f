package control

// The panic-mode ramp decay across ejections, renames, flaps and panic
// mode's start.

import (
	"testing"
	"time"
)

// be2 is down by its checks and passively ejected while panic mode uses
// it. Panic mode ends; 3 s later its checks pass (it is still ejected, out
// of the table); 6 s after panic mode ended its ejection ends. It was out
// of the table for 6 s of a 30 s slow start: back at 80%, as a backend
// only its checks kept out 6 s (the reference, be2 on instance R).
func TestPanicDecayUpWhileEjected(t *testing.T) {
	run := func(ejected bool) *fixture {
		f := upWeb(t)
		var st *backendState
		if ejected {
			st = f.ejectFor("be2", 7*time.Second)
		}
		f.intoPanic("be2", "be3", "be4", "be5")
		f.advance(time.Second)
		f.outOfPanic("be3", "be4")
		if !ejected {
			f.advance(6 * time.Second)
			f.setHealthOf("web", "be2", true)
			return f
		}
		f.advance(3 * time.Second)
		f.setHealthOf("web", "be2", true) // still ejected
		if w := pubBackend(t, f.shared, "web", "be2").Weight; w != 0 {
			t.Fatalf("be2 ejected: weight %d", w)
		}
		f.advance(3 * time.Second)
		f.endEjectionNow(st)
		return f
	}
	r, e := run(false), run(true)
	wr, we := pubBackend(t, r.shared, "web", "be2").Weight, pubBackend(t, e.shared, "web", "be2").Weight
	if wr != 80 || we != wr {
		t.Errorf("be2 out of the table 6 s after panic mode ended: checks only %d, checks passed at 3 s and ejection over at 6 s %d; want both 80", wr, we)
	}
}

// renamedWeb: checkedWeb(5, "30s")'s VIP (same address, port, backends)
// under the name name, with panic_threshold th.
func renamedWeb(name, th string) string {
	return reloadWeb(name, "30s", th, 1, 2, 3, 4, 5)
}

// Panic mode ended by a reload that lowers panic_threshold (1 of 5 healthy
// is no longer below it) and, in the same reload, renames the VIP (same
// address: carryRenamedVIPs keeps its backends' state). be2, used by panic
// mode while down, is back 1 s later: it must come back where the same
// reload without the rename brings it (1 - 1/30: 97), not at
// slow_start_min.
func TestPanicEndedByRenamingReload(t *testing.T) {
	run := func(name string) int {
		f := newFixture(t, renamedWeb("web", "0.5"))
		f.allUp()
		f.intoPanic("be2", "be3", "be4", "be5")
		f.advance(time.Second)
		f.apply(renamedWeb(name, "0.2"))
		if f.plane.Panicked()[name] {
			t.Fatal("still in panic mode after the reload")
		}
		f.advance(time.Second)
		f.setHealthOf(name, "be2", true)
		return pubBackend(t, f.shared, name, "be2").Weight
	}
	same, renamed := run("web"), run("www")
	if same != 97 || renamed != same {
		t.Errorf("be2 back 1 s after a reload ended panic mode: %d; after one that also renamed the VIP: %d; want both 97", same, renamed)
	}
}

// be2 was restarted and is ramping (up 3 s into a 30 s slow start) when a
// blip takes be3..be5 down for a second. Instance A's checks catch all
// three (panic mode, 2 of 5 healthy); instance B's checks, out of phase,
// catch none of them (the blip is shorter than B's fall). Both see the
// same backends up afterwards. Once A's panic mode is over, both must
// build the same table: A's ramp of be2 went on by the clock while panic
// mode gave it full weight. A panic mode that ended ramps for good gave
// be2 its full weight on A for the rest of the slow start while B ramped
// it (15,319 of 100,000 new flows to different backends).
func TestPanicOnOneInstanceKeepsRampInStep(t *testing.T) {
	run := func(blip bool) *fixture {
		f := upWeb(t)
		f.setHealthOf("web", "be2", false)
		f.advance(time.Second)
		f.setHealthOf("web", "be2", true) // ramping from now
		f.advance(3 * time.Second)
		f.rebuild()
		if blip {
			f.intoPanic("be3", "be4", "be5")
		}
		f.advance(time.Second)
		if blip {
			f.outOfPanic("be3", "be4", "be5")
		}
		f.advance(2 * time.Second)
		f.rebuild()
		return f
	}
	a, b := run(true), run(false)
	for _, n := range []string{"be1", "be2", "be3", "be4", "be5"} {
		wa, wb := pubBackend(t, a.shared, "web", n).Weight, pubBackend(t, b.shared, "web", n).Weight
		if wa != wb {
			t.Errorf("%s 2 s after A's panic mode ended: weight %d on A, %d on B", n, wa, wb)
		}
	}
	sameNewFlows(t, a, b, "2 s after A's panic mode ended (24 s of be2's slow start left)")
}

// A stale panicLeft: be2, used by panic mode while down, passes its checks
// 2 s after panic mode ended and fails again before the loop rebuilt (no
// snapshot ever had it up). It is back for good 10 s after panic mode
// ended. Either it lost its share for 10 s (67) or it came up and went down
// again, which ramps from slow_start_min (10); a second decay from the
// position the first comeBack left (53) is neither.
func TestPanicDecayFlapBeforeRebuild(t *testing.T) {
	f := upWeb(t)
	for _, n := range []string{"be2", "be3", "be4", "be5"} {
		f.setHealthOf("web", n, false)
	}
	f.advance(time.Second)
	f.setHealthOf("web", "be3", true)
	f.setHealthOf("web", "be4", true)
	f.advance(2 * time.Second)
	if err := f.plane.SetHealth("web", "be2", true, "flap"); err != nil {
		t.Fatal(err)
	}
	if err := f.plane.SetHealth("web", "be2", false, "flap"); err != nil {
		t.Fatal(err)
	}
	f.rebuild()
	f.advance(8 * time.Second)
	f.setHealthOf("web", "be2", true)
	if w := pubBackend(t, f.shared, "web", "be2").Weight; w != 67 && w != 10 {
		t.Errorf("be2 back 10 s after panic mode ended, after an unpublished flap at 2 s: weight %d, want 67 (decay) or 10 (ramp)", w)
	}
}

// deadBe2Web is upWeb with be2 down for the last hour (dead, its caches
// cold).
func deadBe2Web(t *testing.T) *fixture {
	t.Helper()
	f := upWeb(t)
	f.setHealthOf("web", "be2", false)
	f.advance(time.Hour)
	f.rebuild()
	return f
}

// be2 has been down for an hour (dead, its caches cold) on both instances.
// A blip only instance A's checks catch (be3 and be4 down for a second: 2
// of 5 healthy, panic mode) makes A's panic mode use be2 for that second.
// be2 comes back 5 s after A's panic mode ended. B never entered panic
// mode: be2 ramps from slow_start_min there. A must build the same table;
// and be2, out of the table for an hour, must not come back near its full
// weight (its pre-blip share was 0).
func TestPanicFlickerOnOneInstanceDeadBackend(t *testing.T) {
	run := func(blip bool) *fixture {
		f := deadBe2Web(t)
		if blip {
			f.intoPanic("be3", "be4")
			f.advance(time.Second)
			f.outOfPanic("be3", "be4")
		} else {
			f.advance(time.Second)
		}
		f.advance(5 * time.Second)
		f.setHealthOf("web", "be2", true)
		return f
	}
	a, b := run(true), run(false)
	wa, wb := pubBackend(t, a.shared, "web", "be2").Weight, pubBackend(t, b.shared, "web", "be2").Weight
	if wa != wb {
		t.Errorf("be2 down 1 h, back 5 s after a blip only A saw: weight %d on A, %d on B (want both %d)", wa, wb, wb)
	}
	sameNewFlows(t, a, b, "")
}

// A blip every instance saw: be2 was dead for an hour before it; be3..be5
// go down for a second (panic mode uses every backend), and be2's checks
// pass 2 s after panic mode ended. Its share before the blip was 0: it
// must ramp from slow_start_min, not come back at 93% of its weight.
func TestDeadBeforeBlipRampsAfterIt(t *testing.T) {
	f := deadBe2Web(t)
	f.intoPanic("be3", "be4", "be5")
	f.advance(time.Second)
	f.outOfPanic("be3", "be4", "be5")
	f.advance(2 * time.Second)
	f.setHealthOf("web", "be2", true)
	if w := pubBackend(t, f.shared, "web", "be2").Weight; w != 10 {
		t.Errorf("be2 dead 1 h before a 1 s blip, back 2 s after it: weight %d, want 10 (slow_start_min)", w)
	}
}

// The same blip only A's checks catch, but be2 (dead for an hour) comes
// back while A's panic mode lasts. Once A's panic mode is over (be3 and
// be4 back a second later) both instances must build the same table: B
// ramps be2 from slow_start_min; A kept its panic-mode full weight for
// good, for the whole slow start.
func TestDeadBackendBackDuringOneInstancePanic(t *testing.T) {
	run := func(blip bool) *fixture {
		f := deadBe2Web(t)
		if blip {
			f.intoPanic("be3", "be4")
		}
		f.advance(500 * time.Millisecond)
		f.setHealthOf("web", "be2", true)
		f.advance(500 * time.Millisecond)
		if blip {
			f.outOfPanic("be3", "be4")
		}
		f.advance(2 * time.Second)
		f.rebuild()
		return f
	}
	a, b := run(true), run(false)
	wa, wb := pubBackend(t, a.shared, "web", "be2").Weight, pubBackend(t, b.shared, "web", "be2").Weight
	if wa != wb {
		t.Errorf("be2 down 1 h, back during a blip only A saw: 2 s after it, weight %d on A, %d on B", wa, wb)
	}
	sameNewFlows(t, a, b, "")
}

// be2 dies; panic mode uses it for a second (be2..be5 down, then be3 and
// be4 back) and ends while be2 is still dead. Ten minutes later a second
// panic mode uses it again (be3 and be4 down once more), and be2 comes
// back, during that panic mode or just after it. Dead for ten minutes, it
// has no share left: it ramps from slow_start_min, as on a twin instance
// whose checks missed the first panic mode (be3 and be4 stayed up there).
// The first panic mode's mark stayed on be2 (panicUsed: it never came
// back), so the second one did not date when it began using be2 again:
// be2 came back at full weight (during panic mode) or at 97% (just
// after), the ten minutes forgotten, and the two instances' tables
// differed for the whole slow start.
func TestSecondPanicModeKeepsDeadTime(t *testing.T) {
	for _, during := range []bool{true, false} {
		run := func(first bool) *fixture {
			f := upWeb(t)
			if first {
				f.intoPanic("be2", "be3", "be4", "be5")
				f.advance(time.Second)
				f.outOfPanic("be3", "be4")
			} else {
				f.setHealthOf("web", "be2", false)
				f.setHealthOf("web", "be5", false)
				f.advance(time.Second)
			}
			f.advance(10 * time.Minute)
			f.intoPanic("be3", "be4")
			f.advance(time.Second)
			if during {
				f.setHealthOf("web", "be2", true)
				f.outOfPanic("be3", "be4")
			} else {
				f.outOfPanic("be3", "be4")
				f.advance(time.Second)
				f.setHealthOf("web", "be2", true)
			}
			return f
		}
		a, b := run(true), run(false)
		wa, wb := pubBackend(t, a.shared, "web", "be2").Weight, pubBackend(t, b.shared, "web", "be2").Weight
		if wa != 10 || wb != 10 {
			t.Errorf("be2 dead for 10 min, back %s the second panic mode: weight %d after two panic modes, %d after one; want 10 (slow_start_min)",
				map[bool]string{true: "during", false: "just after"}[during], wa, wb)
		}
		sameNewFlows(t, a, b, "after be2, dead for 10 min, came back")
	}
}

// A reload adds be6 (checked: down until its checks pass). Its first
// verdict, 25 s later, is down; then panic mode uses it (be2..be5 down,
// 1 of 6 healthy), and be6 passes its checks a second later, while panic
// mode lasts. It never served: once panic mode is over it ramps from
// slow_start_min, as on an instance whose checks missed the blip. Its
// first verdict, down like the state it was added in, did not date its
// outage, so panic mode credited it with the ramp's position since the
// reload (87%).
func TestAddedBackendNeverServedRampsAfterPanic(t *testing.T) {
	run := func(blip bool) *fixture {
		f := upWeb(t)
		f.apply(checkedWeb(6, "30s"))
		f.advance(25 * time.Second)
		f.setHealthOf("web", "be6", false)
		if blip {
			f.intoPanic("be2", "be3", "be4", "be5")
		}
		f.advance(time.Second)
		f.setHealthOf("web", "be6", true)
		if blip {
			f.outOfPanic("be2", "be3", "be4", "be5")
		}
		return f
	}
	a, b := run(true), run(false)
	wa, wb := pubBackend(t, a.shared, "web", "be6").Weight, pubBackend(t, b.shared, "web", "be6").Weight
	if wa != 10 || wb != 10 {
		t.Errorf("be6 added by a reload, never up until 26 s later: weight %d after a panic mode used it, %d without; want 10 (slow_start_min)", wa, wb)
	}
	sameNewFlows(t, a, b, "after be6 first came up")
}
