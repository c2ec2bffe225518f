package dataplane

import (
	"syscall"
	"time"
)

// threadCPU is the calling thread's CPU time (user and system). Benchmarks
// lock their goroutine to its thread and report CPU time per packet beside
// the wall time: on a shared machine the wall time also counts the time
// other programs held the CPU.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
