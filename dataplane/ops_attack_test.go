package dataplane

import (
	"sync"
	"testing"
)

// runOp posts op and serves it to the end, counting the steps.
func runOp(t *testing.T, r *rig, op *Op) {
	t.Helper()
	if err := r.w.Post(op); err != nil {
		t.Fatal(err)
	}
	for steps := 0; !op.done.Load(); steps++ {
		if steps > r.w.ct.Buckets()+1 {
			t.Fatal("the op does not finish")
		}
		r.w.serveOp(r.now)
	}
}

// TestListOpHostileArguments: cursors before or past the table finish at
// once with an empty page; limits below one bucket are raised to it and
// huge ones do not allocate beyond maxListEntries.
func TestListOpHostileArguments(t *testing.T) {
	r := newRig(t, testConfig)
	fillConntrack(r, 500)
	nb := r.w.ct.Buckets()
	for _, from := range []int{-1, -1 << 62, nb, nb + 1, 1 << 62} {
		op := ListOp(from, 100, -1, -1)
		runOp(t, r, op)
		if len(op.Conns) != 0 || !op.Done {
			t.Errorf("cursor %d: %d entries, done %v; want an empty last page", from, len(op.Conns), op.Done)
		}
	}
	for _, limit := range []int{-1 << 62, -1, 0, 1} {
		op := ListOp(0, limit, -1, -1)
		runOp(t, r, op)
		if len(op.Conns) == 0 || len(op.Conns) > 8 || op.Done {
			t.Errorf("limit %d: page of %d entries (done %v), want 1..8, one bucket", limit, len(op.Conns), op.Done)
		}
	}
	for _, limit := range []int{maxListEntries + 1, 1 << 40, int(^uint(0) >> 1)} {
		op := ListOp(0, limit, -1, -1)
		if cap(op.Conns) > maxListEntries {
			t.Errorf("limit %d: a page of capacity %d, bound %d", limit, cap(op.Conns), maxListEntries)
		}
		runOp(t, r, op)
		if len(op.Conns) < 400 || !op.Done {
			t.Errorf("limit %d: %d entries, done %v", limit, len(op.Conns), op.Done)
		}
	}
	// Unknown VIP and backend ids match nothing.
	for _, sel := range [][2]int64{{9999, -1}, {-1, 1 << 40}, {1 << 20, 1 << 20}} {
		op := ListOp(0, 100, sel[0], sel[1])
		runOp(t, r, op)
		if len(op.Conns) != 0 || !op.Done {
			t.Errorf("vip %d backend %d: %d entries", sel[0], sel[1], len(op.Conns))
		}
	}
}

// TestCaptureStopDetaches: Stop, called twice and from two goroutines at
// once (the duration's timer and the handler), leaves every worker's
// hook nil, and a new capture can start.
func TestCaptureStopDetaches(t *testing.T) {
	r := newRig(t, testConfig)
	ws := []*Worker{r.w}
	for range 50 {
		cp, err := StartCapture(ws, CaptureFilter{Rx: true})
		if err != nil {
			t.Fatal(err)
		}
		if !r.w.Capturing() {
			t.Fatal("no hook installed")
		}
		var wg sync.WaitGroup
		wg.Go(cp.Stop)
		wg.Go(cp.Stop)
		wg.Wait()
		cp.Stop()
		if r.w.Capturing() {
			t.Fatal("the hook is still set after Stop")
		}
	}
	// A stale Stop does not detach the next capture.
	old, _ := StartCapture(ws, CaptureFilter{Rx: true})
	old.Stop()
	cp, err := StartCapture(ws, CaptureFilter{Rx: true})
	if err != nil {
		t.Fatal(err)
	}
	old.Stop()
	if !r.w.Capturing() {
		t.Fatal("an earlier capture's Stop detached the running one")
	}
	cp.Stop()
}
