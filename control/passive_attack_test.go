package control

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// passiveBackoffConfig: passiveConfig with flap_backoff_max 20 s, so that
// "well behaved for long" (10 × flap_backoff_max) is 200 s of folds.
var passiveBackoffConfig = strings.Replace(baseConfig, "[[vip]]",
	"[health]\npassive_window = \"4s\"\npassive_min = 20\nflap_backoff = \"10s\"\nflap_backoff_max = \"20s\"\n\n[[vip]]", 1)

var (
	allGood   = map[string]uint64{"be1": 15, "be2": 15, "be3": 15, "be4": 15}
	be2Refuse = map[string]uint64{"be1": 15, "be2": 0, "be3": 15, "be4": 15}
)

// ejectBe2 folds periods in which be2 refuses every handshake until it is
// ejected, and returns how many folds that took.
func ejectBe2(t *testing.T, f *fixture, sim *simCounters) int {
	t.Helper()
	for n := 1; n <= 20; n++ {
		sim.period(allGood, be2Refuse)
		if f.backend("be2").Outlier {
			return n
		}
	}
	t.Fatal("be2 refusing every handshake was not ejected in 20 s")
	return 0
}

// healthyUntilBack folds healthy periods until be2 is no longer an
// outlier and returns how many that took (its ejection's length in s).
func healthyUntilBack(t *testing.T, f *fixture, sim *simCounters) int {
	t.Helper()
	for n := 1; n <= 100; n++ {
		sim.period(allGood, allGood)
		if !f.backend("be2").Outlier {
			return n
		}
	}
	t.Fatal("be2 still ejected after 100 s")
	return 0
}

// A backend that was ejected once, then served its share of traffic
// flawlessly for longer than "well behaved for long" (10 ×
// flap_backoff_max), has its past ejections forgotten: the next one lasts
// flap_backoff again, not double. Before the fix only a backend with too
// little traffic to judge (fewer than passive_min handshakes) ever forgot,
// so the busy backends, the ones passive checks watch, kept a doubled
// backoff for ever.
func TestPassiveBackoffForgottenByBusyWellBehavedBackend(t *testing.T) {
	f := newFixture(t, passiveBackoffConfig)
	sim := newSim(f)
	ejectBe2(t, f, sim)
	if n := healthyUntilBack(t, f, sim); n != 10 {
		t.Fatalf("first ejection lasted %d s, want flap_backoff (10 s)", n)
	}
	// 10 × flap_backoff_max (200 s) and more of healthy, judged traffic.
	for range 210 {
		sim.period(allGood, allGood)
	}
	if _, n := ejections(f); n != 1 {
		t.Fatalf("%d ejections during healthy traffic, want 1 (the first)", n)
	}
	ejectBe2(t, f, sim)
	if _, n := ejections(f); n != 2 {
		t.Fatalf("%d ejections, want 2", n)
	}
	if n := healthyUntilBack(t, f, sim); n != 10 {
		t.Fatalf("second ejection, after 210 s of flawless traffic, lasted %d s, want flap_backoff (10 s): the past ejection was not forgotten", n)
	}
}

// The control: a backend that fails again soon after its ejection ended is
// ejected for twice as long (the doubling the forgetting must not undo).
func TestPassiveBackoffDoublesWhenFailingAgainSoon(t *testing.T) {
	f := newFixture(t, passiveBackoffConfig)
	sim := newSim(f)
	ejectBe2(t, f, sim)
	if n := healthyUntilBack(t, f, sim); n != 10 {
		t.Fatalf("first ejection lasted %d s, want 10", n)
	}
	ejectBe2(t, f, sim)
	if n := healthyUntilBack(t, f, sim); n != 20 {
		t.Fatalf("second ejection right after the first lasted %d s, want 20 (doubled)", n)
	}
}

