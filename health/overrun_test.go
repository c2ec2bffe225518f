package health

import (
	"context"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is the time a share reads; a prober moves it on to say how
// long the process did not run.
type fakeClock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *fakeClock) skip(d time.Duration) {
	c.mu.Lock()
	c.off += d
	c.mu.Unlock()
}

// stalledProber gets no answer before the check's deadline; when its
// context ends, the clock moves on by stall first: the process was
// stopped (SIGSTOP, a paused VM, a starved cgroup) and the deadline's
// timer fired that much late.
type stalledProber struct {
	clock *fakeClock
	stall time.Duration
	n     *atomic.Int64
}

func (p stalledProber) Probe(ctx context.Context, _ netip.AddrPort) (time.Duration, error) {
	<-ctx.Done()
	p.clock.skip(p.stall)
	p.n.Add(1)
	return 0, ctx.Err()
}

// TestCheckOverrunIsNotTheBackends: a check whose timeout fired long
// after its deadline (the LB's process did not run meanwhile: the fleet
// lab saw a check "timeout after 150ms" that took 833 ms under SIGSTOP)
// measured nothing of the backend: nobody judges it, it is counted as
// failed locally, and the backend keeps its verdict. A timeout that ends
// at its deadline is still the backend's.
func TestCheckOverrunIsNotTheBackends(t *testing.T) {
	for _, tc := range []struct {
		stall  time.Duration
		judged bool
	}{
		{time.Minute, false}, // the process stopped for a minute
		{0, true},            // on time: the backend did not answer
	} {
		var n atomic.Int64
		clock := &fakeClock{}
		m := NewManager(ManagerOptions{NewProber: func(string, Target) (Prober, error) {
			return stalledProber{clock, tc.stall, &n}, nil
		}})
		m.now = clock.now
		cfg := fastConfig(KindTCP)
		cfg.StartUp = true // up, and its first judged failure takes it down
		cfg.Rise, cfg.Fall = 1, 1
		if err := m.Set(map[string]Target{"web/be1": {Addr: netip.MustParseAddrPort("192.0.2.1:80"), Config: cfg}}); err != nil {
			t.Fatal(err)
		}
		poll(t, "checks", func() bool { return n.Load() >= 4 }) // the 4th began: 3 were taken
		st, _ := m.Status("web/be1")
		local := m.LocalFailures()
		m.Close()
		if tc.judged {
			if st.State != Down || st.Failures == 0 {
				t.Errorf("timeout on time: state %v, %d failures judged; want down", st.State, st.Failures)
			}
			continue
		}
		if st.State != Up || st.Checks != 0 || local < 3 {
			t.Errorf("checks overran by %v: state %v (%q), %d judged (%d failed), %d counted as failed locally; want up, none judged, >= 3 local",
				tc.stall, st.State, st.Reason, st.Checks, st.Failures, local)
		}
	}
}
