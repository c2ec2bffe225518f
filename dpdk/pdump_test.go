//go:build dpdk

package dpdk

import (
	"testing"
	"time"
)

// TestPdumpInit: the pdump handler registers and unregisters (the tests'
// EAL runs without hugepages; the multi-process channel exists anyway).
func TestPdumpInit(t *testing.T) {
	if err := PdumpInit(); err != nil {
		t.Fatalf("PdumpInit: %v", err)
	}
	if err := PdumpUninit(); err != nil {
		t.Fatalf("PdumpUninit: %v", err)
	}
}

// TestRemoveCallbackWaits: removing an rx callback (as rte_pdump does when
// dpdk-dumpcap stops) returns only after a burst running the callback has
// left it, so the capture's ring and mempool can be freed safely.
func TestRemoveCallbackWaits(t *testing.T) {
	startPort(t, nullPort, PortConf{RxQueues: 1, TxQueues: 1})
	if err := testAddBlockingRxCallback(nullPort); err != nil {
		t.Fatalf("add rx callback: %v", err)
	}
	b, err := NewBurst(4)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free()
	rxDone := make(chan int, 1)
	go func() { rxDone <- RxBurst(nullPort, 0, b) }()
	waitFor(t, "the burst to enter the callback", testCallbackEntered)

	type result struct {
		done bool
		err  error
	}
	removed := make(chan result, 1)
	go func() {
		d, err := testRemoveRxCallback(nullPort)
		removed <- result{d, err}
	}()
	// The removal waits for the burst; without the wait it returns at once
	// and never sets the flag.
	ok := waitForOK(testQuiesceWaiting)
	testReleaseCallback()
	n := <-rxDone
	r := <-removed
	b.FreeMbufs(0, n)
	if r.err != nil {
		t.Fatalf("remove rx callback: %v", r.err)
	}
	if !ok || !r.done {
		t.Fatalf("the removal returned while a burst was in the callback (waited: %v, callback done: %v)", ok, r.done)
	}
}

// waitForOK polls cond for up to 10 s.
func waitForOK(cond func() bool) bool {
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !waitForOK(cond) {
		t.Fatalf("timed out waiting for %s", what)
	}
}
