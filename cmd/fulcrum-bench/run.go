package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Job is one run of one program (testpmd or Fulcrum) on one scenario.
type Job struct {
	Label   string   // "testpmd" or "fulcrum"
	Argv    []string // program and arguments
	Env     []string // added to the environment
	Prefix  string   // the EAL --file-prefix, whose runtime directory is removed after the run
	LogPath string   // the program's whole output goes here
	Parser  interface{ Line(string) (Sample, bool) }
}

// Result is what one run measured over its window.
type Result struct {
	Mpps      float64       // packets per second out (to net_null), millions
	RxMpps    float64       // packets per second in (from net_pcap), millions
	Span      time.Duration // the window actually measured
	HWMkB     uint64        // peak resident memory (VmHWM)
	GCWindow  int           // GC cycles that ended inside the window (Fulcrum)
	GCTotal   int           // GC cycles during the whole run
	HeapMB    int           // largest live heap a GC reported (Fulcrum)
	CTMissPct float64       // conntrack misses among lookups in the window (Fulcrum)
	NewMfps   float64       // new flows given a backend per second, millions, over all workers (Fulcrum)
	OtherCPUs float64       // CPUs busy with anything but this program during the window
	MinPct    float64       // slowest interval between two samples in the window, % of the window's rate (a GC pause or a preemption shows here)
	MinGC     bool          // a GC cycle ended in that slowest interval
}

// Timing of a run.
type Timing struct {
	Warmup  time.Duration // traffic before the window
	Window  time.Duration // measured span
	Startup time.Duration // longest wait for the first sample (a 1M-frame pcap loads for seconds)
	Stall   time.Duration // longest wait between samples once they flow
	Exit    time.Duration // longest wait for the program to exit after SIGTERM, then after SIGKILL (0: 20 s)
}

func (tm Timing) exit() time.Duration {
	if tm.Exit <= 0 {
		return 20 * time.Second
	}
	return tm.Exit
}

// line is one line of a program's output and when the harness read it.
type line struct {
	t time.Time
	s string
}

