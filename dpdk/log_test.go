//go:build dpdk

package dpdk

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// recordsOf returns the records whose message is msg.
func recordsOf(mu *sync.Mutex, recs *[]threadRecord, msg string) []threadRecord {
	mu.Lock()
	defer mu.Unlock()
	var out []threadRecord
	for _, r := range *recs {
		if r.msg == msg {
			out = append(out, r)
		}
	}
	return out
}

// recordLogs sends DPDK's log to a threadRecorder until the test ends.
func recordLogs(t *testing.T) (*sync.Mutex, *[]threadRecord) {
	t.Helper()
	var mu sync.Mutex
	var recs []threadRecord
	if err := SetLogger(slog.New(threadRecorder{&mu, &recs})); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { SetLogger(nil) })
	return &mu, &recs
}

// threadsNamed lists this process's threads named name.
func threadsNamed(name string) []string {
	ents, _ := os.ReadDir("/proc/self/task")
	var out []string
	for _, e := range ents {
		comm, err := os.ReadFile(filepath.Join("/proc/self/task", e.Name(), "comm"))
		if err == nil && strings.TrimSpace(string(comm)) == name {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestControlThreadLogNotHandledOnIt: a line the EAL's control threads log
// (interrupts and link events, multi-process requests such as dpdk-pdump's,
// telemetry) reaches the logger, but never on the control thread: a thread
// the Go runtime started from it would keep its CPUs and name. 50 lines
// from 50 control threads while goroutines churn, and no thread named as
// they were is left after they ended.
func TestControlThreadLogNotHandledOnIt(t *testing.T) {
	mu, recs := recordLogs(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				done := make(chan struct{})
				go func() { close(done) }()
				<-done
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	for i := range 50 {
		msg := fmt.Sprintf("control thread probe %d of %d", i, os.Getpid())
		tid, err := probeCtrlLog(msg, 1, false)
		if err != nil {
			t.Fatal(err)
		}
		var got []threadRecord
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if got = recordsOf(mu, recs, msg); len(got) > 0 {
				break
			}
		}
		if len(got) != 1 {
			t.Fatalf("%q: %d records within 10 s, want 1", msg, len(got))
		}
		if got[0].tid == tid {
			t.Fatalf("%q handled on the control thread %d that logged it", msg, tid)
		}
	}
	if left := threadsNamed("fl-log-probe"); len(left) > 0 {
		t.Errorf("threads %v are named after the ended control threads: started from one", left)
	}
}

// TestGoThreadLogBeforeReturn: a line DPDK logs in a call from Go reaches
// the logger before the call returns, on the calling thread, in order
// with the program's own lines.
func TestGoThreadLogBeforeReturn(t *testing.T) {
	mu, recs := recordLogs(t)
	for i := range 20 {
		msg := fmt.Sprintf("go thread probe %d of %d", i, os.Getpid())
		var tid int
		func() {
			// Locked, so that the thread the call ran on is the one
			// read here.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			tid = unix.Gettid()
			probeLog(msg, false)
		}()
		got := recordsOf(mu, recs, msg)
		if len(got) != 1 || got[0].tid != tid {
			t.Fatalf("%q: records %v right after the call, want one on thread %d", msg, got, tid)
		}
	}
}

// TestControlThreadLogOverflowCounted: while the logger is stuck, the
// queue of the control threads' lines fills; what does not fit is dropped
// and counted, never blocks the thread that logs, and every line is either
// handed on or counted.
func TestControlThreadLogOverflowCounted(t *testing.T) {
	// 400 lines of about 1 KiB: more than the 256 KiB queue.
	msg := "overflow probe " + strings.Repeat("x", 1000)
	whole, cut, dropped := overflow(t, msg, 400)
	if dropped == 0 || whole == 0 || cut != 0 {
		t.Errorf("%d lines handed on, %d cut, %d dropped: want some handed on whole and some dropped", whole, cut, dropped)
	}
}

// TestControlThreadLongLineOverflowCounted: a line longer than the log
// stream's buffer (8 KiB) reaches the queue in two pieces. When the queue
// fills between them, the line is dropped whole and counted once: never
// handed on cut (its head glued to the next line logged), never counted
// twice. "USER1: " and 9,000 bytes and a newline are written as 8,192
// bytes, then 816: 28 lines fit the queue whole, the 29th's head fits and
// its tail does not.
func TestControlThreadLongLineOverflowCounted(t *testing.T) {
	msg := "long line probe " + strings.Repeat("x", 9000-16)
	whole, cut, dropped := overflow(t, msg, 40)
	if cut != 0 || dropped == 0 {
		t.Errorf("%d lines handed on whole, %d cut, %d dropped: want none cut, some dropped", whole, cut, dropped)
	}
}

// overflow sends sent lines of msg from a control thread while the
// logger is stuck, then lets it go on, and returns how many records hold
// msg whole, how many hold a part of it, and how many lines the queue
// counted dropped. It fails t unless every line is handed on whole or
// counted dropped.
func overflow(t *testing.T, msg string, sent int) (whole, cut, dropped int) {
	t.Helper()
	// Read before the logger is stuck: the reader holds the queue while
	// it hands lines on.
	lines0, _ := LogDropped()
	mu, recs, open := stuckLogger(t)
	ctrlLog(t, open, msg, sent)
	open()
	FlushLog()
	lines1, bytes1 := LogDropped()
	dropped = int(lines1 - lines0)
	// A line after them comes out as itself: no piece of theirs was
	// left unfinished to be glued onto it.
	const after = "the line after the overflow"
	ctrlLog(t, open, after, 1)
	FlushLog()
	if got := recordsOf(mu, recs, after); len(got) != 1 {
		t.Errorf("%d records of the line after the overflow, want 1", len(got))
	}
	head := msg[:16]
	mu.Lock()
	for _, r := range *recs {
		switch {
		case r.msg == msg:
			whole++
		case strings.Contains(r.msg, head) || strings.Contains(r.msg, msg[len(msg)-16:]) && !strings.HasPrefix(r.msg, "logger stuck probe"):
			cut++
		}
	}
	mu.Unlock()
	if whole+dropped != sent {
		t.Errorf("%d lines handed on whole and %d dropped (%d bytes in all), want %d in all", whole, dropped, bytes1, sent)
	}
	return whole, cut, dropped
}

// ctrlLog is probeCtrlLog(m, n, false), failing t, after open lets the
// logger go on, if the control thread has not returned within 10 s: one
// that called the logger itself would wait at its gate.
func ctrlLog(t *testing.T, open func(), m string, n int) {
	t.Helper()
	errc := make(chan error, 1)
	go func() { _, err := probeCtrlLog(m, n, false); errc <- err }()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		open()
		t.Fatal("the control thread did not return within 10 s: it waits for the logger")
	}
}

// gatedRecorder is a threadRecorder that waits for gate before it returns
// from the record whose message is stuck.
type gatedRecorder struct {
	threadRecorder
	stuck string
	gate  chan struct{}
}

func (h gatedRecorder) Handle(ctx context.Context, r slog.Record) error {
	h.threadRecorder.Handle(ctx, r)
	if r.Message == h.stuck {
		<-h.gate
	}
	return nil
}

// TestPanicLogFlushedBeforeAbort: rte_panic logs its reason at critical
// level and a stack, then calls abort(), which ends the process without
// running Go's deferred calls, so a logger that queues its records (the
// daemon's stderr queue) would lose the reason. After the first line at
// critical level, each line runs the fatal hook before its write returns.
// A child panics from a Go thread, another from one of the EAL's control
// threads (whose lines are queued in C); each logs into a buffer that
// only the hook writes out, to stdout. Both buffers must hold the panic's
// "PANIC in" line and its reason, and the child must not exit 0.
func TestPanicLogFlushedBeforeAbort(t *testing.T) {
	// ctrl-full: the queue is full when the control thread panics (its
	// reader slow, behind a logger that takes 300 ms to go on): the
	// last words wait for room, and are not dropped.
	for _, where := range []string{"go", "ctrl", "ctrl-full"} {
		t.Run(where, func(t *testing.T) {
			prefix := fmt.Sprintf("fulcrum-test-panic-%s-%d", where, os.Getpid())
			t.Cleanup(func() {
				if dir := filepath.Join(runtimeBase(), prefix); dirExists(dir) {
					RemoveRuntimeDir(dir)
				}
			})
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), ealPanicChild+"="+where+":"+prefix)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err == nil {
				t.Fatalf("the child exited 0 after rte_panic")
			}
			reason := panicReason(prefix)
			var panicIn, why bool
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				var rec struct{ Msg, Level, Subsystem string }
				if json.Unmarshal([]byte(line), &rec) != nil {
					continue
				}
				panicIn = panicIn || strings.HasPrefix(rec.Msg, "PANIC in ") && rec.Level == "ERROR"
				why = why || rec.Msg == reason && rec.Level == "ERROR"
			}
			if !panicIn || !why {
				t.Errorf("the records flushed before the abort hold the \"PANIC in\" line: %v, the reason %q: %v\nstdout:\n%s\nstderr (first 2 KiB):\n%.2048s", panicIn, reason, why, out, stderr.String())
			}
		})
	}
}

