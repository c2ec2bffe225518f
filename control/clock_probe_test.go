package control

import (
	"strings"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/health"
)

// TestProbeDrainTimeoutAndSlowStartAtMax: drain_timeout and slow_start at
// their configured maxima (24 h and 1 h) end exactly on time, and the
// rebuild loop stops stepping once they have.
func TestProbeDrainTimeoutAndSlowStartAtMax(t *testing.T) {
	toml := strings.Replace(baseConfig, `drain_timeout = "0s"`, `drain_timeout = "24h"`, 1)
	toml = strings.Replace(toml, `slow_start = "10s"`, `slow_start = "1h"`, 1)
	f := newFixture(t, toml)
	if c := f.plane.Config().Control; c.DrainTimeout != config.MaxDrainTimeout || c.SlowStart != config.MaxSlowStart {
		t.Fatalf("control %+v: want the maxima", c)
	}
	if err := f.plane.Drain("web", "be1"); err != nil {
		t.Fatal(err)
	}
	f.advance(config.MaxDrainTimeout - time.Nanosecond)
	f.rebuild()
	if st := f.backend("be1"); st.Down || f.plane.drainTimeoutPending() {
		t.Fatalf("1 ns before the drain timeout: %+v, pending %v", st, f.plane.drainTimeoutPending())
	}
	f.advance(time.Nanosecond)
	if !f.plane.drainTimeoutPending() {
		t.Fatal("at the drain timeout: not pending, so the loop would not rebuild")
	}
	f.rebuild()
	if st := f.backend("be1"); !st.Down {
		t.Fatalf("at the drain timeout: %+v, want down", st)
	}
	if f.plane.drainTimeoutPending() {
		t.Error("drain timeout still pending once a snapshot has it")
	}
	// Undrain: a ramp of one hour.
	if err := f.plane.Undrain("web", "be1"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		at         time.Duration
		eff        int
		slow, ramp bool // status's SlowStart (weight below full), the plane's ramping
	}{{0, 10, true, true}, {30 * time.Minute, 50, true, true}, {config.MaxSlowStart - time.Second, 100, false, true}, {config.MaxSlowStart, 100, false, false}} {
		f.clock.Store(f.clock.Load() - int64(f.plane.now().Sub(f.plane.backends[dataplane.BackendRef{VIP: "web", Backend: "be1"}].upSince)) + int64(c.at))
		f.rebuild()
		if st := f.backend("be1"); st.Effective != c.eff || st.SlowStart != c.slow || f.plane.ramping != c.ramp {
			t.Errorf("%v into the ramp: effective %d slow start %v ramping %v; want %d %v %v", c.at, st.Effective, st.SlowStart, f.plane.ramping, c.eff, c.slow, c.ramp)
		}
	}
}

// TestProbePassiveBackoffAtMax: passive ejections double up to
// flap_backoff_max (at its limit, an hour) and stay there however many
// follow, each ending on time; the backoff is forgotten after 10 × the
// maximum of good behaviour, not before.
func TestProbePassiveBackoffAtMax(t *testing.T) {
	f := newFixture(t, baseConfig)
	h := &config.Health{}
	h.BackoffBase, h.BackoffMax = time.Second, health.MaxBackoff
	h.PassiveWindow = 10 * time.Second
	st := f.plane.backends[dataplane.BackendRef{VIP: "web", Backend: "be1"}]
	now := f.plane.now()
	want := time.Second
	for i := range 100 {
		f.plane.eject(st, h, now, "probe")
		if st.passive.backoff != want || !st.passive.until.Equal(now.Add(want)) {
			t.Fatalf("ejection %d: backoff %v until %v, want %v", i, st.passive.backoff, st.passive.until, want)
		}
		// One fold just before the end keeps it; one at the end ends it.
		if f.plane.foldWindow(st, h, 0, 0, 0, now.Add(want-time.Nanosecond)) || st.passive.until.IsZero() {
			t.Fatalf("ejection %d ended early", i)
		}
		now = now.Add(want)
		if !f.plane.foldWindow(st, h, 0, 0, 0, now) || !st.passive.until.IsZero() {
			t.Fatalf("ejection %d did not end at %v", i, want)
		}
		want = min(2*want, health.MaxBackoff)
	}
	st.passive.forgetIfStable(h, now.Add(10*health.MaxBackoff))
	if st.passive.backoff != health.MaxBackoff {
		t.Fatal("backoff forgotten at exactly 10 x the maximum")
	}
	st.passive.forgetIfStable(h, now.Add(10*health.MaxBackoff+time.Nanosecond))
	if st.passive.backoff != 0 {
		t.Fatal("backoff not forgotten after 10 x the maximum")
	}
}
