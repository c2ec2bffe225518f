//go:build dpdk

package dpdk

/*
#include <stddef.h>
#include <stdint.h>

// The queue of lines from threads that may not call into Go (log.c): a
// record is a struct fl_q_rec, then its n bytes.
#define FL_QUEUE_MAX (256 * 1024)
struct fl_q_rec {
	int level;
	size_t n;
};

int fl_log_open(void);
size_t fl_log_take(char *dst, uint64_t *lost_lines, uint64_t *lost_bytes, uint64_t *seq);
void fl_log_done(uint64_t seq);
int fl_log_dying(void);
*/
import "C"

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// DPDK's log levels (rte_log.h), as rte_log_cur_msg_loglevel reports them.
const (
	rteLogErr     = 4 // RTE_LOG_ERR; EMERG, ALERT and CRIT are below it
	rteLogWarning = 5
	rteLogInfo    = 7
	rteLogDebug   = 8
)

var logState struct {
	sync.Mutex
	opened bool
	logger *slog.Logger // nil: lines go to stderr as DPDK writes them
	// The line not yet ended, of the direct path (threads that call
	// into Go, serialised by the stream's lock) and of the queue (log.c),
	// apart: the reader hands queued pieces on between two pieces of a
	// direct write, and a direct write comes between two queued pieces
	// the reader takes apart; one shared line would glue them.
	direct, queued, own []byte
	errs                []string // the last error lines, for InitEAL's error
}

// SetLogger sends DPDK's own log (the EAL, drivers and libraries) to l,
// one record per line, at the level DPDK gave it, with the subsystem
// ("EAL", "NET_PCAP", ...) as an attribute: with a JSON handler every
// line on stderr is then JSON. Call it before InitEAL to catch the EAL's
// start-up lines. Without it DPDK's lines go to stderr as DPDK writes
// them.
func SetLogger(l *slog.Logger) error {
	logState.Lock()
	logState.logger = l
	logState.Unlock()
	return openLog()
}

// openLog points DPDK's log stream at fulcrumDPDKLog, and starts the
// goroutine that hands on what the threads that may not call into Go
// queue (log.c). rte_openlog_stream only records the stream, so it works
// before rte_eal_init.
func openLog() error {
	logState.Lock()
	defer logState.Unlock()
	if logState.opened {
		return nil
	}
	efd := C.fl_log_open()
	if efd < 0 {
		return fmt.Errorf("dpdk: the log stream (fopencookie, eventfd) could not be made")
	}
	logState.opened = true
	wake := os.NewFile(uintptr(efd), "dpdk-log-wake")
	go func() {
		var b [8]byte
		for {
			if _, err := wake.Read(b[:]); err != nil {
				logLine(rteLogErr, "DPDK: the reader of the EAL threads' log stopped: "+err.Error())
				return
			}
			drainLog()
		}
	}()
	return nil
}

// logQueue is the Go side of log.c's queue.
var logQueue struct {
	sync.Mutex
	buf                  []byte
	lostLines, lostBytes uint64 // since the process started
}

// drainLog hands the lines queued by the threads that may not call into
// Go to the logger, oldest first, and logs a warning with what did not
// fit in the queue since the last call.
func drainLog() {
	logQueue.Lock()
	defer logQueue.Unlock()
	if logQueue.buf == nil {
		logQueue.buf = make([]byte, C.FL_QUEUE_MAX)
	}
	var lines, bytes, seq C.uint64_t
	n := int(C.fl_log_take((*C.char)(unsafe.Pointer(&logQueue.buf[0])), &lines, &bytes, &seq))
	defer C.fl_log_done(seq)
	var rec C.struct_fl_q_rec
	hdr, nOff := int(unsafe.Sizeof(rec)), int(unsafe.Offsetof(rec.n))
	for off := 0; off+hdr <= n; {
		level := int32(binary.NativeEndian.Uint32(logQueue.buf[off:]))
		ln := int(binary.NativeEndian.Uint64(logQueue.buf[off+nOff:]))
		logBytes(logQueue.buf[off+hdr:off+hdr+ln], C.int(level), &logState.queued)
		off += hdr + ln
	}
	if lines > 0 {
		logQueue.lostLines += uint64(lines)
		logQueue.lostBytes += uint64(bytes)
		logLine(rteLogWarning, fmt.Sprintf("DPDK: %d log lines (%d bytes) of the EAL's own threads dropped: more than the %d KiB queued for them", lines, bytes, C.FL_QUEUE_MAX/1024))
	}
}