// ealPanicChild makes TestMain start an EAL, log into a buffer that only
// the fatal hook writes out (to stdout), and call rte_panic from a Go
// thread ("go:PREFIX") or an EAL control thread ("ctrl:PREFIX").
const ealPanicChild = "FULCRUM_DPDK_EAL_PANIC_CHILD"

func panicReason(prefix string) string { return "probe panic of " + prefix }

func panicChild(arg string) int {
	where, prefix, _ := strings.Cut(arg, ":")
	var mu sync.Mutex
	var buf bytes.Buffer
	gate := make(chan struct{})
	stuck := "logger stuck probe"
	h := gatedHandler{slog.NewJSONHandler(lockedWriter{&mu, &buf}, nil), stuck, gate}
	if err := SetLogger(slog.New(h)); err != nil {
		fmt.Println(err)
		return 1
	}
	// A slow reader of the program's log, the first time: the thread
	// that panicked must wait for the hook, not abort meanwhile.
	var slow sync.Once
	SetFatalHook(func() {
		slow.Do(func() { time.Sleep(300 * time.Millisecond) })
		mu.Lock()
		defer mu.Unlock()
		os.Stdout.Write(buf.Bytes())
		buf.Reset()
	})
	if err := InitEAL([]string{"-l", "0", "--no-huge", "-m", "64", "--no-pci", "--file-prefix", prefix, "--log-level", "warning"}); err != nil {
		fmt.Println("eal error:", err)
		return 1
	}
	switch where {
	case "go":
		probeLog(panicReason(prefix), true)
	case "ctrl":
		probeCtrlLog(panicReason(prefix), 1, true)
	case "ctrl-full":
		// The reader waits in the logger while the queue fills.
		probeCtrlLog(stuck, 1, false)
		probeCtrlLog("filler "+strings.Repeat("x", 1000), 400, false)
		go func() {
			time.Sleep(300 * time.Millisecond)
			close(gate)
		}()
		probeCtrlLog(panicReason(prefix), 1, true)
	}
	return 0 // not reached
}