// A reload that lowers flap_backoff_max cuts a passive ejection already
// running, so that it ends the new maximum after it began, as it does for
// the active checks' flap ejections: "up to flap_backoff_max" holds for the
// running ejection too, and an operator lowering it to get a backend back
// does not wait out the old one (here 30 minutes).
func TestPassiveEjectionCutByLoweredBackoffMax(t *testing.T) {
	long := strings.Replace(baseConfig, "[[vip]]",
		"[health]\npassive_window = \"4s\"\npassive_min = 20\nflap_backoff = \"30m\"\nflap_backoff_max = \"1h\"\n\n[[vip]]", 1)
	short := strings.Replace(long, "flap_backoff = \"30m\"\nflap_backoff_max = \"1h\"", "flap_backoff = \"10s\"\nflap_backoff_max = \"20s\"", 1)
	f := newFixture(t, long)
	sim := newSim(f)
	ejectBe2(t, f, sim)
	path := filepath.Join(t.TempDir(), "short.toml")
	if err := os.WriteFile(path, []byte(short), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.plane.Reload(path); err != nil {
		t.Fatal(err)
	}
	if !f.backend("be2").Outlier {
		t.Fatal("the reload ended the ejection at once; want it cut to 20 s from its start")
	}
	if n := healthyUntilBack(t, f, sim); n != 20 {
		t.Fatalf("ejection lasted %d s after the reload, want 20 (the new flap_backoff_max from its start)", n)
	}
}

// An outlier must have been one at every judgement for a whole window
// (rule 4, the defence against chance ejections). While passive checks are
// off nothing is judged; a backend that looked bad for a second before they
// were turned off was still "suspect since" then when they were turned back
// on, and the first bad judgement after that ejected it at once, without
// the window of evidence. Now it needs a whole window after passive checks
// are back, as a backend seen for the first time does.
func TestPassiveReenabledNeedsWholeWindow(t *testing.T) {
	on := strings.Replace(baseConfig, "[[vip]]",
		"[health]\npassive_window = \"4s\"\npassive_min = 20\nflap_backoff = \"10s\"\n\n[[vip]]", 1)
	off := strings.Replace(on, "passive_min = 20\n", "passive_min = 20\npassive = \"off\"\n", 1)
	dir := t.TempDir()
	onPath, offPath := filepath.Join(dir, "on.toml"), filepath.Join(dir, "off.toml")
	if err := os.WriteFile(onPath, []byte(on), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(offPath, []byte(off), 0o644); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, on)
	sim := newSim(f)
	// Two folds of evidence (passive_min 20 at 15 a second), then one in
	// which be2 is judged an outlier: suspect, far from a whole window.
	for range 3 {
		sim.period(allGood, be2Refuse)
	}
	if f.backend("be2").Outlier {
		t.Fatal("be2 ejected after one bad judgement")
	}
	if err := f.plane.Reload(offPath); err != nil {
		t.Fatal(err)
	}
	// A minute with passive checks off, nothing judged: healthy traffic,
	// then be2 refuses again for the last 4 s.
	for range 56 {
		sim.period(allGood, allGood)
	}
	for range 4 {
		sim.period(allGood, be2Refuse)
	}
	if err := f.plane.Reload(onPath); err != nil {
		t.Fatal(err)
	}
	// Its window is bad at the first judgement; it must stay bad at every
	// judgement for a whole window (4 s) before be2 may be ejected.
	for n := 1; n < 4; n++ {
		sim.period(allGood, be2Refuse)
		if f.backend("be2").Outlier {
			t.Fatalf("be2 ejected at the judgement %d s after passive checks came back, before a whole window of bad judgements (suspect since before they were off)", n)
		}
	}
	for range 2 {
		sim.period(allGood, be2Refuse)
	}
	if !f.backend("be2").Outlier {
		t.Fatal("be2 judged an outlier for 5 s after passive checks came back was not ejected")
	}
}

// Panic mode uses the backends the active checks call down. One of them
// refusing handshakes was ejected on passive evidence: that changed
// nothing in panic (ejected backends are used alike) but took the VIP's
// one-in-ten slot, so once the others came back a healthy backend that
// refused as well could not be ejected.
func TestPassiveLeavesDownBackendsToActiveChecks(t *testing.T) {
	conf := strings.Replace(checkedWeb(10, "0s"), `kind = "tcp"`, "kind = \"tcp\"\npassive_window = \"4s\"\npassive_min = 20\nflap_backoff = \"60s\"", 1)
	f := newFixture(t, conf)
	f.allUp()
	for _, n := range []string{"be5", "be6", "be7", "be8", "be9", "be10"} {
		f.setHealthOf("web", n, false)
	}
	if !f.plane.Panicked()["web"] {
		t.Fatal("4 of 10 up: not in panic")
	}
	sim := newSim(f)
	all := func(est map[string]uint64) (syns, done map[string]uint64) {
		syns, done = map[string]uint64{}, map[string]uint64{}
		for i := 1; i <= 10; i++ {
			n := fmt.Sprintf("be%d", i)
			syns[n], done[n] = 15, 15
			if v, ok := est[n]; ok {
				done[n] = v
			}
		}
		return syns, done
	}
	for round := 0; round < 8; round++ { // be5 (down, used by panic) refuses
		sim.period(all(map[string]uint64{"be5": 0}))
	}
	if st := f.backend("be5"); st.Outlier {
		t.Errorf("be5, down and used by panic mode, was ejected on passive evidence: %+v", st)
	}
	for _, n := range []string{"be5", "be6", "be7", "be8", "be9", "be10"} {
		f.setHealthOf("web", n, true)
	}
	if f.plane.Panicked()["web"] {
		t.Fatal("10 of 10 up: still in panic")
	}
	for round := 0; round < 8; round++ { // now be1, healthy, refuses
		sim.period(all(map[string]uint64{"be1": 0}))
	}
	if st := f.backend("be1"); !st.Outlier {
		t.Errorf("be1 refused every handshake for 8 s with every peer fine and was not ejected: %+v", st)
	}
}
