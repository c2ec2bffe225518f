package control

import (
	"strings"
	"testing"
)

// checkedConfig is baseConfig with active TCP checks and the VIP's on_down.
func checkedConfig(onDown string) string {
	toml := strings.Replace(baseConfig, "[[vip]]", "[health]\nkind = \"tcp\"\n\n[[vip]]", 1)
	if onDown != "" {
		toml = strings.Replace(toml, "port = 80\n", "port = 80\non_down = \""+onDown+"\"\n", 1)
	}
	return toml
}

func (f *fixture) rebuild() {
	f.t.Helper()
	f.plane.mu.Lock()
	defer f.plane.mu.Unlock()
	if err := f.plane.rebuildLocked(); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) setHealth(name string, up bool) {
	f.t.Helper()
	if err := f.plane.SetHealth("web", name, up, "test"); err != nil {
		f.t.Fatal(err)
	}
	f.rebuild()
}

// published is the dataplane's view of a backend (what the workers obey).
func (f *fixture) published(name string) (weight int, down bool) {
	svc := f.shared.Services.Load()
	for _, b := range svc.Backends {
		if b != nil && b.Name == name {
			return b.Weight, b.Down
		}
	}
	f.t.Fatalf("no backend %s published", name)
	return 0, false
}

// on_down: "keep" (the default) stops new flows to a down backend but
// leaves its tracked flows; "move" moves them (finding 2).
func TestOnDownKeepAndMove(t *testing.T) {
	for _, tc := range []struct {
		onDown   string
		wantDown bool
	}{
		{"", false}, // the default is keep
		{"keep", false},
		{"move", true},
	} {
		t.Run("on_down="+tc.onDown, func(t *testing.T) {
			f := newFixture(t, checkedConfig(tc.onDown))
			for _, b := range []string{"be1", "be2", "be3", "be4"} {
				f.setHealth(b, true)
			}
			be2 := f.addr("be2")
			var onBe2 []uint16
			for i := 0; i < 300; i++ {
				if f.lc.send(syn(t, uint16(20000+i), "S")).dst == be2 {
					onBe2 = append(onBe2, uint16(20000+i))
				}
			}
			if len(onBe2) == 0 {
				t.Fatal("no flow landed on be2")
			}
			f.setHealth("be2", false)
			w, down := f.published("be2")
			if w != 0 || down != tc.wantDown {
				t.Fatalf("be2 down: weight %d down %v, want 0 and %v", w, down, tc.wantDown)
			}
			stayed := 0
			for _, p := range onBe2 {
				if f.lc.send(syn(t, p, "A")).dst == be2 {
					stayed++
				}
			}
			if want := map[bool]int{false: len(onBe2), true: 0}[tc.wantDown]; stayed != want {
				t.Errorf("%d of %d tracked flows stayed on be2, want %d", stayed, len(onBe2), want)
			}
			// New flows avoid it either way.
			for i := 0; i < 200; i++ {
				if f.lc.send(syn(t, uint16(40000+i), "S")).dst == be2 {
					t.Fatal("a new flow went to the down backend")
				}
			}
		})
	}
}

// Leaving panic mode never moves a flow: backends that were down but used
// in panic get no new flows, and keep their tracked ones, even with move
// (finding 2).
func TestPanicExitNeverMovesFlows(t *testing.T) {
	f := newFixture(t, checkedConfig("move"))
	for _, b := range []string{"be1", "be2", "be3", "be4"} {
		f.setHealth(b, true)
	}
	for _, b := range []string{"be2", "be3", "be4"} {
		f.setHealth(b, false)
	}
	if !f.plane.Status(false).VIPs[0].Panic {
		t.Fatal("no panic mode at 1 of 4 healthy")
	}
	// Flows opened during panic land on the down backends too.
	first := map[uint16]string{}
	for i := 0; i < 300; i++ {
		first[uint16(50000+i)] = f.lc.send(syn(t, uint16(50000+i), "S")).dst.String()
	}
	f.setHealth("be3", true) // 2 of 4: panic is over
	if f.plane.Status(false).VIPs[0].Panic {
		t.Fatal("still in panic at 2 of 4 healthy")
	}
	for _, b := range []string{"be1", "be2", "be3", "be4"} {
		if _, down := f.published(b); down {
			t.Errorf("%s is down=true after panic mode ended", b)
		}
	}
	for _, b := range []string{"be2", "be4"} {
		if w, _ := f.published(b); w != 0 {
			t.Errorf("%s (down) takes new flows after panic: weight %d", b, w)
		}
	}
	moved := 0
	for p, d := range first {
		if f.lc.send(syn(t, p, "A")).dst.String() != d {
			moved++
		}
	}
	if moved != 0 {
		t.Errorf("%d of %d flows moved when panic mode ended", moved, len(first))
	}
}

// The lab's reload with a wrong health-check port: every backend goes down
// one by one, panic mode begins, then they recover one by one. With keep,
// no published state ever moves a flow (finding 5).
func TestWrongCheckPortSequenceNeverMoves(t *testing.T) {
	f := newFixture(t, checkedConfig("keep"))
	names := []string{"be1", "be2", "be3", "be4"}
	for _, b := range names {
		f.setHealth(b, true)
	}
	first := map[uint16]string{}
	for i := 0; i < 400; i++ {
		first[uint16(1000+i)] = f.lc.send(syn(t, uint16(1000+i), "S")).dst.String()
	}
	check := func(step string) {
		t.Helper()
		for _, b := range names {
			if _, down := f.published(b); down {
				t.Fatalf("%s: %s published down=true", step, b)
			}
		}
		for p, d := range first {
			if got := f.lc.send(syn(t, p, "A")).dst.String(); got != d {
				t.Fatalf("%s: flow %d moved from %s to %s", step, p, d, got)
			}
		}
	}
	sawPanic := false
	for _, b := range names {
		f.setHealth(b, false)
		sawPanic = sawPanic || f.plane.Status(false).VIPs[0].Panic
		check(b + " down")
	}
	if !sawPanic {
		t.Fatal("the sequence never reached panic mode")
	}
	for _, b := range names {
		f.setHealth(b, true)
		check(b + " up")
	}
	if v := f.plane.Status(false).VIPs[0]; v.Panic {
		t.Fatal("still in panic after recovery")
	}
	for _, b := range names {
		if w, _ := f.published(b); w == 0 {
			t.Errorf("%s takes no new flows after recovery", b)
		}
	}
}
