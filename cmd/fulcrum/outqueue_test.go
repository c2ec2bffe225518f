package main

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// TestOutQueueStalledReader: while the reader of the daemon's stderr
// reads nothing, writes return at once; what did not fit is dropped and
// counted, and once the reader reads again the log says how many records
// were lost, where they were lost, and goes on in order.
func TestOutQueueStalledReader(t *testing.T) {
	pr, pw := io.Pipe() // a write blocks until the test reads
	q := newOutQueue(pw, 1024, func(n uint64) []byte { return fmt.Appendf(nil, "dropped=%d\n", n) })
	const n = 500
	for i := 0; i < n; i++ {
		done := make(chan struct{})
		go func() { fmt.Fprintf(q, "rec %04d\n", i); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("write %d blocked on a stalled reader", i)
		}
	}
	dropped := q.Dropped()
	if dropped == 0 {
		t.Fatalf("%d records of 9 bytes fit a 1 KiB queue behind a stalled reader", n)
	}
	out := make(chan []byte)
	go func() { b, _ := io.ReadAll(pr); out <- b }()
	if !q.flush(10 * time.Second) {
		t.Fatal("queue not flushed once the reader reads")
	}
	fmt.Fprintf(q, "after\n")
	if !q.flush(10 * time.Second) {
		t.Fatal("queue not flushed")
	}
	pw.Close()
	lines := strings.Split(strings.TrimSuffix(string(<-out), "\n"), "\n")
	if lines[len(lines)-1] != "after" {
		t.Fatalf("last line %q, want after", lines[len(lines)-1])
	}
	// Records in order, and before the first record that fit after a
	// loss (or before "after"), a notice: the writer goroutine may free
	// room more than once, so there may be several. They add up.
	var recs int
	var noticed uint64
	last, notice := -1, false
	for _, l := range lines[:len(lines)-1] {
		var k int
		var m uint64
		if _, err := fmt.Sscanf(l, "dropped=%d", &m); err == nil {
			noticed += m
			notice = true
			continue
		}
		if _, err := fmt.Sscanf(l, "rec %d", &k); err != nil || k <= last {
			t.Fatalf("line %q out of order or not a record (after %d)", l, last)
		}
		if k != last+1 && !notice {
			t.Fatalf("records %d..%d lost with no notice before rec %d", last+1, k-1, k)
		}
		last, recs, notice = k, recs+1, false
	}
	if last != n-1 && !notice {
		t.Fatalf("records %d..%d lost with no notice before after", last+1, n-1)
	}
	if noticed != dropped {
		t.Fatalf("notices count %d dropped records, the queue %d", noticed, dropped)
	}
	if uint64(recs)+dropped != n {
		t.Fatalf("%d records written and %d dropped, want %d in all", recs, dropped, n)
	}
}

// TestOutQueueAllocatesNothing: the --stats-json line goes through the
// queue every interval; that path allocates nothing (see
// TestStatsPathAllocatesNothing).
func TestOutQueueAllocatesNothing(t *testing.T) {
	var sink bytes.Buffer
	sink.Grow(1 << 20)
	q := newOutQueue(&sink, 64<<10, nil)
	line := []byte(strings.Repeat("x", 300) + "\n")
	q.Write(line)
	q.flush(10 * time.Second)
	if a := testing.AllocsPerRun(100, func() { q.Write(line) }); a != 0 {
		t.Fatalf("%v allocations a write", a)
	}
}

// TestFatalFlushWritesOutAndIsBounded: DPDK's fatal hook (fatalFlush)
// returns once what is queued has reached the reader, and behind a
// stalled reader it waits out its budget (a panic then ends the process,
// which an exit's flush would not wait longer for either). No upper bound
// on time is asserted: the budget being counted from the first call (a
// panic's many lines do not each wait a whole one) is read in the code.
func TestFatalFlushWritesOutAndIsBounded(t *testing.T) {
	var got bytes.Buffer
	q := newOutQueue(&got, 1024, nil)
	hook := fatalFlush(q, time.Minute)
	fmt.Fprintf(q, "PANIC in f():\n")
	hook()
	if got.String() != "PANIC in f():\n" {
		t.Fatalf("after the hook the reader has %q", got.String())
	}

	pr, pw := io.Pipe() // a stalled reader: nothing reads pr
	defer pr.Close()
	q = newOutQueue(pw, 1024, nil)
	const budget = 300 * time.Millisecond
	hook = fatalFlush(q, budget)
	fmt.Fprintf(q, "PANIC in f():\n")
	start := time.Now()
	hook()
	if waited := time.Since(start); waited < budget {
		t.Fatalf("the hook returned after %v behind a stalled reader, before its budget of %v, with the record unwritten", waited, budget)
	}
}
