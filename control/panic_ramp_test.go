package control

// Panic mode, slow start and health state across reloads, renames, flaps
// and a worker that does not answer the counters snapshot.

import (
	"errors"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/flow"
	"github.com/fulcrumlb/fulcrum/health"
)

// checkedWeb is a checked "web" VIP with n backends be1..beN, slow start
// slowStart, keys added to [control].
func checkedWeb(n int, slowStart string, control ...string) string {
	return configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).
		Section("conntrack", "capacity = 65536").
		Section("control", append([]string{`slow_start = "` + slowStart + `"`, `drain_timeout = "0s"`}, control...)...).
		Section("health", `kind = "tcp"`).
		Web(n).
		String()
}

// Scaling out: a VIP of 2 healthy backends gets 3 more by a reload. The
// README says a backend added by a reload starts down until it passes rise
// checks. The new ones count as unhealthy for panic mode, so 2 of 5
// healthy is under 50%: the VIP enters panic mode and new flows go to
// the three backends nobody has checked yet.
func TestScaleOutKeepsUncheckedOutOfPanic(t *testing.T) {
	f := newFixture(t, checkedWeb(2, "0s"))
	f.setHealthOf("web", "be1", true)
	f.setHealthOf("web", "be2", true)
	f.rebuild()
	if f.plane.Panicked()["web"] {
		t.Fatal("panic with both backends up")
	}
	f.apply(checkedWeb(5, "0s"))
	panicked := f.plane.Panicked()["web"]
	var routed []string
	for _, n := range []string{"be3", "be4", "be5"} {
		if b := pubBackend(t, f.shared, "web", n); b.Weight > 0 {
			routed = append(routed, n)
		}
	}
	if panicked || len(routed) > 0 {
		t.Errorf("after a reload adding 3 unchecked backends to 2 healthy ones: panic=%v, never-checked backends with weight in the table: %v", panicked, routed)
	}
}

// Slow start across a reload: be1 is undrained, ramps for 10 s and then
// serves at full weight for another 20 s. A reload that lengthens
// slow_start to 60 s (or turns it on) must not cut a backend that finished
// ramping (or never ramped) back to a fraction of its weight.
func TestReloadLengtheningSlowStartKeepsRampedBackends(t *testing.T) {
	f := newFixture(t, checkedWeb(4, "10s"))
	f.allUp()
	f.rebuild()
	if err := f.plane.Drain("web", "be1"); err != nil {
		t.Fatal(err)
	}
	if err := f.plane.Undrain("web", "be1"); err != nil {
		t.Fatal(err)
	}
	f.advance(30 * time.Second)
	f.rebuild()
	full := pubBackend(t, f.shared, "web", "be1").Weight
	if full != WeightScale {
		t.Fatalf("be1 weight %d after its ramp, want %d", full, WeightScale)
	}
	f.apply(checkedWeb(4, "60s"))
	if w := pubBackend(t, f.shared, "web", "be1").Weight; w < full {
		t.Errorf("reload lengthening slow_start: be1 (serving at full weight for 20 s) cut from %d to %d; be2 stays at %d",
			full, w, pubBackend(t, f.shared, "web", "be2").Weight)
	}
}

// Panic mode and slow start: 5 backends, 4 down, so panic mode gives
// every backend its full weight, the dead ones included. be2 comes back
// up (still panic: 2 of 5): slow start cuts the one backend that just
// proved healthy to slow_start_min of its weight, while the three that
// still fail their checks keep all of theirs. New flows move from a
// healthy backend to dead ones.
func TestPanicRecoveredBackendNotRamped(t *testing.T) {
	f := newFixture(t, checkedWeb(5, "30s"))
	f.allUp()
	f.rebuild()
	for _, n := range []string{"be2", "be3", "be4", "be5"} {
		f.setHealthOf("web", n, false)
	}
	f.rebuild()
	if !f.plane.Panicked()["web"] {
		t.Fatal("not in panic mode with 1 of 5 up")
	}
	before := pubBackend(t, f.shared, "web", "be2").Weight
	f.advance(time.Second)
	f.setHealthOf("web", "be2", true)
	f.rebuild()
	if !f.plane.Panicked()["web"] {
		t.Fatal("left panic mode with 2 of 5 up")
	}
	up := pubBackend(t, f.shared, "web", "be2").Weight
	dead := pubBackend(t, f.shared, "web", "be3").Weight
	if up < dead {
		t.Errorf("in panic mode: be2, down and used at weight %d, comes back up and is cut to %d; be3, still down, keeps %d", before, up, dead)
	}
}

