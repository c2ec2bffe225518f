package control

// A reload whose dry run builds but whose rebuild under the lock fails
// (control.Plane.build made to fail): the running configuration and every
// backend's state stay as they were, and the plane goes on as one that
// never saw the reload.

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/dataplane"
)

// reloadWeb is a checked VIP name on web's address with backends be<i>
// (at 10.0.1.<i>) for each i of ids, slow start slowStart and
// panic_threshold th.
func reloadWeb(name, slowStart, th string, ids ...int) string {
	b := configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).
		Section("conntrack", "capacity = 65536").
		Section("control", `slow_start = "`+slowStart+`"`, `drain_timeout = "0s"`, "panic_threshold = "+th).
		Section("health", `kind = "tcp"`).
		VIP(name, configtest.Web, 80)
	for _, i := range ids {
		b = b.Backend(fmt.Sprintf("be%d", i), fmt.Sprintf("10.0.1.%d", i))
	}
	return b.String()
}

// A running instance in every state a reload changes at once: web in
// panic mode (be3..be5 down, used by it), be1 ramping after an undrain
// with an operator's weight, be2 healthy. The reload renames web to www
// (its states move with the name), lowers panic_threshold (panic mode
// ends: panicOver), lengthens slow_start (ramps that ended stay ended)
// and removes be5 and adds be6. Its dry run builds; the rebuild under the
// lock fails. The reload must change nothing: the configuration in force,
// the published snapshot, each backend's state and panic mode stay as
// they were, and the next verdicts and the same reload applied later
// build the tables of a twin instance that never saw the failed reload.
func TestFailedReloadRestoresEveryState(t *testing.T) {
	setup := func() *fixture {
		f := newFixture(t, reloadWeb("web", "30s", "0.5", 1, 2, 3, 4, 5))
		f.allUp()
		if err := f.plane.SetWeight("web", "be1", 3); err != nil {
			t.Fatal(err)
		}
		if err := f.plane.Drain("web", "be1"); err != nil {
			t.Fatal(err)
		}
		f.advance(time.Second)
		if err := f.plane.Undrain("web", "be1"); err != nil {
			t.Fatal(err)
		}
		f.advance(2 * time.Second)
		f.intoPanic("be3", "be4", "be5")
		f.advance(2 * time.Second)
		return f
	}
	f, twin := setup(), setup()

	f.plane.mu.Lock()
	cfg, svc := f.plane.cfg, f.shared.Services.Load()
	states, panicked := f.plane.saveBackends(), maps.Clone(f.plane.panicked)
	f.plane.mu.Unlock()
	injected := f.failBuilds()
	reload := reloadWeb("www", "60s", "0.2", 1, 2, 3, 4, 6)
	if err := f.plane.Apply(mustParse(t, reload)); !errors.Is(err, injected) {
		t.Fatalf("reload with a failing build: %v, want the build's error", err)
	}
	f.plane.mu.Lock()
	gotCfg, gotSvc := f.plane.cfg, f.shared.Services.Load()
	gotStates, gotPanicked := f.plane.saveBackends(), maps.Clone(f.plane.panicked)
	f.plane.mu.Unlock()
	if gotCfg != cfg || gotSvc != svc {
		t.Errorf("failed reload: configuration kept %v, snapshot kept %v", gotCfg == cfg, gotSvc == svc)
	}
	if !reflect.DeepEqual(gotStates, states) {
		for k, st := range states {
			if g, ok := gotStates[k]; !ok || !reflect.DeepEqual(g, st) {
				t.Errorf("failed reload changed %v:\n got %+v\nwant %+v", k, g, st)
			}
		}
		for k := range gotStates {
			if _, ok := states[k]; !ok {
				t.Errorf("failed reload left state %v", k)
			}
		}
	}
	if !reflect.DeepEqual(gotPanicked, panicked) {
		t.Errorf("failed reload: panic mode %v, want %v", gotPanicked, panicked)
	}
	f.plane.build = BuildServices

	// The plane goes on: the same verdicts on both, then the reload.
	for _, x := range []*fixture{f, twin} {
		x.advance(time.Second)
		x.setHealthOf("web", "be3", true)
	}
	sameNewFlows(t, f, twin, "after a verdict that follows the failed reload")
	for _, x := range []*fixture{f, twin} {
		x.advance(time.Second)
		x.apply(reload)
	}
	if f.plane.Panicked()["www"] || twin.plane.Panicked()["www"] {
		t.Fatal("www in panic mode after the reload lowered the threshold")
	}
	if d := compareChoices(t, fixtureKey(t, f), f.shared.Services.Load(), twin.shared.Services.Load()); d["www"] != 0 {
		t.Errorf("%d of %d new flows of www go to different backends after the reload, on the instance whose first attempt failed and on its twin", d["www"], probeFlows)
	}
	for _, n := range []string{"be1", "be2", "be4", "be6"} {
		if a, b := pubBackend(t, f.shared, "www", n).Weight, pubBackend(t, twin.shared, "www", n).Weight; a != b {
			t.Errorf("www/%s: weight %d after the failed reload and the reload, %d on the twin", n, a, b)
		}
	}
	for _, x := range []*fixture{f, twin} {
		x.advance(time.Second)
		x.setHealthOf("www", "be4", true)
		x.setHealthOf("www", "be6", true)
	}
	if d := compareChoices(t, fixtureKey(t, f), f.shared.Services.Load(), twin.shared.Services.Load()); d["www"] != 0 {
		t.Errorf("%d of %d new flows of www go to different backends once be4 and be6 are up", d["www"], probeFlows)
	}
}

