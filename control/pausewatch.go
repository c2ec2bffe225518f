package control

import (
	"sync"
	"time"
)

// pauseWatch adds up the time the process did not run (SIGSTOP, a VM
// paused for migration, starved of CPU), for a lost next hop's grace
// (holdGraceAcrossPauseLocked). Its goroutine (watchPauses) wakes every
// pauseWatchPeriod and takes no lock of the plane's: a wake later than
// its period by more than stepSlack is a pause of that lateness. Run's
// own step sees a pause only while Run waits for the step; one that fell
// while Run waited for the plane's lock (a reload building) or rebuilt
// was counted toward the grace, and a VIP whose next hop had been lost a
// few seconds before was withdrawn at the first step after.
type pauseWatch struct {
	mu    sync.Mutex
	clock func() time.Time // time.Now; tests set their own
	last  time.Time        // the watch's last wake; zero before the first
	total time.Duration    // the pauses of the intervals between wakes
}

const pauseWatchPeriod = 100 * time.Millisecond

func (w *pauseWatch) now() time.Time {
	if w.clock != nil {
		return w.clock()
	}
	return time.Now()
}

// pauseIn is the pause an interval of gap between two wakes holds: its
// lateness, when over stepSlack (as Run's step judges its own).
func pauseIn(gap time.Duration) time.Duration {
	if late := gap - pauseWatchPeriod; late > stepSlack {
		return late
	}
	return 0
}

// wake is the watch's wake at now.
func (w *pauseWatch) wake(now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.last.IsZero() {
		w.total += pauseIn(now.Sub(w.last))
	}
	w.last = now
}

// paused is the time the process did not run until now, the interval the
// watch is in included (a step right after a resume, before the watch's
// goroutine ran again). It never decreases between two calls with
// increasing now.
func (w *pauseWatch) paused(now time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.last.IsZero() {
		return w.total
	}
	return w.total + pauseIn(now.Sub(w.last))
}

// watchPauses runs the watch until done.
func (p *Plane) watchPauses(done <-chan struct{}) {
	t := time.NewTicker(pauseWatchPeriod)
	defer t.Stop()
	p.pauses.wake(p.pauses.now())
	for {
		select {
		case <-done:
			return
		case <-t.C:
			p.pauses.wake(p.pauses.now())
		}
	}
}
