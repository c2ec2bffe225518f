package control

import (
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/flow"
)

// stallFixture is baseConfig's plane with a second worker that nobody
// polls (a stuck lcore) until resume is called, and an announcer that
// records every set.
type stallFixture struct {
	*fixture
	stuck *dataplane.Worker
	calls [][]netip.Prefix
	stop  func()
}

func newStallFixture(t *testing.T, toml string) *stallFixture {
	t.Helper()
	f := &stallFixture{fixture: newFixture(t, toml)}
	key, err := flow.ParseKey(f.cfg.Dataplane.HashKey)
	if err != nil {
		t.Fatal(err)
	}
	f.stuck, err = dataplane.NewWorker(1, f.shared, f.cfg.Conntrack, key, [6]byte{2, 0, 0, 0, 0, 1})
	if err != nil {
		t.Fatal(err)
	}
	f.plane.workers = append(f.plane.workers, f.stuck)
	f.plane.foldWait = 100 * time.Millisecond // each silent worker costs a fold this much
	f.plane.SetAnnouncer(func(s []netip.Prefix) { f.calls = append(f.calls, slices.Clone(s)) }, nil)
	if len(lastAnnounced(f.calls)) != 1 {
		t.Fatalf("not announced at start: %v", f.calls)
	}
	t.Cleanup(func() {
		if f.stop != nil {
			f.stop()
		}
	})
	return f
}

// resume starts polling the stuck worker, as its loop would.
func (f *stallFixture) resume() {
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-done:
				return
			default:
			}
			f.stuck.Idle(conntrack.Time(0))
			time.Sleep(100 * time.Microsecond)
		}
	}()
	var once sync.Once
	f.stop = func() { once.Do(func() { close(done); <-stopped }) }
}

// stalled is the stall watch's verdict (Status has it too, but waits
// 2 s for the silent worker's counters).
func (f *stallFixture) stalled() []int {
	f.plane.mu.Lock()
	defer f.plane.mu.Unlock()
	return slices.Clone(f.plane.stall.stalled)
}

// fold runs one signals fold.
func (f *stallFixture) fold() {
	f.plane.signalStep(make([]dataplane.Counters, len(f.plane.workers)))
}

// A worker that stops polling black-holes its queue's flows while
// everything else looks alive. Once it has answered no snapshot for
// stall_timeout (5 s by default), the instance withdraws every VIP; when
// it answers again, they are announced as before.
func TestStalledWorkerWithdrawsEveryVIP(t *testing.T) {
	f := newStallFixture(t, baseConfig)
	// Silence before the loops run does not count.
	f.fold()
	f.advance(time.Minute)
	f.plane.WorkersStarted()
	f.fold()
	if st := f.plane.Status(false); len(st.Stalled) != 0 || len(lastAnnounced(f.calls)) != 1 {
		t.Fatalf("a worker silent only before WorkersStarted judged stalled: stalled %v, announced %v", st.Stalled, lastAnnounced(f.calls))
	}
	f.advance(4 * time.Second)
	f.fold()
	if st := f.plane.Status(false); len(st.Stalled) != 0 || len(lastAnnounced(f.calls)) != 1 {
		t.Fatalf("silent for 4 s of a 5 s stall_timeout: stalled %v, announced %v", st.Stalled, lastAnnounced(f.calls))
	}
	f.advance(time.Second)
	f.fold()
	st := f.plane.Status(false)
	if !slices.Equal(st.Stalled, []int{1}) || !st.StallWithdrawn {
		t.Fatalf("silent for 5 s: Stalled %v, StallWithdrawn %v; want [1], true", st.Stalled, st.StallWithdrawn)
	}
	if got := lastAnnounced(f.calls); len(got) != 0 {
		t.Fatalf("worker 1 stalled, yet announced %v", got)
	}
	if len(st.Announced) != 0 {
		t.Errorf("Status.Announced %v while withdrawn", st.Announced)
	}
	// The table is untouched: only the announcement goes.
	if f.shared.Services.Load().VIPs[0].Table == nil {
		t.Fatal("a stall took the VIP's table")
	}
	f.resume()
	f.advance(time.Second)
	f.fold()
	st = f.plane.Status(false)
	if len(st.Stalled) != 0 || st.StallWithdrawn {
		t.Fatalf("worker answers again: Stalled %v, StallWithdrawn %v", st.Stalled, st.StallWithdrawn)
	}
	if got := lastAnnounced(f.calls); len(got) != 1 || got[0].Addr() != netip.MustParseAddr("203.0.113.7") {
		t.Fatalf("worker answers again, announced %v; want 203.0.113.7/32", got)
	}
}

// stall_timeout = 0 reports a stall (after the default's 5 s) and keeps
// announcing; a reload that sets it while a worker is stalled announces
// at once, and one that sets it back withdraws at once.
func TestStallTimeoutZeroReportsOnly(t *testing.T) {
	zero := strings.Replace(baseConfig, "[control]\n", "[control]\nstall_timeout = \"0s\"\n", 1)
	if zero == baseConfig {
		zero = baseConfig + "\n[control]\nstall_timeout = \"0s\"\n"
	}
	f := newStallFixture(t, zero)
	if f.cfg.Control.StallTimeout != 0 {
		t.Fatalf("stall_timeout = %v, want 0", f.cfg.Control.StallTimeout)
	}
	f.plane.WorkersStarted()
	f.advance(6 * time.Second)
	f.fold()
	st := f.plane.Status(false)
	if !slices.Equal(st.Stalled, []int{1}) || st.StallWithdrawn {
		t.Fatalf("stall_timeout = 0, silent 6 s: Stalled %v, StallWithdrawn %v; want [1], false", st.Stalled, st.StallWithdrawn)
	}
	if len(lastAnnounced(f.calls)) != 1 {
		t.Fatalf("stall_timeout = 0 withdrew: %v", f.calls)
	}
	f.apply(baseConfig) // stall_timeout back to its 5 s default
	if len(lastAnnounced(f.calls)) != 0 {
		t.Fatalf("a reload set stall_timeout while worker 1 is stalled: still announced %v", lastAnnounced(f.calls))
	}
	f.apply(zero)
	if len(lastAnnounced(f.calls)) != 1 {
		t.Fatalf("a reload set stall_timeout = 0 while worker 1 is stalled: not announced again %v", f.calls)
	}
}

