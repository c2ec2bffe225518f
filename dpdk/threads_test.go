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
	"time"

	"golang.org/x/sys/unix"
)

// startAffinity is the CPUs the test process's threads could run on before
// the EAL started (TestMain).
var startAffinity unix.CPUSet

func threadAffinity(tid int) (unix.CPUSet, error) {
	var s unix.CPUSet
	err := unix.SchedGetaffinity(tid, &s)
	return s, err
}

func threadIDs(t *testing.T) map[int]bool {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	ids := map[int]bool{}
	for _, e := range ents {
		if id, err := strconv.Atoi(e.Name()); err == nil {
			ids[id] = true
		}
	}
	return ids
}

// TestThreadsStartedFromLcoresNotPinned: the EAL pins each lcore's thread
// to its CPU, and a thread inherits its parent's CPU affinity. The Go
// runtime starts a thread for the scheduler where a goroutine needs one
// (a goroutine started, one blocked in a system call), and from an lcore's
// thread such a thread was pinned to that lcore's CPU: Go's other work
// (health checks, BGP, the admin API, the garbage collector) then ran on
// the forwarding core beside its busy-polling loop, and on no other CPU.
// Every thread started while the lcores start goroutines that block must
// keep the process's CPUs.
func TestThreadsStartedFromLcoresNotPinned(t *testing.T) {
	if runtime.NumCPU() < 2 || startAffinity.Count() < 2 {
		t.Skip("needs 2 CPUs: a pinned thread is told from the others by its affinity")
	}
	before := threadIDs(t)
	lcores := append([]uint{MainLcore()}, WorkerLcores()...)
	lcoreTID := map[int]uint{}
	var mu sync.Mutex
	for _, id := range lcores {
		err := RunOnLcore(id, func() error {
			mu.Lock()
			lcoreTID[unix.Gettid()] = id
			mu.Unlock()
			// Goroutines that each hold a thread in a system call for
			// a while, started from here, while this one sleeps (its
			// thread, locked to it, hands its P on and may start a
			// thread for it): the scheduler starts threads for them.
			// Three rounds, each holding twice the threads the one
			// before left idle, so that each needs new ones.
			for r := range 3 {
				var wg sync.WaitGroup
				for range 64 << r {
					wg.Add(1)
					go func() {
						defer wg.Done()
						ts := unix.NsecToTimespec(20e6)
						unix.Nanosleep(&ts, nil)
					}()
					time.Sleep(time.Millisecond)
				}
				wg.Wait()
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var pinned []string
	for tid := range threadIDs(t) {
		if before[tid] || lcoreTID[tid] != 0 {
			continue
		}
		if _, ok := lcoreTID[tid]; ok {
			continue
		}
		s, err := threadAffinity(tid)
		if err != nil {
			continue // ended meanwhile
		}
		if s != startAffinity {
			comm, _ := os.ReadFile(filepath.Join("/proc/self/task", strconv.Itoa(tid), "comm"))
			pinned = append(pinned, fmt.Sprintf("%d %q: %d CPUs", tid, comm, s.Count()))
		}
	}
	if len(pinned) > 0 {
		t.Errorf("%d threads started from the lcores (%v) kept an lcore's CPU affinity, not the process's %d CPUs: %v", len(pinned), lcores, startAffinity.Count(), pinned)
	}
}
