//go:build dpdk

package dpdk

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// lcoreClones lists the threads, other than a worker lcore's own, that
// have its name or are held to its CPU alone (when the process had more
// than one): threads the Go runtime started from the lcore's; and a worker
// lcore's thread without its own name and CPU.
func lcoreClones() (bad []string, err error) {
	type lcore struct {
		tid int
		cpu unix.CPUSet
	}
	own := map[string]lcore{}
	lcoreTID := map[int]bool{}
	for _, id := range WorkerLcores() {
		var l lcore
		err := RunOnLcore(id, func() error {
			l.tid = unix.Gettid()
			return unix.SchedGetaffinity(0, &l.cpu)
		})
		if err != nil {
			return nil, err
		}
		comm, err := os.ReadFile(filepath.Join("/proc/self/task", strconv.Itoa(l.tid), "comm"))
		if err != nil {
			return nil, err
		}
		name := strings.TrimSpace(string(comm))
		own[name] = l
		lcoreTID[l.tid] = true
		// Its own CPU and name, given back once its listener locked it.
		// Both EALs here place worker lcore i on workerCPU(i).
		if want := fmt.Sprintf("rte-worker-%d", id); name != want {
			bad = append(bad, fmt.Sprintf("lcore %d's thread is named %q, want %q", id, name, want))
		}
		if runtime.NumCPU() > 1 {
			var want unix.CPUSet
			want.Set(workerCPU(int(id)))
			if l.cpu != want {
				bad = append(bad, fmt.Sprintf("lcore %d's thread is on %d CPUs, want CPU %d alone", id, l.cpu.Count(), workerCPU(int(id))))
			}
		}
	}
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil || lcoreTID[tid] {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc/self/task", e.Name(), "comm"))
		if err != nil {
			continue // ended meanwhile
		}
		name := strings.TrimSpace(string(comm))
		s, err := threadAffinity(tid)
		if err != nil {
			continue
		}
		for lname, l := range own {
			if name == lname || s == l.cpu && s.Count() == 1 && startAffinity.Count() > 1 {
				bad = append(bad, fmt.Sprintf("thread %d %q (%d CPUs) beside lcore thread %d %q", tid, name, s.Count(), l.tid, lname))
			}
		}
	}
	return bad, nil
}

// TestNoThreadClonedFromAnLcoreAtLaunch: each worker lcore's listener
// locks its thread before it readies InitEAL's caller or waits for its
// first job. go-dpdk's did neither first, and in about one daemon start in
// eight the Go runtime started a thread from the lcore's then: pinned to
// the worker lcore's CPU and named after it for the life of the process,
// where any of Go's work could run beside the forwarding loop. The runtime
// never ends an idle thread, so one cloned at InitEAL is still there
// afterwards. This process's EAL (TestMain's) is checked, and children's
// that start theirs while other goroutines keep the runtime's threads
// busy in system calls, as a daemon's do.
func TestNoThreadClonedFromAnLcoreAtLaunch(t *testing.T) {
	if len(WorkerLcores()) == 0 {
		t.Skip("needs a worker lcore")
	}
	bad, err := lcoreClones()
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Errorf("this process: %v", bad)
	}
	children := 12
	if testing.Short() {
		children = 3
	}
	for i := range children {
		runEALChild(t, ealLaunchChild, fmt.Sprintf("fulcrum-test-launch-%d-%d", os.Getpid(), i))
	}
}

// lcoreLayout is --lcores for n worker lcores, each a window, lcore i on
// workerCPU(i).
func lcoreLayout(n int) string {
	lcores := "0@0"
	for i := 1; i <= n; i++ {
		lcores += fmt.Sprintf(",%d@%d", i, workerCPU(i))
	}
	return lcores
}

// workerCPU is the CPU of worker lcore i in the EALs here (TestMain's -l
// 0-1 too): the CPUs but the main lcore's in turn, 1 + (i-1)%(CPUs-1), or
// CPU 0 on one CPU (only the name then tells a clone).
func workerCPU(i int) int {
	if c := runtime.NumCPU(); c > 1 {
		return 1 + (i-1)%(c-1)
	}
	return 0
}

// runEALChild runs this test binary with env set to a file prefix of its
// own (TestMain then starts that child's EAL), and fails t unless the
// child prints only "clean".
func runEALChild(t *testing.T, env, prefix string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env+"="+prefix)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	// The child removes its runtime directory, but not when its EAL
	// failed to start, or the child died.
	if dir := filepath.Join(runtimeBase(), prefix); dirExists(dir) {
		if err := RemoveRuntimeDir(dir); err != nil {
			t.Error(err)
		}
	}
	if err != nil || string(out) != "clean\n" {
		t.Errorf("child %s (%v): %s", prefix, err, out)
	}
}

