package dataplane

import (
	"runtime"
	"testing"
	"time"
)

// cpuTimer measures a benchmark's CPU time from Start to Stop on a locked
// thread and reports it per packet as "cpu-ns/pkt".
type cpuTimer struct{ t0 time.Duration }

func startCPU(b *testing.B) *cpuTimer {
	runtime.LockOSThread()
	b.ResetTimer()
	return &cpuTimer{t0: threadCPU()}
}

// stop ends the measurement and returns the CPU time per packet (0 where
// the platform has no per-thread CPU clock).
func (c *cpuTimer) stop(b *testing.B, pkts int) float64 {
	d := threadCPU() - c.t0
	b.StopTimer()
	runtime.UnlockOSThread()
	if pkts <= 0 || d <= 0 {
		return 0
	}
	ns := float64(d.Nanoseconds()) / float64(pkts)
	b.ReportMetric(ns, "cpu-ns/pkt")
	return ns
}
