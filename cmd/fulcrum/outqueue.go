package main

import (
	"bytes"
	"io"
	"sync"
	"time"
)

// outQueue stands between the daemon and a stream it writes to (stderr
// for the log, stdout for --stats-json) whose reader may stop reading
// without going away: `fulcrum run 2>&1 | less` left open, a stalled
// journald, a log file on a full network disk. Writing straight to such a
// stream blocks as soon as the pipe is full, and the daemon logs under
// the control plane's lock and as the main loop's first act on a signal:
// one stalled reader then froze the admin API, health verdicts, reloads
// and SIGTERM (no withdraw, no exit).
//
// Write never blocks: a record is copied whole into a fixed ring (no
// allocation in steady state) and written out by a goroutine of the
// queue's own; a record that does not fit is dropped and counted, and
// the next record that fits is preceded by notice(count), if notice is
// set. The queue keeps the order of what it accepts.
type outQueue struct {
	w      io.Writer
	notice func(dropped uint64) []byte

	mu      sync.Mutex
	wake    *sync.Cond // the writer goroutine waits on it for data
	ring    []byte
	head, n int    // the queued bytes: ring[head:head+n], wrapping
	busy    bool   // the writer goroutine holds bytes it took out
	dropped uint64 // records dropped since the last accepted one
	total   uint64 // records dropped since start
	err     error  // the last write error of w

	progress chan struct{} // a write to w ended (for flush)
	scratch  []byte
}

// newOutQueue starts the queue of w, holding at most size bytes.
func newOutQueue(w io.Writer, size int, notice func(uint64) []byte) *outQueue {
	q := &outQueue{w: w, notice: notice, ring: make([]byte, size), progress: make(chan struct{}, 1),
		scratch: make([]byte, min(size, 64<<10))}
	q.wake = sync.NewCond(&q.mu)
	go q.run()
	return q
}

// Write queues p whole, or drops it if the queue has no room for it. It
// never blocks on w; it reports w's last write error, if any.
func (q *outQueue) Write(p []byte) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.dropped > 0 && q.notice != nil {
		if nb := q.notice(q.dropped); len(nb)+len(p) <= len(q.ring)-q.n {
			q.put(nb)
			q.dropped = 0
		}
	}
	if len(p) > len(q.ring)-q.n || q.dropped > 0 && q.notice != nil {
		q.dropped++
		q.total++
		return len(p), q.err
	}
	q.dropped = 0
	q.put(p)
	q.wake.Signal()
	return len(p), q.err
}

// put copies p into the ring; the caller checked the room.
func (q *outQueue) put(p []byte) {
	tail := (q.head + q.n) % len(q.ring)
	c := copy(q.ring[tail:], p)
	copy(q.ring, p[c:])
	q.n += len(p)
}

// Dropped is the number of records dropped since start.
func (q *outQueue) Dropped() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.total
}

func (q *outQueue) run() {
	for {
		q.mu.Lock()
		for q.n == 0 {
			q.busy = false
			q.wake.Wait()
		}
		q.busy = true
		k := copy(q.scratch, q.ring[q.head:min(q.head+q.n, len(q.ring))])
		q.head = (q.head + k) % len(q.ring)
		q.n -= k
		q.mu.Unlock()
		_, err := q.w.Write(q.scratch[:k])
		q.mu.Lock()
		q.err = err
		if q.n == 0 {
			q.busy = false
		}
		q.mu.Unlock()
		select {
		case q.progress <- struct{}{}:
		default:
		}
	}
}

// flush waits until everything queued is written, or for at most d (a
// reader that stopped reading must not keep the daemon from exiting). It
// reports whether the queue is empty.
func (q *outQueue) flush(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		q.mu.Lock()
		empty := q.n == 0 && !q.busy
		q.mu.Unlock()
		if empty {
			return true
		}
		select {
		case <-q.progress:
		case <-t.C:
			return false
		}
	}
}

const (
	// outQueueBytes is what stderr's and stdout's queues hold each: at
	// least several thousand log records, or a minute of --stats-json
	// lines of a few workers every second.
	outQueueBytes = 1 << 20
	// exitFlushTimeout bounds how long an exiting daemon waits for a
	// stalled reader to take what is queued.
	exitFlushTimeout = 2 * time.Second
)

// fatalFlush is the hook DPDK runs after each of its last words
// (dpdk.SetFatalHook: rte_panic's and rte_exit's lines, right before
// they end the process without running Go's deferred calls): it waits
// for q to be written out, for at most budget from its first call in
// all, so that a stalled reader delays the end by no more than an exit
// does.
func fatalFlush(q *outQueue, budget time.Duration) func() {
	var once sync.Once
	var deadline time.Time
	return func() {
		once.Do(func() { deadline = time.Now().Add(budget) })
		if d := time.Until(deadline); d > 0 {
			q.flush(d)
		}
	}
}

// droppedNotice formats the warning the log's queue writes where records
// were dropped, as a record of the daemon's log format.
func droppedNotice(format, stream string) func(uint64) []byte {
	return func(n uint64) []byte {
		var b bytes.Buffer
		if l, err := newLogger(format, "warn", &b); err == nil {
			l.Warn("log records dropped: "+stream+" was not being read", "dropped", n)
		}
		return b.Bytes()
	}
}