// Responsive is the systemd watchdog's test of the control plane: false
// while its lock is held (a deadlock), true once it is free; calls while
// it is held share one probe, so a long deadlock does not pile up
// goroutines.
func TestResponsiveFollowsTheLock(t *testing.T) {
	f := newFixture(t, baseConfig)
	if !f.plane.Responsive(time.Second) {
		t.Fatal("lock free, yet not responsive")
	}
	f.plane.mu.Lock()
	before := runtime.NumGoroutine()
	for range 20 {
		if f.plane.Responsive(time.Millisecond) {
			f.plane.mu.Unlock()
			t.Fatal("lock held, yet responsive")
		}
	}
	if n := runtime.NumGoroutine() - before; n > 1 {
		t.Errorf("20 probes of a held lock left %d goroutines waiting, want at most 1", n)
	}
	f.plane.mu.Unlock()
	if !f.plane.Responsive(5 * time.Second) {
		t.Fatal("lock free again, yet not responsive")
	}
}

// Counter readers take turns on a worker: one that answers another
// reader (the stats log, the admin API) between two folds polls, though
// the fold's own request missed it. Before, an idle worker at
// idle_max_sleep = 1 s whose every answer went to a reader just ahead of
// the fold was judged stalled, and a healthy daemon withdrew every VIP.
func TestStallWatchCountsAnswersToOtherReaders(t *testing.T) {
	f := newStallFixture(t, baseConfig)
	f.plane.WorkersStarted()
	other := func() { // another reader, answered by one poll of the worker
		var c dataplane.Counters
		done := make(chan bool)
		go func() { done <- f.stuck.Snapshot(&c, 10*time.Second) }()
		for {
			select {
			case ok := <-done:
				if !ok {
					t.Fatal("the other reader's snapshot was not answered")
				}
				return
			default:
				f.stuck.Idle(conntrack.Time(0))
				time.Sleep(100 * time.Microsecond)
			}
		}
	}
	for range 4 { // 12 s: over twice stall_timeout
		other()
		f.advance(3 * time.Second)
		f.fold() // its own request: no poll answers it
		if st := f.stalled(); len(st) != 0 || len(lastAnnounced(f.calls)) != 1 {
			t.Fatalf("worker 1 answered another reader in every period: stalled %v, announced %v", st, lastAnnounced(f.calls))
		}
	}
	f.advance(3 * time.Second)
	f.fold()
	f.advance(3 * time.Second)
	f.fold()
	if st := f.stalled(); !slices.Equal(st, []int{1}) {
		t.Fatalf("worker 1 answered nobody for 6 s: stalled %v, want [1]", st)
	}
}

// A fold waits for each worker longer than the longest idle sleep: an
// idle worker that polls once every 1.2 s (idle_max_sleep = 1 s plus its
// poll's work) answers the fold itself, so passive health is judged and
// the loads published. Before, the fold waited 1 s and could miss such a
// worker at every turn.
func TestFoldWaitsForTheLongestIdleSleep(t *testing.T) {
	f := newStallFixture(t, baseConfig)
	f.plane.foldWait = foldWait
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() { // the engine's idle loop at its longest sleep, and a little work
		defer close(stopped)
		for {
			f.stuck.Local().IdlePolls++
			f.stuck.Idle(conntrack.Time(0))
			select {
			case <-stop:
				return
			case <-time.After(1200 * time.Millisecond):
			}
		}
	}()
	defer func() { close(stop); <-stopped }()
	counters := make([]dataplane.Counters, len(f.plane.workers))
	for i := range 2 {
		clear(counters)
		f.plane.signalStep(counters)
		if counters[1].IdlePolls == 0 {
			t.Fatalf("fold %d: worker 1, polling every 1.2 s, did not answer within the fold's wait (%v)", i, foldWait)
		}
	}
}

// A probe that timed out and took the lock later says nothing of a lock
// held again since: the next call probes anew (a deadlock that began
// after a brief hold was reported a watchdog tick late).
func TestResponsiveDoesNotReuseAnOldProbe(t *testing.T) {
	f := newFixture(t, baseConfig)
	f.plane.mu.Lock()
	if f.plane.Responsive(time.Millisecond) {
		t.Fatal("lock held, yet responsive")
	}
	f.plane.mu.Unlock()
	// The timed-out probe takes the lock and lets it go.
	f.plane.probeMu.Lock()
	ch := f.plane.probe
	f.plane.probeMu.Unlock()
	if ch == nil {
		t.Fatal("no probe pending after a timeout")
	}
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("the probe never took the free lock")
	}
	f.plane.mu.Lock()
	defer f.plane.mu.Unlock()
	if f.plane.Responsive(50 * time.Millisecond) {
		t.Error("lock held again, yet responsive (the old probe's answer)")
	}
}
