package control

// Session 41 audit (area: drain, slow start, weights and panic mode, several
// at once). Each test failed on the code it was written against.

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A drained backend whose checks fail is down as an undrained one is
// (README, "Drain, weights and slow start"): with on_down = "move" its
// flows leave at once. A backend that panic mode once used while it was
// down keeps a mark (panicUsed) that only the undrained, serving case of
// effective() clears. Drained, it kept the mark through a recovery: when
// it failed again long after panic mode ended, its tracked flows stayed on
// the dead server (for ever with the default drain_timeout 0), where the
// same backend undrained has them moved.
func TestDrainedRecoveredAfterPanicThenDownMoves(t *testing.T) {
	for _, drained := range []bool{false, true} {
		name := "undrained"
		if drained {
			name = "drained"
		}
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, drainProbeConfig("maglev", true, "move", "0s", "0s"))
			f.dpAllUp("be1", "be2", "be3", "be4")
			// be2, be3 and be4 fail: 1 of 4 healthy, panic mode uses them.
			f.setHealth("be2", false)
			f.setHealth("be3", false)
			f.setHealth("be4", false)
			if !f.plane.Panicked()["web"] {
				t.Fatal("not in panic mode with 1 of 4 up")
			}
			be2 := f.addr("be2")
			ports := openOn(t, f, 20000, be2, 20) // placed on be2 by panic mode
			// Panic mode ends; be2 stays down and keeps panic mode's flows.
			f.setHealth("be3", true)
			f.setHealth("be4", true)
			if f.plane.Panicked()["web"] {
				t.Fatal("still in panic mode with 3 of 4 up")
			}
			if drained {
				if err := f.plane.Drain("web", "be2"); err != nil {
					t.Fatal(err)
				}
			}
			// be2 recovers: its flows are healthy flows now.
			f.advance(time.Minute)
			f.setHealth("be2", true)
			for _, p := range ports {
				if d := f.lc.send(syn(t, p, "PA")).dst; d != be2 {
					t.Fatalf("flow from %d left be2 while it is up: %v", p, d)
				}
			}
			// Much later be2 dies: on_down = "move" moves its flows.
			f.advance(time.Hour)
			f.setHealth("be2", false)
			b := pubBackend(t, f.shared, "web", "be2")
			stayed := 0
			for _, p := range ports {
				if f.lc.send(syn(t, p, "PA")).dst == be2 {
					stayed++
				}
			}
			if stayed != 0 || !b.Down {
				t.Errorf("%s be2 down again an hour after panic mode ended and after it had recovered, on_down = move: published down %v, %d of %d tracked flows still forwarded to it; want down true and 0",
					name, b.Down, stayed, len(ports))
			}
		})
	}
}

// A backend panic mode uses at full weight while its checks fail skips
// slow start when it comes back while panic mode lasts (README, "Drain,
// weights and slow start"): ramped from slow_start_min it would get less
// than it had, and the survivors panic mode protects would take the rest.
// A reload that turns the VIP's checks off trusts such backends again, but
// syncBackends ramped every backend the checks called down, panic mode's
// included: with 3 of 4 down and used by panic mode, be1 went from a
// quarter of the new flows to 100/130 of the table at once.
func TestChecksOffInPanicKeepsPanicUsedWeight(t *testing.T) {
	f := newFixture(t, checkedWeb(4, "30s"))
	f.allUp()
	f.advance(time.Minute)
	for _, n := range []string{"be2", "be3", "be4"} {
		f.setHealthOf("web", n, false)
	}
	f.rebuild()
	if !f.plane.Panicked()["web"] {
		t.Fatal("not in panic mode with 1 of 4 up")
	}
	for _, n := range []string{"be2", "be3", "be4"} {
		if b := pubBackend(t, f.shared, "web", n); b.Weight != WeightScale {
			t.Fatalf("in panic mode %s is used at weight %d, want %d", n, b.Weight, WeightScale)
		}
	}
	f.advance(time.Minute)
	f.apply(strings.Replace(checkedWeb(4, "30s"), `kind = "tcp"`, `kind = "none"`, 1))
	var cut []string
	for _, n := range []string{"be2", "be3", "be4"} {
		if b := pubBackend(t, f.shared, "web", n); b.Weight < WeightScale {
			cut = append(cut, fmt.Sprintf("%s %d", n, b.Weight))
		}
	}
	if len(cut) > 0 {
		t.Errorf("panic mode used be2..be4 at full weight (%d); the reload that turned the checks off cut them to %v: be1 takes %d of %d slots",
			WeightScale, cut, f.backend("be1").Slots, f.shared.Services.Load().VIPs[0].Table.Size())
	}
}
