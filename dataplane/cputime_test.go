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

func (c *cpuTimer) stop(b *testing.B, pkts int) {
	d := threadCPU() - c.t0
	b.StopTimer()
	runtime.UnlockOSThread()
	if pkts > 0 && d > 0 {
		b.ReportMetric(float64(d.Nanoseconds())/float64(pkts), "cpu-ns/pkt")
	}
}
