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
	var recs int
	last := -1
	for _, l := range lines[:len(lines)-2] {
		var k int
		if _, err := fmt.Sscanf(l, "rec %d", &k); err != nil || k <= last {
			t.Fatalf("line %q out of order or not a record (after %d)", l, last)
		}
		last, recs = k, recs+1
	}
	if got, want := lines[len(lines)-2:], []string{fmt.Sprintf("dropped=%d", dropped), "after"}; got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("last lines %q, want %q", got, want)
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
