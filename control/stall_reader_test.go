package control

import (
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/dataplane"
)

// readStuckWorker is what a status read or a /metrics scrape does with a
// worker not yet judged stalled (StatusInto: Snapshot with a 2 s wait).
func readStuckWorker(w *dataplane.Worker, done chan<- struct{}) {
	var c dataplane.Counters
	w.Snapshot(&c, 2*time.Second)
	close(done)
}

// waitReaderHoldsTurn polls the goroutine stacks until readStuckWorker is
// inside Snapshot's wait (past snapMu: sleeping, not locking).
func waitReaderHoldsTurn(t *testing.T) {
	t.Helper()
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		n := runtime.Stack(buf, true)
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			if strings.Contains(g, "control.readStuckWorker") && strings.Contains(g, "time.Sleep") && !strings.Contains(g, "Mutex") {
				return
			}
		}
		runtime.Gosched()
	}
	t.Fatal("reader never took its turn")
}

// (Found by a review of the pause rule.) A worker stuck for well over
// stall_timeout while status reads come in
// (an operator's `watch fulcrumctl status`, Prometheus, several scrapers):
// each fold queues behind a reader's 2 s Snapshot wait for that worker
// (readers take turns on snapMu), so its own wait plus the queueing
// exceeds foldWait+signalPeriod and the pause rule skips the verdict.
// With a reader always ahead, the stuck worker is never judged stalled
// and the VIPs stay announced while its queue's flows are black-holed.
func TestStallNotHiddenByQueuedReaders(t *testing.T) {
	f := newStallFixture(t, baseConfig)
	var off atomic.Int64
	f.plane.now = func() time.Time { return time.Now().Add(time.Duration(off.Load())) }
	f.plane.WorkersStarted()
	off.Add(int64(10 * time.Second)) // worker 1 silent for 10 s, stall_timeout 5 s
	for round := range 3 {
		done := make(chan struct{})
		go readStuckWorker(f.stuck, done)
		waitReaderHoldsTurn(t)
		f.fold()
		<-done
		if st := f.stalled(); slices.Equal(st, []int{1}) {
			return
		}
		t.Logf("round %d: worker 1 silent %v, not judged (fold queued behind a status read)", round, f.plane.now().Sub(f.plane.stall.answered[1]).Round(time.Second))
	}
	t.Fatalf("worker 1 silent for over stall_timeout through 3 folds, each behind a status read: stalled %v, announced %v; want [1], none", f.stalled(), lastAnnounced(f.calls))
}
