package main

import (
	"sync"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/dataplane"
)

// gateSnap is a worker that answers only once every worker of the reading
// has been asked (or its own timeout passes): a reader that asks them one
// after the other gets no answer from any but the last.
type gateSnap struct {
	mu      *sync.Mutex
	asked   *int
	all     chan struct{}
	n       int
	answers int
}

func (g *gateSnap) Snapshot(dst *dataplane.Counters, timeout time.Duration) bool {
	g.mu.Lock()
	if *g.asked++; *g.asked == g.n {
		close(g.all)
	}
	g.mu.Unlock()
	select {
	case <-g.all:
		g.answers++
		dst.RxPackets = uint64(g.answers)
		return true
	case <-time.After(timeout):
		return false
	}
}

// With k stuck workers the stats reading (on the daemon's main loop) took
// k seconds: each was asked in turn and waited for a second. They are
// asked at once now: every one is asked before the first answers.
func TestStatsReaderAsksWorkersAtOnce(t *testing.T) {
	const k = 3
	var mu sync.Mutex
	asked := 0
	all := make(chan struct{})
	ws := make([]snapshotter, k)
	gs := make([]*gateSnap, k)
	for i := range ws {
		gs[i] = &gateSnap{mu: &mu, asked: &asked, all: all, n: k}
		ws[i] = gs[i]
	}
	r := newStatsReader(ws)
	t.Cleanup(r.stop)
	cs := r.read()
	for i := range cs {
		if cs[i].RxPackets != 1 {
			t.Errorf("worker %d: rx %d, want 1: it answered no snapshot (asked one after the other, never all at once)", i, cs[i].RxPackets)
		}
	}
}

// answerSnap answers at once.
type answerSnap struct{}

func (answerSnap) Snapshot(dst *dataplane.Counters, _ time.Duration) bool {
	dst.RxPackets++
	return true
}

// Asking the workers at once allocates nothing per reading (issue 13's
// quiet steady state: the reading runs every stats interval).
func TestStatsReaderReadAllocatesNothing(t *testing.T) {
	r := newStatsReader([]snapshotter{answerSnap{}, answerSnap{}, answerSnap{}})
	t.Cleanup(r.stop)
	r.read()
	if a := testing.AllocsPerRun(200, func() { r.read() }); a != 0 {
		t.Fatalf("read: %.1f allocations a reading, want 0", a)
	}
}
