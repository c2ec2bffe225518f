//go:build dpdk

package dpdk

/*
#include <rte_launch.h>
#include <rte_lcore.h>
int fl_save_start_thread(void);
int fl_lcore_settle(void);
int fl_launch_listeners(void);
*/
import "C"

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"syscall"
)

// Each lcore's thread runs Fulcrum's listener, which runs the jobs
// RunOnLcore sends it, one at a time, until CleanupEAL stops it.
//
// It is Fulcrum's, not go-dpdk's (eal.ExecOnLcore), so that no thread the
// Go runtime starts is cloned from a worker lcore's. The EAL pins each
// lcore's thread to its CPU and names it (rte-worker-N), and a thread the
// runtime starts from a thread that is not locked is cloned from it:
// pinned to the forwarding core and named after the lcore, where the
// control plane, health checks, BGP and the garbage collector then ran
// beside the busy-polling loop. A locked goroutine's thread has the
// runtime's template thread start threads for it instead (a cgo
// program's runtime.main starts that thread before the EAL pins
// anything). go-dpdk's listener readied its caller once it ran, and then
// waited for its first job, before anything could lock its thread: in
// about one daemon start in eight the runtime cloned a thread from the
// lcore's then. Fulcrum's locks its thread first, and until then the
// thread has the CPUs and name the process started with (lcore.c): the
// runtime's own code runs first on a call from C into Go, and can start
// a thread too.

// lcoreJob is one RunOnLcore call; a nil fn stops the listener.
type lcoreJob struct {
	fn  func() error
	ret chan error
}

var (
	// lcoreJobs is each lcore's job queue, made by InitEAL before the
	// listeners start and read-only after.
	lcoreJobs map[uint]chan lcoreJob
	// lcoresUp counts the listeners not yet running.
	lcoresUp sync.WaitGroup
)

// LcorePanic is RunOnLcore's error when fn panicked: the lcore, the value
// given to panic and the goroutine's stack where it panicked.
type LcorePanic struct {
	Lcore uint
	Value any
	Stack []byte
}

func (p *LcorePanic) Error() string { return fmt.Sprintf("panic on lcore %d: %v", p.Lcore, p.Value) }

// Unwrap is the value given to panic when it is an error.
func (p *LcorePanic) Unwrap() error {
	err, _ := p.Value.(error)
	return err
}

// lcoreSettleErrs collects the listeners' failures to give their threads
// back the lcore's CPUs and name; InitEAL returns them.
var lcoreSettleErrs struct {
	sync.Mutex
	errs []error
}

//export fulcrumLcoreListener
func fulcrumLcoreListener(entryErr C.int) C.int {
	// First, before this thread readies another goroutine or blocks.
	// Never undone: the thread stays locked until the listener returns.
	runtime.LockOSThread()
	id := uint(C.rte_lcore_id())
	rc := entryErr
	if rc == 0 {
		rc = C.fl_lcore_settle()
	}
	if rc != 0 {
		lcoreSettleErrs.Lock()
		lcoreSettleErrs.errs = append(lcoreSettleErrs.errs, fmt.Errorf("lcore %d: its thread's CPUs and name: %w", id, syscall.Errno(rc)))
		lcoreSettleErrs.Unlock()
	}
	jobs := lcoreJobs[id]
	lcoresUp.Done()
	for j := range jobs {
		if j.fn == nil {
			j.ret <- nil
			return 0
		}
		j.ret <- runJob(id, j.fn)
	}
	return 0
}

// runJob runs fn and returns its error, or its panic as an *LcorePanic.
func runJob(id uint, fn func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &LcorePanic{Lcore: id, Value: v, Stack: debug.Stack()}
		}
	}()
	return fn()
}

// launchListeners runs the listener on every lcore. It is called on the
// thread rte_eal_init ran on, the main lcore's, with lcoresUp counting one
// for it, and returns once the main lcore's listener is stopped. Each
// listener calls lcoresUp.Done as it starts; when the launch fails, none
// started (DPDK checks every worker lcore is idle before it starts any)
// and the caller calls Done for the main lcore.
func launchListeners(lcores []uint) error {
	lcoreJobs = make(map[uint]chan lcoreJob, len(lcores))
	for _, id := range lcores {
		lcoreJobs[id] = make(chan lcoreJob, 1)
	}
	lcoresUp.Add(len(lcores) - 1)
	if rc := C.fl_launch_listeners(); rc < 0 {
		lcoresUp.Add(1 - len(lcores))
		return fmt.Errorf("rte_eal_mp_remote_launch: %w", Errno(-rc))
	}
	return nil
}

// stopListeners stops every lcore's listener and waits until each has
// returned to the EAL.
func stopListeners(lcores []uint) {
	ret := make(chan error, len(lcores))
	for _, id := range lcores {
		lcoreJobs[id] <- lcoreJob{ret: ret}
	}
	for range lcores {
		<-ret
	}
	C.rte_eal_mp_wait_lcore()
}

// execOnLcore runs fn on lcore id's thread and waits for it.
func execOnLcore(id uint, fn func() error) error {
	jobs, ok := lcoreJobs[id]
	if !ok {
		return fmt.Errorf("lcore %d is not one of the EAL's", id)
	}
	ret := make(chan error, 1)
	jobs <- lcoreJob{fn: fn, ret: ret}
	return <-ret
}