// childDone prints a child's verdict, "clean" or what is wrong, and
// returns its exit code; it stops the child's EAL.
func childDone(bad []string, err error) int {
	dir := RuntimeDir()
	CleanupEAL()
	RemoveRuntimeDir(dir)
	switch {
	case err != nil:
		fmt.Println(err)
		return 1
	case len(bad) > 0:
		fmt.Println(strings.Join(bad, "\n"))
		return 1
	}
	fmt.Println("clean")
	return 0
}

// ealLaunchChild makes TestMain start an EAL with the file prefix it names
// while goroutines hold threads in system calls, and print "clean" or the
// threads lcoreClones finds.
const ealLaunchChild = "FULCRUM_DPDK_EAL_LAUNCH_CHILD"

func launchChild(prefix string) int {
	var err error
	if startAffinity, err = threadAffinity(0); err != nil {
		fmt.Println(err)
		return 1
	}
	lcores := lcoreLayout(8)
	// Every P busy with goroutines that start more, so that the
	// runtime's threads are rarely idle: a goroutine readied then
	// (InitEAL's caller, by each lcore's listener as it starts) needs a
	// new thread, started from the readying one unless it is locked.
	// With go-dpdk's listener, about 4 children in 10 had a clone (on
	// 2 CPUs; 1 in 10 with a goroutine a P or GOMAXPROCS raised).
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 4 * runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				done := make(chan struct{})
				go func() { close(done) }()
				<-done
			}
		}()
	}
	err = InitEAL([]string{"--lcores", lcores, "--no-huge", "-m", "64", "--no-pci", "--file-prefix", prefix, "--log-level", "warning"})
	stop.Store(true)
	wg.Wait()
	if err != nil {
		fmt.Println("eal error:", err)
		return 1
	}
	return childDone(lcoreClones())
}

// TestWorkerLcoreLogHeldUntilLocked: the EAL logs from each worker lcore's
// thread as it starts ("lcore N is ready", at debug level), before the
// launch, and a log line enters Go: a thread the Go runtime started then
// would keep the lcore's CPU and name. With the EAL's debug log on, every
// such line reaches the logger, and none is handled on a worker lcore's
// thread before InitEAL returns.
func TestWorkerLcoreLogHeldUntilLocked(t *testing.T) {
	if len(WorkerLcores()) == 0 {
		t.Skip("needs a worker lcore")
	}
	runEALChild(t, ealLogChild, fmt.Sprintf("fulcrum-test-launchlog-%d", os.Getpid()))
}

// ealLogChild makes TestMain start an EAL of eight worker lcores with
// the EAL's debug log on, into a logger that notes the thread of each
// record, and print "clean" or what is wrong.
const ealLogChild = "FULCRUM_DPDK_EAL_LOG_CHILD"

type threadRecord struct {
	tid int
	msg string
}

// threadRecorder is a slog handler that notes each record's message and
// the thread that handled it.
type threadRecorder struct {
	mu   *sync.Mutex
	recs *[]threadRecord
}

func (h threadRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h threadRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	*h.recs = append(*h.recs, threadRecord{unix.Gettid(), r.Message})
	h.mu.Unlock()
	return nil
}
func (h threadRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h threadRecorder) WithGroup(string) slog.Handler      { return h }

func logChild(prefix string) int {
	var mu sync.Mutex
	var recs []threadRecord
	if err := SetLogger(slog.New(threadRecorder{&mu, &recs})); err != nil {
		fmt.Println(err)
		return 1
	}
	n := 8
	err := InitEAL([]string{"--lcores", lcoreLayout(n), "--no-huge", "-m", "64", "--no-pci", "--file-prefix", prefix, "--log-level", "lib.eal:debug"})
	mu.Lock()
	atInit := slices.Clone(recs)
	mu.Unlock()
	if err != nil {
		fmt.Println("eal error:", err)
		return 1
	}
	return childDone(heldLogProblems(atInit))
}

// heldLogProblems checks the records InitEAL logged against each worker
// lcore's thread: its "lcore N is ready" is there, and none was handled
// on it.
func heldLogProblems(atInit []threadRecord) (bad []string, err error) {
	for _, id := range WorkerLcores() {
		var tid int
		if err := RunOnLcore(id, func() error { tid = unix.Gettid(); return nil }); err != nil {
			return nil, err
		}
		ready := fmt.Sprintf("lcore %d is ready", id)
		seen := false
		for _, r := range atInit {
			if r.tid == tid {
				bad = append(bad, fmt.Sprintf("%q handled on lcore %d's thread %d before its listener ran", r.msg, id, tid))
			}
			seen = seen || strings.Contains(r.msg, ready)
		}
		if !seen {
			bad = append(bad, fmt.Sprintf("no %q among the %d records InitEAL logged", ready, len(atInit)))
		}
	}
	return bad, nil
}

func dirExists(dir string) bool {
	st, err := os.Stat(dir)
	return err == nil && st.IsDir()
}
