//go:build dpdk

package dpdk

/*
#include "fulcrum_dpdk.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/yerden/go-dpdk/eal"
)

// ErrNoEAL is returned by calls that need a running EAL before InitEAL
// succeeded or after CleanupEAL.
var ErrNoEAL = errors.New("dpdk: EAL not initialised")

var (
	ealMu      sync.Mutex
	ealRunning atomic.Bool
	runtimeDir string
)

// InitEAL starts DPDK's environment abstraction layer in this process.
// args are EAL options without the program name (InitEAL supplies it),
// for example {"-l", "0-1", "--no-huge", "-m", "256", "--no-pci",
// "--file-prefix", "fulcrum-1234", "--vdev", "net_null0"}.
//
// The EAL can start once per process: DPDK refuses a second
// rte_eal_init even after CleanupEAL. On failure the error carries
// DPDK's own message (rte_strerror of rte_errno); DPDK logs the detail
// to stderr.
//
// The calling goroutine's thread does not become the main lcore:
// go-dpdk starts the EAL on a locked goroutine of its own, which then
// serves RunOnLcore for the main lcore. Every worker lcore waits for
// work from LaunchWorkers or RunOnLcore.
func InitEAL(args []string) error {
	ealMu.Lock()
	defer ealMu.Unlock()
	if ealRunning.Load() {
		return fmt.Errorf("eal init: %w", Errno(syscall.EALREADY))
	}
	argv := append([]string{"fulcrum"}, args...)
	if _, err := eal.Init(argv); err != nil {
		return fmt.Errorf("eal init %q: %w", args, goDPDKErr(err))
	}
	runtimeDir = C.GoString(C.rte_eal_get_runtime_dir())
	ealRunning.Store(true)
	return nil
}

// CleanupEAL stops the lcore listeners and releases the EAL's memory
// (rte_eal_cleanup). Loops started with LaunchWorkers must have returned
// and ports must be stopped and closed first. Afterwards no DPDK object
// (mempool, mbuf, port) may be touched again. The runtime directory
// (RuntimeDir) is left for the caller to remove: DPDK 22.11 does not.
func CleanupEAL() error {
	ealMu.Lock()
	defer ealMu.Unlock()
	if !ealRunning.Load() {
		return ErrNoEAL
	}
	eal.StopLcores()
	ealRunning.Store(false)
	if err := eal.Cleanup(); err != nil {
		return fmt.Errorf("eal cleanup: %w", goDPDKErr(err))
	}
	return nil
}

// RuntimeDir is the EAL's runtime directory (/var/run/dpdk/<file-prefix>
// for root), where it keeps its shared config and multi-process socket.
// It stays valid after CleanupEAL so the caller can remove it.
func RuntimeDir() string {
	ealMu.Lock()
	defer ealMu.Unlock()
	return runtimeDir
}

// goDPDKErr converts go-dpdk's syscall.Errno into an Errno so the
// message is rte_strerror's, and keeps its other errors as they are.
func goDPDKErr(err error) error {
	var se syscall.Errno
	if errors.As(err, &se) {
		return Errno(se)
	}
	return err
}

// MainLcore is the id of the EAL's main lcore.
func MainLcore() uint { return eal.GetMainLcore() }

// WorkerLcores lists the worker lcores: every lcore of -l/--lcores but
// the main one. The dataplane runs one loop on each.
func WorkerLcores() []uint { return eal.LcoresWorker() }

// LcoreSocket is the NUMA socket of lcore id, for placing its mempool
// and queues.
func LcoreSocket(id uint) int { return int(eal.LcoreToSocket(id)) }

// LcoreIDAny is what LcoreID returns on a thread that is not an lcore.
const LcoreIDAny = C.LCORE_ID_ANY

// LcoreID is the lcore the calling thread runs on, or LcoreIDAny on a
// thread the EAL did not create, such as an
// ordinary goroutine's. Mempool caches are per lcore: a non-EAL thread
// goes to the shared ring on every alloc and free.
func LcoreID() uint { return uint(C.rte_lcore_id()) }

// RunOnLcore runs fn on the EAL thread of lcore id and waits for it. A
// panic in fn is recovered and returned as an error (go-dpdk's
// *eal.ErrLcorePanic, with the stack).
func RunOnLcore(id uint, fn func() error) error {
	if !ealRunning.Load() {
		return ErrNoEAL
	}
	var ferr error
	if err := eal.ExecOnLcore(id, func(*eal.LcoreCtx) { ferr = fn() }); err != nil {
		return fmt.Errorf("lcore %d: %w", id, err)
	}
	if ferr != nil {
		return fmt.Errorf("lcore %d: %w", id, ferr)
	}
	return nil
}

// Launch is a set of functions running on worker lcores; Wait collects
// their results.
type Launch struct {
	lcores []uint
	errs   []error
	done   chan struct{}
}

// LaunchWorkers starts fn(lcore) on every worker lcore and returns at
// once; fn is the dataplane loop and should return when its owner asks
// it to (an atomic flag it polls between bursts). Use Wait to join.
func LaunchWorkers(fn func(lcore uint) error) (*Launch, error) {
	if !ealRunning.Load() {
		return nil, ErrNoEAL
	}
	ids := WorkerLcores()
	l := &Launch{lcores: ids, errs: make([]error, len(ids)), done: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Add(len(ids))
	for i, id := range ids {
		go func() {
			defer wg.Done()
			l.errs[i] = RunOnLcore(id, func() error { return fn(id) })
		}()
	}
	go func() { wg.Wait(); close(l.done) }()
	return l, nil
}

// Lcores lists the lcores the launch runs on.
func (l *Launch) Lcores() []uint { return l.lcores }

// Wait blocks until every launched function has returned and joins
// their errors (each prefixed with its lcore).
func (l *Launch) Wait() error {
	<-l.done
	return errors.Join(l.errs...)
}
