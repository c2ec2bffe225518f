package main

import (
	"encoding/json"
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
	NewFlows uint64 // Fulcrum only: new flows given a backend
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

// fulcrumParser reads `fulcrum run --stats-interval 1s --stats-json`
// output: one JSON object a line on stdout, with the cumulative counters
// summed over the workers (cmd/fulcrum's appendStatsJSON). Machine
// readable, so a change of the log text cannot break the harness; the
// log lines on stderr are not samples.
type fulcrumParser struct {
	workers int
}

func newFulcrumParser(workers int) *fulcrumParser { return &fulcrumParser{workers: workers} }

// statsLine is the part of a --stats-json line the harness reads.
type statsLine struct {
	TimeUnixMs *int64 `json:"time_unix_ms"`
	Workers    int    `json:"workers"`
	Rx         uint64 `json:"rx"`
	Tx         uint64 `json:"tx"`
	CTHits     uint64 `json:"ct_hits"`
	CTMisses   uint64 `json:"ct_misses"`
	NewFlows   uint64 `json:"new_flows"`
}

// Line consumes one line of output and returns a sample when it is a
// --stats-json line of all the expected workers.
func (p *fulcrumParser) Line(s string) (Sample, bool) {
	if !strings.HasPrefix(s, `{"time_unix_ms":`) {
		return Sample{}, false
	}
	var l statsLine
	if err := json.Unmarshal([]byte(s), &l); err != nil || l.TimeUnixMs == nil || l.Workers != p.workers {
		return Sample{}, false
	}
	return Sample{Tx: l.Tx, Rx: l.Rx, CTHits: l.CTHits, CTMisses: l.CTMisses, NewFlows: l.NewFlows}, true
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
