package control

// A lost next hop's grace across a pause that falls while Run is not
// waiting for its step: the pause watch (pausewatch.go).

import (
	"net/netip"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/dataplane"
)

// watched is a fixture whose pause watch reads the fixture's clock; its
// run plays Run and the watch's goroutine while the process runs.
type watched struct {
	*fixture
	idle time.Time // when Run last began to wait (after its last step)
}

func newWatched(t *testing.T) *watched {
	f := gatewayedBase(t)
	f.plane.pauses.clock = func() time.Time { return time.Unix(0, f.clock.Load()) }
	w := &watched{fixture: f}
	w.run(time.Second)
	return w
}

// run lets d of running time pass: the watch wakes every period, Run
// steps every second.
func (w *watched) run(d time.Duration) {
	for i := 1; i <= int(d/pauseWatchPeriod); i++ {
		w.advance(pauseWatchPeriod)
		w.plane.pauses.wake(w.plane.pauses.now())
		if i%int(time.Second/pauseWatchPeriod) == 0 {
			w.stepAt(w.plane.now())
		}
	}
}

// stepAt is Run's step woken at at (read before it takes the lock); Run
// waits again from the clock's time after it.
func (w *watched) stepAt(at time.Time) {
	w.plane.mu.Lock()
	w.plane.stepLocked(at, w.idle, true)
	w.plane.mu.Unlock()
	w.idle = w.plane.now()
}

// lose announces the IPv4 VIP and loses its next hop; it returns the
// announcements made.
func (w *watched) lose(t *testing.T) *[][]netip.Prefix {
	calls := w.recordAnnounced()
	w.plane.SetNextHop(testGW4, netip.Addr{}, hop4)
	if len(lastAnnounced(*calls)) != 1 {
		t.Fatalf("not announced: %v", *calls)
	}
	w.plane.SetNextHop(testGW4, netip.Addr{}, dataplane.NextHop{})
	return calls
}

// graceRunsOn checks that the address stays announced for the rest of a
// grace of running time of which ran has passed, and is withdrawn within
// two seconds after.
func (w *watched) graceRunsOn(t *testing.T, calls *[][]netip.Prefix, ran time.Duration) {
	t.Helper()
	w.run(NextHopGrace - ran - time.Second)
	if got := lastAnnounced(*calls); len(got) != 1 {
		t.Fatalf("%v of running time after the loss, less than the grace: withdrawn (%v)", NextHopGrace-time.Second, got)
	}
	w.run(2 * time.Second)
	if got := lastAnnounced(*calls); len(got) != 0 {
		t.Errorf("%v of running time after the loss: still announced %v", NextHopGrace+time.Second, got)
	}
}

// Run wakes for its step 5 s after the loss, and the process is stopped
// for a minute while Run waits for the plane's lock (a reload building
// its tables). Its step read the time before the lock, so it came on time
// by its own reckoning: the minute counted toward the grace and the
// address was withdrawn at once, the resolver having run 5 s.
func TestPauseWhileRunWaitsForTheLock(t *testing.T) {
	w := newWatched(t)
	calls := w.lose(t)
	w.run(5 * time.Second)
	at := w.plane.now() // Run woke; the lock is held
	w.advance(time.Minute)
	w.stepAt(at)
	w.graceRunsOn(t, calls, 5*time.Second)
}

// The same minute falls while Run rebuilds at its step (a ramp under way):
// Run waits again only after it, so its next step came on time, and the
// minute counted.
func TestPauseWhileRunRebuilds(t *testing.T) {
	w := newWatched(t)
	calls := w.lose(t)
	w.run(5 * time.Second)
	w.advance(time.Minute) // within the step at 5 s
	w.idle = w.plane.now()
	w.graceRunsOn(t, calls, 5*time.Second)
}

// A minute's pause while Run waits for its step is in Run's reckoning and
// the watch's: it is taken out once, not twice (the grace then would
// have run a minute longer).
func TestPauseSeenTwiceCountsOnce(t *testing.T) {
	w := newWatched(t)
	calls := w.lose(t)
	w.run(5 * time.Second)
	w.advance(time.Minute)
	w.graceRunsOn(t, calls, 5*time.Second)
}

// The watch's own arithmetic: lateness over stepSlack is a pause, less is
// not, and the interval the watch is in counts before its next wake.
func TestPauseWatchAddsLateness(t *testing.T) {
	var w pauseWatch
	t0 := time.Unix(1000, 0)
	if got := w.paused(t0); got != 0 {
		t.Fatalf("before any wake: %v", got)
	}
	w.wake(t0)
	for _, c := range []struct {
		gap, want time.Duration
	}{
		{pauseWatchPeriod, 0},
		{pauseWatchPeriod + stepSlack, 0},
		{pauseWatchPeriod + stepSlack + time.Millisecond, stepSlack + time.Millisecond},
		{time.Minute, time.Minute - pauseWatchPeriod},
	} {
		var v pauseWatch
		v.wake(t0)
		if got := v.paused(t0.Add(c.gap)); got != c.want {
			t.Errorf("gap %v, before the next wake: %v, want %v", c.gap, got, c.want)
		}
		v.wake(t0.Add(c.gap))
		if got := v.paused(t0.Add(c.gap)); got != c.want {
			t.Errorf("gap %v, after the next wake: %v, want %v", c.gap, got, c.want)
		}
	}
	// Two pauses add up; a wake on time adds nothing.
	w.wake(t0.Add(time.Minute))
	w.wake(t0.Add(time.Minute + pauseWatchPeriod))
	w.wake(t0.Add(2*time.Minute + pauseWatchPeriod))
	if got, want := w.paused(t0.Add(2*time.Minute+pauseWatchPeriod)), 2*(time.Minute-pauseWatchPeriod); got != want {
		t.Errorf("two pauses of a minute: %v, want %v", got, want)
	}
}
