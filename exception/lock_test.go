package exception

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestLockExclusive: two locks of one interface, through two open files
// of one process, conflict; the refusal names the holder's PID; another
// interface's lock is independent; a released lock can be taken again.
// Before, nothing kept two daemons started at the same instant from both
// passing CheckAbsent and joining one tap.
func TestLockExclusive(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run", "fulcrum") // made by Lock
	l1, err := Lock(dir, "fl0")
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("lock directory %s: %v", dir, err)
	}
	b, err := os.ReadFile(l1.Path())
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Errorf("lock file %s holds %q (%v), want this PID %d", l1.Path(), b, err, os.Getpid())
	}
	_, err = Lock(dir, "fl0")
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second lock of fl0: %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("PID %d", os.Getpid())) || !strings.Contains(err.Error(), "fl0") {
		t.Errorf("refusal %q names neither the interface nor the holder's PID %d", err, os.Getpid())
	}
	l2, err := Lock(dir, "fl1")
	if err != nil {
		t.Fatalf("another interface's lock: %v", err)
	}
	defer l2.Release()
	if err := l1.Release(); err != nil {
		t.Fatal(err)
	}
	l3, err := Lock(dir, "fl0")
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	l3.Release()
}

// TestLockNames: a name that is no interface name (and would leave the
// lock directory) is refused before anything is made.
func TestLockNames(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"", ".", "..", "a/b", "../x", "a\x00b", "0123456789abcdef"} {
		if l, err := Lock(dir, n); err == nil {
			l.Release()
			t.Errorf("Lock(%q) succeeded, want refused", n)
		}
	}
	if es, _ := os.ReadDir(dir); len(es) != 0 {
		t.Errorf("refused names left %v in %s", es, dir)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "x.lock")); err == nil {
		t.Errorf("a lock file outside %s", dir)
	}
	l, err := Lock(dir, "0123456789abcde") // 15 bytes: the longest
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
}

// TestLockReleasedByExit: a lock held by another process refuses this
// one, naming that process; once that process is killed (SIGKILL: no
// clean-up of its own), the lock is free at once, as for a daemon
// restarted after a crash.
func TestLockReleasedByExit(t *testing.T) {
	dir := t.TempDir()
	cmd := startLockHelper(t, dir, 0)
	_, err := Lock(dir, "flk0")
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("lock held by the helper: %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("PID %d", cmd.Process.Pid)) {
		t.Errorf("refusal %q does not name the helper's PID %d", err, cmd.Process.Pid)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait() // reaped: the process and its files are gone
	l, err := Lock(dir, "flk0")
	if err != nil {
		t.Fatalf("lock after its holder was killed: %v", err)
	}
	l.Release()
}

// startLockHelper starts TestLockHelperProcess with cloneflags and
// returns once it holds the lock of flk0 under dir; it is killed at the
// test's end.
func startLockHelper(t *testing.T, dir string, cloneflags uintptr) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockHelperProcess$")
	cmd.Env = append(os.Environ(), "FULCRUM_LOCK_HELPER="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: cloneflags}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		if cloneflags != 0 && errors.Is(err, syscall.EPERM) {
			t.Skip("needs root: a new network namespace")
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("helper said %q (%v), want \"locked\"", line, err)
	}
	return cmd
}

// Interface names are per network namespace: a daemon in another one
// (the fleet lab's two LBs, each with its fulcrum0, sharing /run) does
// not hold this namespace's lock of the same name.
func TestLockPerNetns(t *testing.T) {
	dir := t.TempDir()
	startLockHelper(t, dir, syscall.CLONE_NEWNET)
	l, err := Lock(dir, "flk0")
	if err != nil {
		t.Fatalf("flk0 locked in another network namespace: %v", err)
	}
	l.Release()
}

// TestLockHelperProcess is TestLockReleasedByExit's other process: it
// takes the lock, says so, and waits to be killed (or for its stdin to
// close).
func TestLockHelperProcess(t *testing.T) {
	dir := os.Getenv("FULCRUM_LOCK_HELPER")
	if dir == "" {
		t.Skip("helper process of TestLockReleasedByExit")
	}
	l, err := Lock(dir, "flk0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	fmt.Println("locked")
	bufio.NewReader(os.Stdin).ReadString('\n') // until killed
	runtime.KeepAlive(l)                       // its file's finalizer would drop the lock
	os.Exit(0)
}