// A verdict whose rebuild fails: the previous snapshot stays published
// and the status names the error; the verdict is not lost, the next
// rebuild that builds publishes it, and the status's error clears.
func TestFailedRebuildKeepsVerdictForTheNext(t *testing.T) {
	f := newFixture(t, checkedWeb(4, "0s"))
	f.allUp()
	svc := f.shared.Services.Load()
	injected := f.failBuilds()
	if err := f.plane.SetHealth("web", "be2", false, "probe"); err != nil {
		t.Fatal(err)
	}
	f.failedRebuild(injected)
	if got := f.shared.Services.Load(); got != svc {
		t.Fatal("a snapshot was published although its build failed")
	}
	if st := f.plane.Status(false); st.LastError != injected.Error() {
		t.Errorf("status after a failed rebuild: LastError %q, want %q", st.LastError, injected.Error())
	}
	f.plane.build = BuildServices
	f.rebuild()
	if w := pubBackend(t, f.shared, "web", "be2").Weight; w != 0 {
		t.Errorf("be2 down by a verdict whose rebuild failed: weight %d after the next rebuild, want 0", w)
	}
	if st := f.plane.Status(false); st.LastError != "" {
		t.Errorf("status after a rebuild that built: LastError %q, want none", st.LastError)
	}
}

// A verdict's rebuild fails (Plane.build) after effective() decided panic
// mode and marked the down backends panicUsed. Panic mode was never
// published (p.panicked unchanged) and the next verdict ends it: the
// backend still down must be published Down under on_down = "move" (its
// flows leave it), as on a twin that never saw the failed build. The
// stale panicUsed kept it Down false: its tracked flows stayed on a dead
// backend until it came back up.
func TestFailedRebuildLeavesNoPanicMark(t *testing.T) {
	toml := drainProbeConfig("maglev", true, "move", "0s", "0s", "panic_threshold = 0.6")
	f, twin := newFixture(t, toml), newFixture(t, toml)
	for _, x := range []*fixture{f, twin} {
		x.allUp()
		x.setHealthOf("web", "be1", false) // 3 of 4: no panic
	}
	if !pubBackend(t, f.shared, "web", "be1").Down {
		t.Fatal("be1 down, on_down move: not published Down")
	}
	injected := f.failBuilds()
	if err := f.plane.SetHealth("web", "be2", false, "probe"); err != nil {
		t.Fatal(err)
	}
	f.failedRebuild(injected)
	f.plane.build = BuildServices
	f.setHealthOf("web", "be2", true)
	// The twin's two verdicts come before its rebuild (Run coalesces the
	// kicks): it publishes nothing between them either.
	if err := twin.plane.SetHealth("web", "be2", false, "probe"); err != nil {
		t.Fatal(err)
	}
	twin.setHealthOf("web", "be2", true)
	if f.plane.Panicked()["web"] {
		t.Fatal("web in panic mode with 3 of 4 up")
	}
	a, b := pubBackend(t, f.shared, "web", "be1"), pubBackend(t, twin.shared, "web", "be1")
	if a.Down != b.Down {
		t.Errorf("be1 down, on_down move, no panic published: Down %v after a failed build, %v on the twin (the same verdicts, no rebuild between them)", a.Down, b.Down)
	}
}

// failBuilds makes every rebuild's build fail, until the test sets
// f.plane.build back to BuildServices, and returns the error it fails with.
func (f *fixture) failBuilds() error {
	injected := errors.New("injected build failure")
	f.plane.build = func(*config.Config, *dataplane.Services, dataplane.Overrides, dataplane.NextHop) (*dataplane.Services, error) {
		return nil, injected
	}
	return injected
}

// failedRebuild rebuilds, and fails the test unless the rebuild fails
// with injected.
func (f *fixture) failedRebuild(injected error) {
	f.t.Helper()
	f.plane.mu.Lock()
	err := f.plane.rebuildLocked()
	f.plane.mu.Unlock()
	if !errors.Is(err, injected) {
		f.t.Fatalf("rebuild with a failing build: %v, want its error", err)
	}
}
