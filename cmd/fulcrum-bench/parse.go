package main

import (
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Sample is one reading of a program's own cumulative counters, stamped
// with the time the harness read the line, plus the CPU time the machine
// and the program had used by then (for the load beside the program).
type Sample struct {
	T        time.Time
	Tx       uint64 // packets sent to net_null: testpmd port 1 TX-packets, Fulcrum's workers' tx
	Rx       uint64 // packets received from net_pcap
	CTHits   uint64 // Fulcrum only
	CTMisses uint64 // Fulcrum only
	Busy     uint64 // busy CPU ticks of the whole machine (/proc/stat)
	Own      uint64 // CPU ticks of the program (/proc/PID/stat)
}

// testpmdParser reads testpmd's --stats-period output: a "NIC statistics
// for port N" block per port, each with RX-packets and TX-packets lines.
// Port 0 is net_pcap (rx), port 1 net_null (tx); a sample is complete at
// port 1's TX-packets, the last counter of the last block.
type testpmdParser struct {
	port int
	rx   uint64
}

func newTestpmdParser() *testpmdParser { return &testpmdParser{port: -1} }

// Line consumes one line of output and returns a sample when one is
// complete.
func (p *testpmdParser) Line(s string) (Sample, bool) {
	s = strings.TrimSpace(stripEscapes(s))
	switch {
	case strings.Contains(s, "NIC statistics for port"):
		p.port = -1
		if f := strings.Fields(s); len(f) >= 6 {
			if n, err := strconv.Atoi(f[5]); err == nil {
				p.port = n
			}
		}
	case strings.Contains(s, "statistics for port"), strings.Contains(s, "Accumulated"):
		p.port = -1 // the forward statistics printed at exit: not a sample
	case strings.HasPrefix(s, "RX-packets:") && p.port == 0:
		p.rx, _ = fieldAfter(s, "RX-packets:")
	case strings.HasPrefix(s, "TX-packets:") && p.port == 1:
		tx, ok := fieldAfter(s, "TX-packets:")
		p.port = -1
		if ok {
			return Sample{Tx: tx, Rx: p.rx}, true
		}
	}
	return Sample{}, false
}

// fieldAfter parses the number that follows key in s.
func fieldAfter(s, key string) (uint64, bool) {
	i := strings.Index(s, key)
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+len(key):])
	if len(f) == 0 {
		return 0, false
	}
	n, err := strconv.ParseUint(f[0], 10, 64)
	return n, err == nil
}

var escapeRE = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)

// stripEscapes removes the terminal control sequences testpmd clears the
// screen with.
func stripEscapes(s string) string {
	if !strings.Contains(s, "\x1b") {
		return s
	}
	return escapeRE.ReplaceAllString(s, "")
}

// fulcrumParser reads `fulcrum run --stats-interval` logs: slog text lines
// `msg=counters worker=N rx=... tx=... ct_hits=... ct_misses=...`, one per
// worker per interval. A sample (sums over the workers) is complete at the
// last worker's line.
type fulcrumParser struct {
	workers int
	cur     []Sample
}

func newFulcrumParser(workers int) *fulcrumParser {
	return &fulcrumParser{workers: workers, cur: make([]Sample, workers)}
}

// Line consumes one line of output and returns a sample when one is
// complete.
func (p *fulcrumParser) Line(s string) (Sample, bool) {
	if !strings.Contains(s, "msg=counters ") {
		return Sample{}, false
	}
	kv := parseKV(s)
	w, err := strconv.Atoi(kv["worker"])
	if err != nil || w < 0 || w >= p.workers {
		return Sample{}, false
	}
	num := func(k string) uint64 { n, _ := strconv.ParseUint(kv[k], 10, 64); return n }
	p.cur[w] = Sample{Tx: num("tx"), Rx: num("rx"), CTHits: num("ct_hits"), CTMisses: num("ct_misses")}
	if w != p.workers-1 {
		return Sample{}, false
	}
	var sum Sample
	for _, c := range p.cur {
		sum.Tx += c.Tx
		sum.Rx += c.Rx
		sum.CTHits += c.CTHits
		sum.CTMisses += c.CTMisses
	}
	return sum, true
}

// parseKV splits a log/slog text line into its key=value pairs; quoted
// values are unquoted.
func parseKV(s string) map[string]string {
	out := map[string]string{}
	for len(s) > 0 {
		s = strings.TrimLeft(s, " ")
		eq := strings.IndexByte(s, '=')
		if eq <= 0 {
			break
		}
		key, rest := s[:eq], s[eq+1:]
		if sp := strings.IndexByte(key, ' '); sp >= 0 { // a word without '=': skip it
			s = s[sp+1:]
			continue
		}
		var val string
		if strings.HasPrefix(rest, `"`) {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				break
			}
			val, _ = strconv.Unquote(q)
			rest = rest[len(q):]
		} else if sp := strings.IndexByte(rest, ' '); sp >= 0 {
			val, rest = rest[:sp], rest[sp:]
		} else {
			val, rest = rest, ""
		}
		out[key] = val
		s = rest
	}
	return out
}

// gcHeapRE matches gctrace's heap sizes: "4->4->3 MB" (at start of GC, at
// end, live).
var gcHeapRE = regexp.MustCompile(`(\d+)->(\d+)->(\d+) MB`)

// gcLine reports whether s is a GODEBUG=gctrace=1 line (one per GC cycle)
// and the live heap it reports in MB.
func gcLine(s string) (liveMB int, ok bool) {
	if !strings.HasPrefix(s, "gc ") || !strings.Contains(s, " @") {
		return 0, false
	}
	if m := gcHeapRE.FindStringSubmatch(s); m != nil {
		liveMB, _ = strconv.Atoi(m[3])
	}
	return liveMB, true
}

// Window picks the measurement window in samples: it starts at the first
// sample at least warmup after the first one that shows traffic, and ends
// at the first sample a window later (100 ms of tick jitter tolerated).
// ok is false until such an end sample exists.
func Window(ss []Sample, warmup, window time.Duration) (a, b int, ok bool) {
	const jitter = 100 * time.Millisecond
	first := -1
	for i, s := range ss {
		if s.Tx > 0 {
			first = i
			break
		}
	}
	if first < 0 {
		return 0, 0, false
	}
	a = -1
	for i := first; i < len(ss); i++ {
		if a < 0 && ss[i].T.Sub(ss[first].T) >= warmup-jitter {
			a = i
		}
		if a >= 0 && i > a && ss[i].T.Sub(ss[a].T) >= window-jitter {
			return a, i, true
		}
	}
	return 0, 0, false
}

// rate is packets per second between two samples.
func rate(a, b Sample, f func(Sample) uint64) float64 {
	dt := b.T.Sub(a.T).Seconds()
	if dt <= 0 {
		return 0
	}
	return float64(f(b)-f(a)) / dt
}

func txOf(s Sample) uint64 { return s.Tx }
func rxOf(s Sample) uint64 { return s.Rx }