// gatedHandler waits for gate before it returns from the record whose
// message is stuck.
type gatedHandler struct {
	slog.Handler
	stuck string
	gate  chan struct{}
}

func (h gatedHandler) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Message == h.stuck {
		<-h.gate
	}
	return err
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// TestCriticalLineNotLastWords: a line at critical level is not DPDK's
// last words unless it is rte_panic's or rte_exit's. The EAL's -v
// (accepted in [eal] extra_args) logs "RTE Version" at critical level so
// that it is always seen, in a healthy start; were it taken for last
// words, the daemon's flush would spend its 2 s at start-up (a real
// panic later would not be flushed), and every later line of the EAL's
// control threads would wait for the reader. A child starts with -v and
// logs a line from Go and one from a control thread: the fatal hook must
// not run.
func TestCriticalLineNotLastWords(t *testing.T) {
	prefix := fmt.Sprintf("fulcrum-test-version-%d", os.Getpid())
	t.Cleanup(func() {
		if dir := filepath.Join(runtimeBase(), prefix); dirExists(dir) {
			RemoveRuntimeDir(dir)
		}
	})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), ealVersionChild+"="+prefix)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); !strings.HasSuffix(got, "fatal hook calls: 0, version logged: true") {
		t.Errorf("the child says %q: want no fatal hook call, and -v's line logged", got)
	}
}