// A VIP rename (same address, port, protocol) keeps its backends' health
// (README, Drain, weights and slow start). be2 flapped and is held out for
// flap_backoff (1 h). Renaming the VIP restarts every checker afresh
// (new keys, state Unknown), so be2's first passing check after the
// reload brings it back at once: the rename undoes the flap ejection.
func TestVIPRenameKeepsFlapEjection(t *testing.T) {
	checks := "[health]\nkind = \"tcp\"\ninterval = \"10ms\"\ntimeout = \"5ms\"\nrise = 1\nfall = 1\nflap_backoff = \"1h\"\nflap_backoff_max = \"1h\"\n"
	cfg := strings.Replace(baseConfig, "[[vip]]", checks+"\n[[vip]]", 1)
	f := newFixture(t, cfg)
	be2 := netip.MustParseAddr("10.0.1.2")
	var n atomic.Int64
	m := manualChecks(t, f, func(a netip.AddrPort) error {
		if a.Addr() != be2 {
			return nil
		}
		// pass, fail, pass, fail (a flap: ejected), then passes for ever.
		if i := n.Add(1); i == 2 || i == 4 {
			return errors.New("connection refused")
		}
		return nil
	})
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case ev, ok := <-m.Events():
				if !ok {
					return
				}
				f.plane.healthEvent(ev)
			case <-stop:
				return
			}
		}
	}()
	defer func() { close(stop); <-done }()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	waitFor("be2's flap ejection", func() bool {
		s, ok := m.Status("web/be2")
		return ok && s.Ejections == 1 && s.State == health.Down
	})
	f.rebuild()
	waitFor("be2 out of the table", func() bool {
		f.plane.mu.Lock()
		defer f.plane.mu.Unlock()
		return f.plane.backends[dataplane.BackendRef{VIP: "web", Backend: "be2"}].health == HealthDown
	})
	f.rebuild()
	if b := pubBackend(t, f.shared, "web", "be2"); b.Weight != 0 {
		t.Fatalf("be2 flap-ejected but weight %d", b.Weight)
	}
	f.apply(strings.Replace(cfg, `name = "web"`, `name = "www"`, 1))
	// The renamed checkers run on (10 ms apart): wait for five more checks
	// of be1, each a chance for be2's to have brought it back.
	be1 := func() uint64 { s, _ := m.Status("www/be1"); return s.Checks }
	base := be1()
	waitFor("five checks of the renamed VIP's be1", func() bool { return be1() >= base+5 })
	f.rebuild()
	s, _ := m.Status("www/be2")
	if b := pubBackend(t, f.shared, "www", "be2"); b.Weight != 0 {
		t.Errorf("after renaming the VIP, be2 (ejected for flapping for 1 h a moment before) is back in the table at weight %d; its checker's state: %v, ejections %d, ejected until %v",
			b.Weight, s.State, s.Ejections, s.EjectedUntil)
	}
}

// A backend down by its checks, then a reload turns the checks off
// (kind = "none"): the backend is trusted again and serves. It "comes
// back up" as far as the table is concerned, but skips slow start and
// takes its full weight at once (a recovering server is flooded).
func TestChecksOffRampsDownBackend(t *testing.T) {
	f := newFixture(t, checkedWeb(4, "30s"))
	f.allUp()
	f.setHealthOf("web", "be2", false)
	f.advance(time.Minute)
	f.rebuild()
	if b := pubBackend(t, f.shared, "web", "be2"); b.Weight != 0 {
		t.Fatalf("be2 down but weight %d", b.Weight)
	}
	f.apply(strings.Replace(checkedWeb(4, "30s"), `kind = "tcp"`, `kind = "none"`, 1))
	if b := pubBackend(t, f.shared, "web", "be2"); b.Weight >= WeightScale {
		t.Errorf("be2, down a moment ago, back at full weight %d when a reload turned its checks off (no slow start)", b.Weight)
	}
}

// One worker that does not answer the counter snapshot (stuck or stopped:
// Status reports such workers as Stale and goes on) stops every signals
// fold, and with it the end of every passive ejection: be2, ejected for
// flap_backoff (10 s), stays out of the table however long it has been.
func TestStuckWorkerStillEndsPassiveEjection(t *testing.T) {
	f := newFixture(t, passiveConfig)
	sim := newSim(f)
	ejectBe2(t, f, sim)
	key, err := flow.ParseKey(f.cfg.Dataplane.HashKey)
	if err != nil {
		t.Fatal(err)
	}
	stuck, err := dataplane.NewWorker(1, f.shared, f.cfg.Conntrack, key, [6]byte{})
	if err != nil {
		t.Fatal(err)
	}
	f.plane.workers = append(f.plane.workers, stuck) // never polled
	f.advance(time.Hour)                             // the ejection (10 s) is long over
	counters := make([]dataplane.Counters, len(f.plane.workers))
	f.plane.signalStep(counters) // the stuck worker's snapshot times out (1 s)
	f.plane.workers = f.plane.workers[:1]
	if b := f.backend("be2"); b.Outlier {
		t.Errorf("be2 still ejected an hour after a 10 s ejection began: one worker did not answer the counters snapshot, so no fold ran (%s)", b.Reason)
	}
}
