//go:build dpdk

package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestRunNoThreadPinnedBesideTheLoop: the EAL pins each lcore's thread to
// its CPU, and a thread inherits its parent's affinity and name. The
// forwarding loop, idle, sleeps between polls (idle_backoff), and each time
// its thread hands its scheduler slot on, the Go runtime could start a new
// thread from it: pinned to the forwarding core and named after the lcore
// (the fleet lab's LBs had two to four such threads), where health checks,
// BGP, the admin API and the garbage collector then ran beside the loop.
// Over a few seconds of an idle daemon, each lcore's name belongs to one
// thread only, and no other thread is held to a worker lcore's CPU.
func TestRunNoThreadPinnedBesideTheLoop(t *testing.T) {
	needDPDKRoot(t)
	if runtime.NumCPU() < 2 {
		t.Skip("the example's worker lcore is CPU 1")
	}
	bin := buildFulcrum(t)
	dir := t.TempDir()
	cfg, runDir := lifecycleConfig(t, dir, "../../examples/in.pcap", "")
	d := startDaemon(t, bin, dir, runDir, nil, "run", "-c", cfg, "--stats-interval", "0")
	d.waitReady()
	pid := d.cmd.Process.Pid
	look := func() (bad []string) {
		names := map[string][]int{}
		ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/comm", pid, tid))
			if err != nil {
				continue // ended meanwhile
			}
			name := strings.TrimSpace(string(comm))
			names[name] = append(names[name], tid)
			var s unix.CPUSet
			if unix.SchedGetaffinity(tid, &s) == nil && s.Count() == 1 && s.IsSet(1) && !strings.HasPrefix(name, "rte-worker") {
				bad = append(bad, fmt.Sprintf("thread %d %q held to CPU 1, the worker lcore's", tid, name))
			}
		}
		for name, tids := range names {
			if strings.HasPrefix(name, "rte-worker") && len(tids) > 1 {
				bad = append(bad, fmt.Sprintf("%d threads named %q (%v): threads started from the lcore's", len(tids), name, tids))
			}
		}
		return bad
	}
	// An observation window: the threads appear as the runtime needs them.
	for end := time.Now().Add(4 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if bad := look(); len(bad) > 0 {
			t.Fatalf("%v", bad)
		}
	}
}