// ealVersionChild makes TestMain start an EAL with -v, log a line from
// Go and one from a control thread, and print how often the fatal hook
// ran.
const ealVersionChild = "FULCRUM_DPDK_EAL_VERSION_CHILD"

func versionChild(prefix string) int {
	var mu sync.Mutex
	var recs []threadRecord
	if err := SetLogger(slog.New(threadRecorder{&mu, &recs})); err != nil {
		fmt.Println(err)
		return 1
	}
	var calls atomic.Int64
	SetFatalHook(func() { calls.Add(1) })
	if err := InitEAL([]string{"-v", "-l", "0", "--no-huge", "-m", "64", "--no-pci", "--file-prefix", prefix, "--log-level", "warning"}); err != nil {
		fmt.Println("eal error:", err)
		return 1
	}
	probeLog("a line after start-up", false)
	if _, err := probeCtrlLog("a control thread's line", 1, false); err != nil {
		fmt.Println(err)
		return 1
	}
	FlushLog()
	dir := RuntimeDir()
	CleanupEAL()
	RemoveRuntimeDir(dir)
	version := false
	mu.Lock()
	for _, r := range recs {
		version = version || strings.HasPrefix(r.msg, "RTE Version")
	}
	mu.Unlock()
	fmt.Printf("fatal hook calls: %d, version logged: %v\n", calls.Load(), version)
	return 0
}

// stuckLogger makes the logger stuck on a control thread's line, and
// returns its records and a func that lets it go on (also run at the
// test's end).
func stuckLogger(t *testing.T) (*sync.Mutex, *[]threadRecord, func()) {
	t.Helper()
	var mu sync.Mutex
	var recs []threadRecord
	gate := make(chan struct{})
	stuck := "logger stuck probe " + fmt.Sprint(os.Getpid())
	if err := SetLogger(slog.New(gatedRecorder{threadRecorder{&mu, &recs}, stuck, gate})); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(func() { open(); SetLogger(nil) })
	ctrlLog(t, open, stuck, 1)
	for deadline := time.Now().Add(10 * time.Second); len(recordsOf(&mu, &recs, stuck)) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first line did not reach the logger within 10 s")
		}
	}
	return &mu, &recs, open
}

