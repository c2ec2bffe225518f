package health

import (
	"testing"
	"time"
)

// TestProbeFlapBackoffAtMax: with the longest interval and backoffs (an
// hour each), a backend that flaps for a year is ejected for exactly
// MaxBackoff each time, comes back exactly when it ends, and its
// EjectedUntil never overflows or drifts.
func TestProbeFlapBackoffAtMax(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Interval, cfg.Timeout = MaxInterval, MaxInterval-time.Second
	cfg.Rise, cfg.Fall = 1, 1
	cfg.BackoffBase, cfg.BackoffMax = time.Nanosecond, MaxBackoff
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	m := newMachine("b", addr, cfg, t0)
	now := t0
	obs := func(pass bool) (Event, bool) {
		var err error
		if !pass {
			err = errFail
		}
		return m.observe(now, time.Millisecond, err)
	}
	obs(true) // unknown > up
	now = now.Add(MaxInterval)
	obs(false) // first fall: not a flap
	now = now.Add(MaxInterval)
	obs(true) // down > up
	want := time.Nanosecond
	for i := range 24 * 365 / 3 {
		now = now.Add(MaxInterval)
		ev, ok := obs(false)
		if !ok || !ev.Ejected || ev.Status.Backoff != want || !ev.Status.EjectedUntil.Equal(now.Add(want)) {
			t.Fatalf("flap %d: %+v, want an ejection of %v", i, ev.Status, want)
		}
		end := now.Add(want)
		if want > time.Nanosecond {
			now = end.Add(-time.Nanosecond)
			if _, ok := obs(true); ok {
				t.Fatalf("flap %d: up before the ejection ended", i)
			}
		}
		now = end
		if ev, ok := obs(true); !ok || ev.New != Up {
			t.Fatalf("flap %d: not up at the ejection's end", i)
		}
		want = min(2*want, MaxBackoff)
	}
	if m.st.Backoff != MaxBackoff {
		t.Errorf("backoff %v after a year of flaps, want %v", m.st.Backoff, MaxBackoff)
	}
}

// TestProbeJitterDelayAtMax: the delay between checks at the longest
// interval and the largest jitter stays within its bounds.
func TestProbeJitterDelayAtMax(t *testing.T) {
	for _, r := range []float64{0, 0.5, 0.999999} {
		d := jitterDelay(MaxInterval, MaxJitter, r)
		if d < MaxInterval/2 || d >= MaxInterval*3/2 {
			t.Errorf("r %v: delay %v outside [%v, %v)", r, d, MaxInterval/2, MaxInterval*3/2)
		}
		if f := firstDelay(MaxInterval, MaxJitter, r); f < 0 || f >= MaxInterval/2 {
			t.Errorf("r %v: first delay %v", r, f)
		}
	}
}
