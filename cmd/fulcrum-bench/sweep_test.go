package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// holdLockEnv makes the test binary, started by TestSweepStale, lock the
// file it names and hold the lock until its stdin closes, as a live DPDK
// primary process holds its config file.
const holdLockEnv = "FULCRUM_BENCH_TEST_HOLD_LOCK"

func TestMain(m *testing.M) {
	if p := os.Getenv(holdLockEnv); p != "" {
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err == nil {
			err = syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &syscall.Flock_t{Type: syscall.F_WRLCK})
		}
		if err != nil {
			os.Exit(3)
		}
		os.Stdout.WriteString("locked\n")
		bufio.NewReader(os.Stdin).ReadString('\n') // until the test closes stdin
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Only the runtime directories of a dead harness that no DPDK process
// holds are removed: a live harness's, one whose harness died but whose
// DPDK child still runs, and other programs' prefixes stay.
func TestSweepStale(t *testing.T) {
	dir := t.TempDir()
	mk := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "config"), make([]byte, 64), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	dead := mk("fbench-1001-est-10k-p1-f")
	deadToo := mk("fbench-1001-syn-flood-verify")
	live := mk("fbench-1002-est-10k-p1-f")
	held := mk("fbench-1003-est-1m-p2-t")
	other := mk("testpmd-1004")
	odd := mk("fbench-x-1")

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), holdLockEnv+"="+filepath.Join(held, "config"))
	in, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Wait()
	defer in.Close()
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "locked\n" {
		t.Fatalf("the lock holder did not lock: %q", line)
	}

	alive := func(pid int) bool { return pid == 1002 }
	got := sweepStale(dir, alive)
	slices.Sort(got)
	if want := []string{dead, deadToo}; !slices.Equal(got, want) {
		t.Errorf("removed %q, want %q", got, want)
	}
	for _, p := range []string{live, held, other, odd} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v; want it kept", p, err)
		}
	}
	for _, p := range []string{dead, deadToo} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s still there (%v)", p, err)
		}
	}
	// Once its holder has gone, the held directory goes too.
	in.Close()
	child.Wait()
	if got := sweepStale(dir, alive); !slices.Equal(got, []string{held}) {
		t.Errorf("after the holder exited: removed %q, want %q", got, []string{held})
	}
}
