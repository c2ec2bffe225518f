package control

import (
	"runtime"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/flow"
)

// TestFoldAsksSilentWorkersAtOnce: a fold asks every worker for its
// counters and waits foldWait (2 s) for each. It asked them one after
// the other, so k silent workers made one fold last k x 2 s (16 s with 8
// stuck lcores, 64 s with 32), and the stall watch, which judges only at
// the end of a fold, withdrew the VIPs that much after stall_timeout
// while the stuck queues' flows were black-holed (e86aa16 doubled it
// from k x 1 s). The requests must be pending together.
//
// Three silent workers, 1 to 3; the test polls only 2 and 3 while 1
// stays silent. Asked one after the other, 2 and 3 are never asked while
// the fold waits for 1; asked at once, they answer at their first poll.
func TestFoldAsksSilentWorkersAtOnce(t *testing.T) {
	f := newStallFixture(t, baseConfig)
	key, err := flow.ParseKey(f.cfg.Dataplane.HashKey)
	if err != nil {
		t.Fatal(err)
	}
	silent := []*dataplane.Worker{f.stuck}
	for id := 2; id <= 3; id++ {
		w, err := dataplane.NewWorker(id, f.shared, f.cfg.Conntrack, key, [6]byte{2, 0, 0, 0, 0, byte(id)})
		if err != nil {
			t.Fatal(err)
		}
		f.plane.workers = append(f.plane.workers, w)
		silent = append(silent, w)
	}
	f.plane.foldWait = time.Minute // longer than the test: only answers end the fold
	counters := make([]dataplane.Counters, len(f.plane.workers))
	done := make(chan struct{})
	go func() { defer close(done); f.plane.signalStep(counters) }()
	// Poll workers 2 and 3 until both answered the fold, for up to 10 s.
	deadline := time.Now().Add(10 * time.Second)
	answeredWhileOneSilent := false
	for time.Now().Before(deadline) {
		silent[1].Idle(conntrack.Time(0))
		silent[2].Idle(conntrack.Time(0))
		if silent[1].Answers() > 0 && silent[2].Answers() > 0 {
			answeredWhileOneSilent = true
			break
		}
		runtime.Gosched()
	}
	// End the fold: poll all three.
	end := time.Now().Add(30 * time.Second)
	for ended := false; !ended; {
		select {
		case <-done:
			ended = true
		default:
			if time.Now().After(end) {
				t.Fatal("the fold did not end though every worker is polled")
			}
			for _, w := range silent {
				w.Idle(conntrack.Time(0))
			}
			runtime.Gosched()
		}
	}
	if !answeredWhileOneSilent {
		t.Errorf("workers 2 and 3, polled, answered no fold request in 10 s while worker 1 was silent (answers %d, %d): the fold asks one worker after the other, and each silent one delays the rest (and the stall verdict) by foldWait", silent[1].Answers(), silent[2].Answers())
	}
}
