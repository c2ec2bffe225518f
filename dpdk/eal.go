//go:build dpdk

package dpdk

/*
#include "fulcrum_dpdk.h"
#include <rte_version.h>
int fl_eal_init(int argc, char **argv, int *err);
int fl_save_start_thread(void);
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/yerden/go-dpdk/eal"
)

// ErrNoEAL is returned by calls that need a running EAL before InitEAL
// succeeded or after CleanupEAL.
var ErrNoEAL = errors.New("dpdk: EAL not initialised")

var (
	ealMu      sync.Mutex
	ealRunning atomic.Bool
	runtimeDir string
	// mainDone is closed when the main lcore's goroutine has returned.
	mainDone chan struct{}
)

// InitEAL starts DPDK's environment abstraction layer in this process.
// args are EAL options without the program name (InitEAL supplies it),
// for example {"-l", "0-1", "--no-huge", "-m", "256", "--no-pci",
// "--file-prefix", "fulcrum-1234", "--vdev", "net_null0"}.
//
// The EAL can start once per process: DPDK refuses a second
// rte_eal_init even after CleanupEAL. On failure the error carries
// DPDK's own reason: the error lines it logged (such as "Cannot create
// lock on '/var/run/dpdk/x/config'. Is another primary process
// running?"), else rte_strerror of rte_errno. DPDK's log goes to the
// logger given to SetLogger, or else to stderr.
//
// The calling goroutine's thread does not become the main lcore:
// InitEAL starts the EAL on a locked goroutine of its own, which then
// serves RunOnLcore for the main lcore. Every worker lcore waits for
// work from LaunchWorkers or RunOnLcore in Fulcrum's listener (lcore.go),
// locked to its thread from its first instruction.
func InitEAL(args []string) error {
	ealMu.Lock()
	defer ealMu.Unlock()
	if ealRunning.Load() {
		return fmt.Errorf("eal init: %w", Errno(syscall.EALREADY))
	}
	if err := openLog(); err != nil {
		return err
	}
	lastErrors()
	argv := append([]string{"fulcrum"}, args...)
	var initErr error
	// One for the main lcore's goroutine: its listener's, or its
	// failure's (launchListeners adds the worker lcores').
	lcoresUp.Add(1)
	mainDone = make(chan struct{})
	go func() {
		defer close(mainDone)
		// This thread becomes the main lcore: rte_eal_init pins it to
		// its CPU, and it runs the main lcore's listener (lcore.go)
		// until CleanupEAL. Locked first, like every lcore's.
		runtime.LockOSThread()
		if rc := C.fl_save_start_thread(); rc != 0 {
			initErr = fmt.Errorf("the starting thread's CPUs and name: %w", syscall.Errno(rc))
			lcoresUp.Done()
			return
		}
		if initErr = ealInit(argv); initErr != nil {
			lcoresUp.Done()
			return
		}
		if err := launchListeners(eal.Lcores()); err != nil {
			initErr = err
			lcoresUp.Done()
		}
	}()
	lcoresUp.Wait()
	// What the worker lcores logged before their listeners locked them,
	// and the EAL's control threads as they started.
	drainLog()
	if initErr == nil {
		// A thread left on the process's CPUs would forward
		// unpinned: never seen, but stop rather than run so.
		lcoreSettleErrs.Lock()
		initErr = errors.Join(lcoreSettleErrs.errs...)
		lcoreSettleErrs.Unlock()
		if initErr != nil {
			stopListeners(eal.Lcores())
			<-mainDone
			eal.Cleanup()
		}
	}
	if initErr != nil {
		return fmt.Errorf("eal init %q: %w", args, initErr)
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
	stopListeners(eal.Lcores())
	<-mainDone
	ealRunning.Store(false)
	defer drainLog()
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

// ealInit runs rte_eal_init on the calling thread. Its error is what
// DPDK logged at error level while it failed (rte_eal_init often returns
// -1 without setting rte_errno), wrapping rte_errno when there is one.
func ealInit(argv []string) error {
	// C memory, never freed: getopt permutes the array and DPDK may keep
	// pointers into it (the program name) for the life of the process.
	p := (**C.char)(C.calloc(C.size_t(len(argv)+1), C.size_t(unsafe.Sizeof((*C.char)(nil)))))
	cargs := unsafe.Slice(p, len(argv)+1)
	for i, a := range argv {
		cargs[i] = C.CString(a)
	}
	var e C.int
	if C.fl_eal_init(C.int(len(argv)), p, &e) >= 0 {
		return nil
	}
	msgs := lastErrors()
	switch {
	case len(msgs) > 0 && e != 0:
		return fmt.Errorf("%s: %w", strings.Join(msgs, "; "), Errno(e))
	case len(msgs) > 0:
		return errors.New(strings.Join(msgs, "; "))
	case e != 0:
		return Errno(e)
	}
	return errors.New("rte_eal_init failed and DPDK gave no reason")
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

// Version is the DPDK the binary runs with (rte_version: "DPDK 22.11.4").
func Version() string { return C.GoString(C.rte_version()) }

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
// panic in fn is recovered and returned as an error (an *LcorePanic,
// with the stack).
func RunOnLcore(id uint, fn func() error) error {
	if !ealRunning.Load() {
		return ErrNoEAL
	}
	if err := execOnLcore(id, fn); err != nil {
		return fmt.Errorf("lcore %d: %w", id, err)
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
//
// Each loop holds one of the Go scheduler's Ps for its whole life, so
// LaunchWorkers first raises GOMAXPROCS to the loops plus two when it is
// lower and the environment does not set it (ReserveProcs).
func LaunchWorkers(fn func(lcore uint) error) (*Launch, error) {
	if !ealRunning.Load() {
		return nil, ErrNoEAL
	}
	ids := WorkerLcores()
	ReserveProcs(len(ids))
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

// WaitWithin is Wait for at most d: ok is false if a launched function
// still runs then (a loop stuck in a driver or a Go loop).
func (l *Launch) WaitWithin(d time.Duration) (ok bool, err error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-l.done:
		return true, errors.Join(l.errs...)
	case <-t.C:
		return false, nil
	}
}

// ReserveProcs raises GOMAXPROCS to loops+2 when it is lower, unless the
// GOMAXPROCS environment variable sets it to a positive number (the
// operator's choice wins; an empty or invalid value, which Go's runtime
// ignores, does not count), and returns the value in force.
//
// A forwarding loop never blocks in Go and its cgo calls last microseconds,
// so it keeps its P. With GOMAXPROCS at the CPU count (Go's default) and a
// loop on every CPU, the rest of the program (the control plane, the
// garbage collector) gets a P only when the runtime's monitor thread
// (sysmon) takes one from a loop caught in a cgo call, and the loop then
// waits for a P when its call returns. sysmon takes a loop's P whenever
// the loop has run 10 ms without passing through the scheduler, which a
// loop never does, and polls every 20 µs for a millisecond or more after
// each take. With two spare Ps the rest of the program runs on its own, and
// a loop whose P was taken finds an idle one at once. On the 2-CPU
// development VM with two loops, sysmon's wakeups fell from 5,100 to 3,100
// a second, the loops' pre-emptions by other threads from 5,500 to 3,500,
// and two loops forwarded about 30% more (docs/benchmarks.md, round 13).
// An idle P costs nothing: no thread spins for it.
func ReserveProcs(loops int) int {
	cur := runtime.GOMAXPROCS(0)
	if n, err := strconv.Atoi(os.Getenv("GOMAXPROCS")); err == nil && n > 0 || cur >= loops+2 {
		return cur
	}
	runtime.GOMAXPROCS(loops + 2)
	return loops + 2
}
