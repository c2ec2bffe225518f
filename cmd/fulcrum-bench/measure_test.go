package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Measure must come back, with an error, from a program that never prints
// counters, one that prints counters that never make a window, and one
// whose child holds the output pipe; and it must end them all.
func TestMeasureTimesOut(t *testing.T) {
	dir := t.TempDir()
	noTraffic := `{"time_unix_ms":1,"workers":1,"rx":0,"tx":0,"ct_hits":0,"ct_misses":0,"new_flows":0}`
	for _, tc := range []struct {
		name, script, want string
	}{
		{"silent", `echo $$ > PIDS; exec sleep 600`, "no counters"},
		{"chatty without counters", `echo $$ > PIDS; while :; do echo starting; sleep 0.05; done`, "no counters"},
		{"counters without traffic", `echo $$ > PIDS; while :; do echo '` + noTraffic + `'; sleep 0.05; done`, "no complete window"},
		{"child holds the pipe, ignores SIGTERM", `trap '' TERM; sleep 600 & echo $$ $! > PIDS; wait`, "no counters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pidPath := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".pids")
			j := &Job{Label: "fake", Argv: []string{"sh", "-c", strings.ReplaceAll(tc.script, "PIDS", pidPath)},
				Prefix: "fbench-fake-" + strconv.Itoa(os.Getpid()), LogPath: filepath.Join(dir, "fake.log"), Parser: newFulcrumParser(1)}
			tm := Timing{Warmup: 100 * time.Millisecond, Window: 200 * time.Millisecond, Startup: 300 * time.Millisecond, Stall: 300 * time.Millisecond, Exit: 300 * time.Millisecond}
			type out struct {
				r   Result
				err error
			}
			done := make(chan out, 1)
			go func() {
				r, err := Measure(context.Background(), j, tm, nil)
				done <- out{r, err}
			}()
			var o out
			select {
			case o = <-done:
			case <-time.After(60 * time.Second): // a hang guard, not a timing check
				t.Fatal("Measure did not return")
			}
			if o.err == nil || !strings.Contains(o.err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", o.err, tc.want)
			}
			b, err := os.ReadFile(pidPath)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range strings.Fields(string(b)) {
				pid, _ := strconv.Atoi(f)
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
					if syscall.Kill(pid, 0) != nil || zombie(pid) {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("process %d still runs", pid)
					}
				}
			}
		})
	}
}

// zombie reports whether pid has exited and waits for its parent to reap
// it (a child of the fake shell whose parent is gone is reaped by init).
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && s[i+2] == 'Z'
}