// TestLongLineHeadDroppedTailNotHandedOn: the queue is full, so the first
// piece of a long control-thread line is dropped; the reader then takes
// the queue (the drop itself wakes it) before the line's last piece
// comes. That piece must be dropped too and the line counted once, not
// handed on as a line of its own.
func TestLongLineHeadDroppedTailNotHandedOn(t *testing.T) {
	lines0, _ := LogDropped() // before the reader is stuck holding the queue
	mu, recs, open := stuckLogger(t)
	const fill = 400 // 1 KiB lines: more than the 256 KiB queue
	if _, err := probeCtrlLog("filler "+strings.Repeat("x", 1000), fill, false); err != nil {
		t.Fatal(err)
	}
	finish, err := probeCtrlHead("long " + strings.Repeat("y", 9000))
	if err != nil {
		t.Fatal(err)
	}
	open()
	FlushLog() // the take between the line's pieces
	finish()
	FlushLog()
	lines1, _ := LogDropped()
	mu.Lock()
	defer mu.Unlock()
	whole, parts := 0, 0
	for _, r := range *recs {
		if strings.HasPrefix(r.msg, "filler ") {
			whole++
		}
		if strings.Contains(r.msg, "yyyyyyyyyyyyyyyy") {
			parts++
		}
	}
	if parts != 0 {
		t.Errorf("%d records hold a part of the long line whose head was dropped", parts)
	}
	if got := whole + int(lines1-lines0); got != fill+1 {
		t.Errorf("%d filler lines handed on + %d lines counted dropped = %d, want %d", whole, lines1-lines0, got, fill+1)
	}
}

// TestRolledBackLinesCounted: a control thread's message "short" NL and
// 9,000 bytes comes as a first piece of 8 KiB that holds the whole line
// "USER1: short" and the head of the long one. When the queue fills
// before the last piece, the first piece is taken back, and with it the
// whole line, which must be counted dropped.
func TestRolledBackLinesCounted(t *testing.T) {
	lines0, _ := LogDropped()
	mu, recs, open := stuckLogger(t)
	const sent = 40
	long := strings.Repeat("z", 9000-6)
	if _, err := probeCtrlLog("short\n"+long, sent, false); err != nil {
		t.Fatal(err)
	}
	open()
	FlushLog()
	lines1, _ := LogDropped()
	mu.Lock()
	defer mu.Unlock()
	short, whole := 0, 0
	for _, r := range *recs {
		switch r.msg {
		case "short":
			short++
		case long:
			whole++
		}
	}
	if got := short + whole + int(lines1-lines0); got != 2*sent {
		t.Errorf("%d short and %d long lines handed on + %d counted dropped = %d, want %d", short, whole, lines1-lines0, got, 2*sent)
	}
}

// TestQueuedHeadNotGluedToGoLine: a control thread's line longer than the
// stream's buffer comes in two pieces; the reader takes the first before
// the second is queued (the first's eventfd wakes it). A line DPDK logs
// from a Go thread before the reader takes the second piece must reach the
// logger as itself, and the long line whole: the direct path and the
// queue each carry whole lines in order, so neither may be glued onto a
// head the other left unfinished.
func TestQueuedHeadNotGluedToGoLine(t *testing.T) {
	mu, recs := recordLogs(t)
	long := "long " + strings.Repeat("y", 9000)
	finish, err := probeCtrlHead(long)
	if err != nil {
		t.Fatal(err)
	}
	FlushLog()      // the reader takes the first piece (8 KiB)
	logQueue.Lock() // the reader does not take the second piece yet
	finish()        // the second piece and the newline, queued
	goLine := fmt.Sprintf("go line between the pieces %d", os.Getpid())
	func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		probeLog(goLine, false)
	}()
	logQueue.Unlock()
	FlushLog()
	if got := recordsOf(mu, recs, goLine); len(got) != 1 {
		mu.Lock()
		var cut []string
		for _, r := range *recs {
			if strings.Contains(r.msg, goLine) || strings.Contains(r.msg, "yyyy") {
				cut = append(cut, fmt.Sprintf("%d bytes ending %q", len(r.msg), r.msg[max(0, len(r.msg)-40):]))
			}
		}
		mu.Unlock()
		t.Errorf("%d records of the Go thread's line, want 1; records with it or the long line: %v", len(got), cut)
	}
	if got := recordsOf(mu, recs, long); len(got) != 1 {
		t.Errorf("%d records of the long line whole, want 1", len(got))
	}
}