// Measure starts the job, reads its counters until the window is complete,
// stops it (SIGTERM, then SIGKILL) and removes its DPDK runtime directory,
// on every path out including ctx's cancellation (Ctrl-C).
func Measure(ctx context.Context, j *Job, tm Timing, pids *PIDFile) (Result, error) {
	logf, err := os.Create(j.LogPath)
	if err != nil {
		return Result{}, err
	}
	defer logf.Close()
	defer os.RemoveAll(dpdkRuntimeDir(j.Prefix))

	cmd := exec.Command(j.Argv[0], j.Argv[1:]...)
	cmd.Env = append(os.Environ(), j.Env...)
	cmd.Stdin = nil
	// If the harness dies without cleaning up, the kernel ends the child;
	// its own process group lets stop end whatever it started too (a
	// child holding the output pipes would keep the harness waiting).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return Result{}, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return Result{}, err
	}
	fmt.Fprintf(logf, "# %s\n", strings.Join(j.Argv, " "))
	if err := cmd.Start(); err != nil {
		return Result{}, fmt.Errorf("%s: %w", j.Label, err)
	}
	pid := cmd.Process.Pid
	pids.Add(pid)
	defer pids.Remove(pid)

	lines := make(chan line, 1024)
	var wg sync.WaitGroup
	for _, r := range []io.Reader{stdout, stderr} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := bufio.NewScanner(r)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				lines <- line{time.Now(), sc.Text()}
			}
		}()
	}
	exited := make(chan struct{})
	go func() { wg.Wait(); close(lines); cmd.Wait(); close(exited) }()

	// stop ends the program: SIGTERM to its process group, SIGKILL after
	// tm.Exit, and it stops waiting tm.Exit after that (the harness must
	// not hang on a process that even SIGKILL does not end at once).
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		syscall.Kill(-pid, syscall.SIGTERM)
		t := time.NewTimer(tm.exit())
		defer t.Stop()
		killed := false
		for {
			select {
			case l, ok := <-lines:
				if ok {
					fmt.Fprintln(logf, l.s)
					continue
				}
				lines = nil
			case <-exited:
				return
			case <-t.C:
				if killed {
					fmt.Fprintf(logf, "# fulcrum-bench: %s (pid %d) still running %v after SIGKILL; not waiting any longer\n", j.Label, pid, tm.exit())
					return
				}
				syscall.Kill(-pid, syscall.SIGKILL)
				killed = true
				t.Reset(tm.exit())
			}
		}
	}
	defer stop()

	var (
		samples []Sample
		gcs     []time.Time
		res     Result
		tail    []string
	)
	deadline := time.NewTimer(tm.Startup)
	defer deadline.Stop()
	// Counters that keep coming without ever completing a window (no
	// traffic forwarded) must not keep the run going either.
	limit := tm.Startup + tm.Warmup + tm.Window + tm.Stall
	total := time.NewTimer(limit)
	defer total.Stop()
	for {
		select {
		case <-ctx.Done():
			return Result{}, ctx.Err()
		case <-total.C:
			return Result{}, fmt.Errorf("%s: no complete window (traffic for %v after a %v warm-up) within %v (log %s)%s", j.Label, tm.Window, tm.Warmup, limit, j.LogPath, lastLines(tail))
		case <-deadline.C:
			return Result{}, fmt.Errorf("%s: no counters for %v (log %s)%s", j.Label, tm.Startup, j.LogPath, lastLines(tail))
		case l, ok := <-lines:
			if !ok {
				<-exited
				return Result{}, fmt.Errorf("%s exited (%v) before the window was complete (log %s)%s", j.Label, cmd.ProcessState, j.LogPath, lastLines(tail))
			}
			fmt.Fprintln(logf, l.s)
			if tail = append(tail, l.s); len(tail) > 8 {
				tail = tail[1:]
			}
			if mb, ok := gcLine(l.s); ok {
				gcs = append(gcs, l.t)
				res.HeapMB = max(res.HeapMB, mb)
				continue
			}
			s, ok := j.Parser.Line(l.s)
			if !ok {
				continue
			}
			s.T = l.t
			s.Busy = machineBusy()
			s.Own = processCPU(pid)
			samples = append(samples, s)
			if !deadline.Stop() {
				select {
				case <-deadline.C:
				default:
				}
			}
			deadline.Reset(tm.Stall)
			a, b, ok := Window(samples, tm.Warmup, tm.Window)
			if !ok {
				continue
			}
			res.HWMkB = procStatusKB(pid, "VmHWM:")
			stop()
			sa, sb := samples[a], samples[b]
			if sb.Tx <= sa.Tx {
				// A program that stopped forwarding (a leaked pool, a
				// stuck queue) has no rate to report: 0 is not a figure.
				return Result{}, fmt.Errorf("%s: forwarded nothing during the window (tx %d, rx %d -> %d; log %s)%s", j.Label, sb.Tx, sa.Rx, sb.Rx, j.LogPath, lastLines(tail))
			}
			res.Span = sb.T.Sub(sa.T)
			res.Mpps = rate(sa, sb, txOf) / 1e6
			res.MinPct = 100
			for k := a; k < b && res.Mpps > 0; k++ {
				if pct := 100 * rate(samples[k], samples[k+1], txOf) / 1e6 / res.Mpps; pct < res.MinPct {
					res.MinPct = pct
					res.MinGC = false
					for _, t := range gcs {
						if t.After(samples[k].T) && !t.After(samples[k+1].T) {
							res.MinGC = true
						}
					}
				}
			}
			res.RxMpps = rate(sa, sb, rxOf) / 1e6
			res.NewMfps = rate(sa, sb, func(s Sample) uint64 { return s.NewFlows }) / 1e6
			if lookups := (sb.CTHits - sa.CTHits) + (sb.CTMisses - sa.CTMisses); lookups > 0 {
				res.CTMissPct = 100 * float64(sb.CTMisses-sa.CTMisses) / float64(lookups)
			}
			ticks := float64(sb.Busy-sa.Busy) - float64(sb.Own-sa.Own)
			res.OtherCPUs = max(0, ticks/clockTicks/res.Span.Seconds())
			res.GCTotal = len(gcs)
			for _, t := range gcs {
				if !t.Before(sa.T) && !t.After(sb.T) {
					res.GCWindow++
				}
			}
			return res, nil
		}
	}
}

