//go:build dpdk

package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// shdPnd reads the process-wide pending signal mask of pid
// (/proc/PID/status, ShdPnd): a signal sent with kill() is pending there
// until one of the process's threads takes it.
func shdPnd(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "ShdPnd:"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
	}
	t.Fatal("no ShdPnd in /proc status")
	return 0
}

// deliver sends s to the daemon and waits until the process has taken
// it (it is no longer pending in the kernel).
func (d *daemon) deliver(s syscall.Signal) {
	d.t.Helper()
	d.signal(s)
	deadline := time.Now().Add(15 * time.Second)
	for shdPnd(d.t, d.cmd.Process.Pid)&(1<<(uint(s)-1)) != 0 {
		if d.exited() || time.Now().After(deadline) {
			d.t.Fatalf("signal %v still pending (exited: %v)\n%s", s, d.exited(), d.out.String())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRunStopAfterReloadStorm: a SIGTERM that arrives while the main loop
// is busy in a reload, with SIGHUPs already waiting (config management
// running `systemctl reload` a few times, then `systemctl stop`), must
// still stop the daemon: withdraw, clean-up, exit 0. The daemon's one
// signal channel holds 4 signals and os/signal drops what does not fit,
// so four queued SIGHUPs make the SIGTERM vanish: the daemon reloads four
// more times and keeps running until systemd's SIGKILL (TimeoutStopSec,
// 11 minutes) kills it without a BGP withdraw or clean-up.
//
// The reload is held here by the systemd notification socket, which the
// test stops reading (its queue fills and the daemon's RELOADING/READY
// write waits): it stands for a reload that takes seconds (every Maglev
// table built twice at the configuration limits).
func TestRunStopAfterReloadStorm(t *testing.T) {
	needDPDKRoot(t)
	bin := buildFulcrum(t)
	dir := t.TempDir()
	cfg, runDir := lifecycleConfig(t, dir, "../../examples/in.pcap", "")
	d := startDaemon(t, bin, dir, runDir, nil, "run", "-c", cfg, "--stats-interval", "0")
	d.waitReady()
	// Nobody reads the notification socket now: after a few reloads the
	// main loop waits in one; the SIGHUPs after that queue up.
	for i := 0; i < 30; i++ {
		d.deliver(syscall.SIGHUP)
	}
	d.deliver(syscall.SIGTERM)
	// Read the notifications again: the reload in progress ends, and so
	// must the daemon.
	deadline := time.Now().Add(60 * time.Second)
	stopping := false
	for !d.exited() && time.Now().Before(deadline) {
		if d.next(100*time.Millisecond) == "STOPPING=1" {
			stopping = true
		}
	}
	for s := d.next(10 * time.Millisecond); s != ""; s = d.next(10 * time.Millisecond) {
		stopping = stopping || s == "STOPPING=1"
	}
	if !d.exited() {
		t.Fatalf("SIGTERM sent during a reload with SIGHUPs queued: the daemon is still running 60s later (STOPPING sent: %v)", stopping)
	}
	if code := d.wait(time.Second); code != 0 || !stopping {
		t.Fatalf("exit code %d, STOPPING sent %v; want 0, true\n%s", code, stopping, d.out.String())
	}
	d.runDirGone()
}
