package control

// The operator's state changes on backends combined with reloads, health
// flaps and panic mode.

import (
	"testing"
	"time"
)

// Panic mode uses be2..be5 (down) at full weight. be3 and be4 recover, the
// VIP leaves panic mode, and be2 stays down, out of the table (weight 0),
// for an hour. When be2 then passes its checks it has served nothing for
// an hour: it must slow-start as any backend that comes back up does
// (README: "a backend that ... comes back up ... ramps"). The exception
// ("nor does one panic mode was using at full weight while its checks
// failed") is for a backend panic mode was using when it came up.
func TestPanicOverThenLongDownBackendRamps(t *testing.T) {
	f := newFixture(t, checkedWeb(5, "30s"))
	f.allUp()
	f.rebuild()
	for _, n := range []string{"be2", "be3", "be4", "be5"} {
		f.setHealthOf("web", n, false)
	}
	if !f.plane.Panicked()["web"] {
		t.Fatal("not in panic mode with 1 of 5 up")
	}
	f.advance(time.Second)
	f.setHealthOf("web", "be3", true)
	f.setHealthOf("web", "be4", true)
	if f.plane.Panicked()["web"] {
		t.Fatal("still in panic mode with 3 of 5 up")
	}
	if w := pubBackend(t, f.shared, "web", "be2").Weight; w != 0 {
		t.Fatalf("be2 down, panic over: weight %d, want 0", w)
	}
	f.advance(time.Hour)
	f.rebuild()
	f.setHealthOf("web", "be2", true)
	if w := pubBackend(t, f.shared, "web", "be2").Weight; w >= WeightScale {
		t.Errorf("be2 out of the table for an hour (down, panic mode over) comes back up at weight %d at once; want the slow start's %d",
			w, WeightScale/10)
	}
	if b := f.backend("be2"); !b.SlowStart {
		t.Errorf("be2 just back after an hour out: API slow_start %v", b.SlowStart)
	}
}

// The same for a passive ejection: be2 is ejected (for an hour), panic mode
// uses it while be3..be5 fail, panic mode ends, and be2 stays out of the
// table until its ejection ends an hour later. It then slow-starts
// (README, Passive health checks: "it stops new flows"; a backend back
// from an ejection ramps), as one never used by panic mode does.
func TestPanicOverThenEjectionEndRamps(t *testing.T) {
	f := newFixture(t, checkedWeb(5, "30s"))
	f.allUp()
	f.rebuild()
	st := f.ejectFor("be2", time.Hour)
	for _, n := range []string{"be3", "be4", "be5"} {
		f.setHealthOf("web", n, false)
	}
	if !f.plane.Panicked()["web"] {
		t.Fatal("not in panic mode with 1 of 5 healthy")
	}
	f.setHealthOf("web", "be3", true)
	f.setHealthOf("web", "be4", true)
	if f.plane.Panicked()["web"] {
		t.Fatal("still in panic mode with 3 of 5 healthy")
	}
	if w := pubBackend(t, f.shared, "web", "be2").Weight; w != 0 {
		t.Fatalf("be2 ejected, panic over: weight %d, want 0", w)
	}
	f.advance(time.Hour + time.Second)
	f.endEjectionNow(st)
	if w := pubBackend(t, f.shared, "web", "be2").Weight; w >= WeightScale {
		t.Errorf("be2 out of the table for an hour (ejected, panic mode over) back at weight %d at once; want the slow start's %d", w, WeightScale/10)
	}
}
