//go:build dpdk

package dpdk

/*
#include <stddef.h>
int fl_log_open(void);
*/
import "C"

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
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
	opened  bool
	logger  *slog.Logger // nil: lines go to stderr as DPDK writes them
	partial []byte
	errs    []string // the last error lines, for InitEAL's error
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

// openLog points DPDK's log stream at fulcrumDPDKLog. rte_openlog_stream
// only records the stream, so it works before rte_eal_init.
func openLog() error {
	logState.Lock()
	defer logState.Unlock()
	if logState.opened {
		return nil
	}
	if C.fl_log_open() != 0 {
		return fmt.Errorf("dpdk: fopencookie for the log stream failed")
	}
	logState.opened = true
	return nil
}

//export fulcrumDPDKLog
func fulcrumDPDKLog(buf *C.char, n C.size_t, level C.int) {
	logBytes(unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(n)), level)
}

// logLine logs one line of Fulcrum's own about DPDK as DPDK's lines are.
func logLine(level int, line string) { logBytes([]byte(line+"\n"), C.int(level)) }

func logBytes(b []byte, level C.int) {
	logState.Lock()
	logState.partial = append(logState.partial, b...)
	var lines []string
	for {
		i := bytes.IndexByte(logState.partial, '\n')
		if i < 0 {
			break
		}
		lines = append(lines, string(logState.partial[:i]))
		logState.partial = logState.partial[i+1:]
	}
	if len(logState.partial) == 0 {
		logState.partial = nil
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
