//go:build dpdk

package dpdk

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// TestThreadsStartedAfterLcoreJobNotPinned: RunOnLcore locks the
// lcore's thread only while fn runs. Outside it (before LaunchWorkers,
// between jobs, after a loop returned) the lcore's thread is in go-dpdk's
// listener: it readies the caller (job.ret <- err; wg.Done at launch) and
// blocks on its channel, handing its P on, both of which may start a
// thread, cloned from the lcore's (pinned to its CPU) since nothing locks
// it then. Here fn leaves runnable goroutines, each then holding a thread
// in a system call, and returns at once: the threads started for them
// must keep the process's CPUs.
func TestThreadsStartedAfterLcoreJobNotPinned(t *testing.T) {
	if runtime.NumCPU() < 2 || startAffinity.Count() < 2 || len(WorkerLcores()) == 0 {
		t.Skip("needs 2 CPUs and a worker lcore")
	}
	before := threadIDs(t)
	lcore := WorkerLcores()[0]
	var lcoreTID int
	var wg sync.WaitGroup
	for r := range 6 {
		err := RunOnLcore(lcore, func() error {
			lcoreTID = unix.Gettid()
			for range 16 << (r % 3) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ts := unix.NsecToTimespec(20e6)
					unix.Nanosleep(&ts, nil)
				}()
			}
			return nil // the goroutines run after fn, while the listener hands its P on
		})
		if err != nil {
			t.Fatal(err)
		}
		wg.Wait()
	}
	var pinned []string
	for tid := range threadIDs(t) {
		if before[tid] || tid == lcoreTID {
			continue
		}
		s, err := threadAffinity(tid)
		if err != nil {
			continue
		}
		if s != startAffinity {
			comm, _ := os.ReadFile(filepath.Join("/proc/self/task", strconv.Itoa(tid), "comm"))
			pinned = append(pinned, fmt.Sprintf("%d %q: %d CPUs", tid, comm, s.Count()))
		}
	}
	if len(pinned) > 0 {
		t.Errorf("%d threads started outside fn from lcore %d's thread kept its CPU affinity, not the process's %d CPUs: %v", len(pinned), lcore, startAffinity.Count(), pinned)
	}
}
