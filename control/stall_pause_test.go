package control

import (
	"slices"
	"testing"
	"time"
)

// The whole process stopped (SIGSTOP, a VM paused for live migration, a
// debugger) while a fold waited for the workers' counters: on resume the
// fold's deadline has passed before a worker, resumed at the same moment,
// polls again, so the fold finds it silent, for as long as the pause.
// The stall watch counted the pause as the worker's silence and withdrew
// every VIP (announced again a fold later: the routers moved the
// instance's flows away and back). A fold that overran judges no silent
// worker; a worker that really stays silent is still caught, and one
// stalled stays stalled. (Found by an audit of a paused daemon.)
func TestStallWatchDoesNotCountItsOwnPause(t *testing.T) {
	f := newStallFixture(t, baseConfig)
	f.resume() // worker 1 polls
	f.plane.WorkersStarted()
	for range 3 {
		f.advance(time.Second)
		f.fold()
	}
	if st := f.stalled(); len(st) != 0 {
		t.Fatalf("polling worker stalled: %v", st)
	}
	// pausedFold is a fold during which the process stood still for
	// 10 s: the clock moves 5 s at each of its readings (the fold's
	// start, its end, and its verdict), and worker 1 does not poll
	// before the fold gives up on it.
	pausedFold := func() {
		f.stride.Store(int64(5 * time.Second))
		f.fold()
		f.stride.Store(0)
	}
	f.stop()
	pausedFold()
	if st := f.stalled(); len(st) != 0 || len(lastAnnounced(f.calls)) != 1 {
		t.Fatalf("a fold across a 10 s pause of the whole process: worker 1 (which answered the fold before it) judged stalled %v; announced %v, want 1 VIP", st, lastAnnounced(f.calls))
	}
	f.resume()
	for range 3 {
		f.advance(time.Second)
		f.fold()
	}
	if st := f.stalled(); len(st) != 0 || len(lastAnnounced(f.calls)) != 1 {
		t.Fatalf("polling after the pause: stalled %v, announced %v", st, lastAnnounced(f.calls))
	}
	// A worker really stuck is still caught: at the first fold that did
	// not overrun after its silence passed stall_timeout (5 s here),
	// though a paused fold came in between.
	f.stop()
	for range 3 {
		f.advance(time.Second)
		f.fold()
	}
	pausedFold()
	if st := f.stalled(); len(st) != 0 {
		t.Fatalf("a paused fold judged a silent worker: stalled %v", st)
	}
	f.advance(time.Second)
	f.fold()
	if st := f.stalled(); !slices.Equal(st, []int{1}) || len(lastAnnounced(f.calls)) != 0 {
		t.Fatalf("worker 1 silent for over 5 s, the last fold on time: stalled %v, announced %v; want [1], none", st, lastAnnounced(f.calls))
	}
	// A pause while it is stalled does not announce the VIPs meanwhile.
	pausedFold()
	if st := f.stalled(); !slices.Equal(st, []int{1}) || len(lastAnnounced(f.calls)) != 0 {
		t.Fatalf("a paused fold while worker 1 is stalled: stalled %v, announced %v; want [1], none", st, lastAnnounced(f.calls))
	}
	// And it comes back as before.
	f.resume()
	f.advance(time.Second)
	f.fold()
	if st := f.stalled(); len(st) != 0 || len(lastAnnounced(f.calls)) != 1 {
		t.Fatalf("worker 1 polls again: stalled %v, announced %v", st, lastAnnounced(f.calls))
	}
}