func lastLines(tail []string) string {
	if len(tail) == 0 {
		return ""
	}
	return "; last output:\n    " + strings.Join(tail, "\n    ")
}

// clockTicks is USER_HZ, the unit of /proc's CPU times: 100 on every Linux
// architecture Fulcrum runs on.
const clockTicks = 100

// machineBusy is the busy CPU ticks of all CPUs since boot (/proc/stat:
// user, nice, system, irq, softirq, steal).
func machineBusy() uint64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(first)
	var sum uint64
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system [idle iowait] irq softirq steal
		if i < len(f) {
			n, _ := strconv.ParseUint(f[i], 10, 64)
			sum += n
		}
	}
	return sum
}

// processCPU is the user and system ticks a process has used.
func processCPU(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state); utime is field 14
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	return u + st
}

// procStatusKB reads a kB field of /proc/PID/status.
func procStatusKB(pid int, key string) uint64 {
	return procKB(fmt.Sprintf("/proc/%d/status", pid), key)
}

// procKB reads a "Key:   N kB" field of a /proc file (status, meminfo).
func procKB(path, key string) uint64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, key) {
			n, _ := fieldAfter(l, key)
			return n
		}
	}
	return 0
}

// dpdkRuntimeDir is where DPDK keeps a process's runtime files (its config,
// the multi-process socket): /var/run/dpdk/PREFIX for root, else under
// XDG_RUNTIME_DIR or /tmp. Processes stopped by a signal leave it behind.
func dpdkRuntimeDir(prefix string) string {
	base := "/var/run"
	if os.Geteuid() != 0 {
		base = os.Getenv("XDG_RUNTIME_DIR")
		if base == "" {
			base = "/tmp"
		}
	}
	return filepath.Join(base, "dpdk", prefix)
}

// PIDFile lists the programs the harness is running, one PID a line, so
// scripts/bench.sh can end them by id if the harness itself is killed.
type PIDFile struct {
	path string
	mu   sync.Mutex
	pids map[int]bool
}

func NewPIDFile(path string) *PIDFile { return &PIDFile{path: path, pids: map[int]bool{}} }

func (p *PIDFile) Add(pid int)    { p.set(pid, true) }
func (p *PIDFile) Remove(pid int) { p.set(pid, false) }

func (p *PIDFile) set(pid int, on bool) {
	if p == nil || p.path == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.pids[pid] = true
	} else {
		delete(p.pids, pid)
	}
	var b strings.Builder
	for id := range p.pids {
		fmt.Fprintln(&b, id)
	}
	if err := os.WriteFile(p.path, []byte(b.String()), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "fulcrum-bench: %v\n", err)
	}
}

// errSkipped marks a run that cannot happen on this machine.
var errSkipped = errors.New("skipped")

// sweepStale removes the DPDK runtime directories under dir (the parent
// of dpdkRuntimeDir's) that an earlier harness killed without a chance to
// clean up left behind: those named fbench-PID-... whose PID is not
// alive and whose config file no DPDK process holds locked (the primary
// process keeps a write lock on it for its life, as
// rte_eal_primary_proc_alive checks). Each holds tens of MB of tmpfs. It
// returns the directories it removed.
func sweepStale(dir string, alive func(pid int) bool) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), "fbench-")
		if !ok || !e.IsDir() {
			continue
		}
		num, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(num)
		if err != nil || pid <= 0 || alive(pid) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if configLocked(filepath.Join(p, "config")) {
			continue
		}
		if os.RemoveAll(p) == nil {
			removed = append(removed, p)
		}
	}
	return removed
}

// configLocked says whether a process holds a lock on a DPDK runtime
// directory's config file (a file that is missing or cannot be opened
// holds none).
func configLocked(path string) bool {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk); err != nil {
		return true // unknown: keep it
	}
	return lk.Type != syscall.F_UNLCK
}

// pidAlive says whether a process with this id exists.
func pidAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