// FlushLog hands DPDK's queued log lines to the logger now. Lines from
// the EAL's own threads (interrupts and link events, multi-process
// requests, telemetry, a worker lcore before it runs Go) are queued and
// handed on by a goroutine soon after. Lines from the program's own calls
// into DPDK reach the logger before the call returns, on an lcore's
// thread and on threads with the CPUs and name the process started with;
// a thread whose CPUs were changed since (taskset -p, a cpuset's update)
// queues them too.
func FlushLog() { drainLog() }

// LogDropped is how many of DPDK's log lines, and their bytes, the queue
// of the EAL's own threads dropped since the process started.
func LogDropped() (lines, bytes uint64) {
	logQueue.Lock()
	defer logQueue.Unlock()
	return logQueue.lostLines, logQueue.lostBytes
}

//export fulcrumDPDKLog
func fulcrumDPDKLog(buf *C.char, n C.size_t, level C.int) {
	logBytes(unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(n)), level, &logState.direct)
}

// logLine logs one line of Fulcrum's own about DPDK as DPDK's lines are.
func logLine(level int, line string) { logBytes([]byte(line+"\n"), C.int(level), &logState.own) }

// logBytes hands on the lines b ends, after what partial (one of
// logState's, under its lock) held of the first.
func logBytes(b []byte, level C.int, partial *[]byte) {
	logState.Lock()
	*partial = append(*partial, b...)
	var lines []string
	for {
		i := bytes.IndexByte(*partial, '\n')
		if i < 0 {
			break
		}
		lines = append(lines, string((*partial)[:i]))
		*partial = (*partial)[i+1:]
	}
	if len(*partial) == 0 {
		*partial = nil
	}
	l := logState.logger
	if level <= rteLogErr {
		for _, line := range lines {
			// The fatal alert repeats the error line after it.
			msg := strings.TrimPrefix(subsystemMsg(line), "FATAL: ")
			if msg != "" && !slices.Contains(logState.errs, msg) {
				logState.errs = append(logState.errs, msg)
			}
		}
		if k := len(logState.errs) - 4; k > 0 {
			logState.errs = logState.errs[k:]
		}
	}
	logState.Unlock()
	for _, line := range lines {
		if l == nil {
			os.Stderr.WriteString(line + "\n")
			continue
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		sub, msg := splitSubsystem(line)
		l.Log(context.Background(), slogLevel(int(level)), msg, "component", "dpdk", "subsystem", sub)
	}
	if h := fatalHook.Load(); h != nil && C.fl_log_dying() != 0 {
		(*h)()
	}
}

var fatalHook atomic.Pointer[func()]

// SetFatalHook has fn run after DPDK's last words begin, and after every
// line after them, before the call that logged the line returns:
// rte_panic ("PANIC in ...", its reason and a stack) and rte_exit
// ("Error - exiting ...") log them right before abort() or exit(), which
// end the process without running Go's deferred calls (so does a line
// at alert or emergency level). Other lines at critical level (the EAL's
// -v, drivers' recoverable errors) do not count. A program whose logger
// queues its records (the daemon's stderr queue) flushes them in fn, for
// a bounded time. fn may run on several threads at once.
func SetFatalHook(fn func()) {
	if fn == nil {
		fatalHook.Store(nil)
		return
	}
	fatalHook.Store(&fn)
}

// lastErrors returns DPDK's error lines since the previous call, oldest
// first, and forgets them.
func lastErrors() []string {
	logState.Lock()
	defer logState.Unlock()
	e := logState.errs
	logState.errs = nil
	return e
}

func slogLevel(l int) slog.Level {
	switch {
	case l <= rteLogErr:
		return slog.LevelError
	case l == rteLogWarning:
		return slog.LevelWarn
	case l <= rteLogInfo:
		return slog.LevelInfo
	}
	return slog.LevelDebug
}

// splitSubsystem splits DPDK's "EAL: message" into its two parts; a line
// without such a prefix (a driver's continuation line) has none.
func splitSubsystem(line string) (sub, msg string) {
	if i := strings.Index(line, ": "); i > 0 && !strings.ContainsAny(line[:i], " \t") {
		return line[:i], strings.TrimSpace(line[i+2:])
	}
	return "", strings.TrimSpace(line)
}

func subsystemMsg(line string) string {
	_, msg := splitSubsystem(line)
	return msg
}
