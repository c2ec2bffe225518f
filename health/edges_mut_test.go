package health

import (
	"testing"
	"time"
)

// Edge cases that no other test of the package pinned down: a mutation
// audit changed each line they guard (a comparison, a condition, a
// constant) and every other test still passed.

// flapOnce brings m Up, Down, Up, then flaps it (an ejection of base), and
// checks it back Up after the ejection; it returns the clock.
func flapOnce(t *testing.T, m *machine, now time.Time) time.Time {
	t.Helper()
	step := func(pass bool) (Event, bool) {
		now = now.Add(time.Second)
		var err error
		if !pass {
			err = errFail
		}
		return m.observe(now, time.Millisecond, err)
	}
	up := func() {
		t.Helper()
		for range 1000 {
			if ev, ok := step(true); ok && ev.New == Up {
				return
			}
		}
		t.Fatal("never came up")
	}
	up()
	step(false) // down: a failure
	up()
	if ev, ok := step(false); !ok || !ev.Ejected {
		t.Fatalf("flap: %+v %v, want an ejection", ev, ok)
	}
	up() // after the ejection
	return now
}

// Once an ejection has ended, EjectedUntil is zero ("zero when not
// ejected").
func TestEdgeEjectionEndClearsEjectedUntil(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Rise, cfg.Fall, cfg.FlapWindow = 1, 1, 60
	cfg.BackoffBase, cfg.BackoffMax = 10*time.Second, 40*time.Second
	m := newMachine("b", addr, cfg, t0)
	flapOnce(t, m, t0)
	if m.st.State != Up || !m.st.EjectedUntil.IsZero() {
		t.Fatalf("up again after the ejection: state %v, EjectedUntil %v; want up and zero", m.st.State, m.st.EjectedUntil)
	}
}

// A reload that lowers backoff_max below a backend's remembered backoff,
// while the backend is Up (not ejected), leaves it not ejected and its
// reason alone: only an ejection in progress is shortened.
func TestEdgeReconfigureNotEjected(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Rise, cfg.Fall, cfg.FlapWindow = 1, 1, 60
	cfg.BackoffBase, cfg.BackoffMax = 10*time.Second, 40*time.Second
	m := newMachine("b", addr, cfg, t0)
	flapOnce(t, m, t0)
	reason := m.st.Reason
	if m.st.Backoff != 10*time.Second {
		t.Fatalf("setup: backoff %v", m.st.Backoff)
	}
	cfg.BackoffBase, cfg.BackoffMax = time.Second, 5*time.Second
	m.configure(cfg)
	if !m.st.EjectedUntil.IsZero() || m.st.Reason != reason {
		t.Fatalf("reload of an Up backend: EjectedUntil %v, reason %q; want zero and %q", m.st.EjectedUntil, m.st.Reason, reason)
	}
}
