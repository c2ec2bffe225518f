package scripts

// Interrupted and overlapping runs of the lab, the demo, the package test
// and the fuzz script: what a run killed at a chosen point leaves behind,
// and what a second run started meanwhile does to the first.

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// holdLabLock takes /tmp/fulcrum-lab.lock as the lab test and the demo
// do, or skips when a lab run holds it.
func holdLabLock(t *testing.T) *os.File {
	t.Helper()
	lock, err := os.OpenFile("/tmp/fulcrum-lab.lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Skipf("lab lock: %v", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			t.Skip("a lab run holds the lock")
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Flock(int(lock.Fd()), unix.LOCK_UN); lock.Close() })
	return lock
}

// waitFile polls for path to exist, at most d.
func waitFile(path string, d time.Duration) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return true
		}
	}
	return false
}

// alive: pid runs and its command line names mark (so a reused pid of
// another program is not taken for ours).
func alive(pid int, mark string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	st, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if f := strings.Fields(string(st)); len(f) > 2 && f[2] == "Z" {
		return false
	}
	return strings.Contains(string(b), mark)
}

// The lab test (scripts/lab, make lab-test) brings the lab up in TestMain
// with `lab.sh up` while it holds the lab lock, and tears it down in a
// deferred call. Killed while up runs (CI cancelling the job with
// SIGTERM, `timeout`, go test's own "ran too long" kill, which fell on a
// slow `up` on this 2-core machine), the test binary dies at once: the
// lock is free, but `lab.sh up` goes on as an orphan, builds into
// /tmp/fulcrum-lab/bin and starts a whole lab nobody owns or will tear
// down, racing with the next run that takes the lock. The test builds the
// lab test binary, runs it beside a fake lab.sh whose up never ends, and
// signals it once up has begun: up must not outlive it, and on SIGTERM the
// lab must be torn down (down called).
func TestLabTestKilledLeavesNoLab(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (the lab test skips otherwise)")
	}
	if exec.Command("pkg-config", "--exists", "libdpdk").Run() != nil {
		t.Skip("no libdpdk: the lab test does not build")
	}
	for _, tool := range []string{"bird", "birdc", "curl", "wrk", "ethtool", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed: the lab test stops before up", tool)
		}
	}
	bin := filepath.Join(t.TempDir(), "lab.test")
	if out, err := exec.Command("go", "test", "-c", "-tags", "dpdk,lab", "-o", bin, "./lab").CombinedOutput(); err != nil {
		t.Fatalf("building the lab test: %v\n%s", err, out)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			// Checked before every run: the binary's TestMain waits for the
			// lock, and is then killed; a lab run must not be waiting too.
			l := holdLabLock(t)
			unix.Flock(int(l.Fd()), unix.LOCK_UN)
			dir := t.TempDir()
			mark := filepath.Join(dir, "lab.sh")
			writeExec(t, mark, `#!/bin/bash
cd "$(dirname "$0")"
echo "$1" >>calls
if [ "$1" = up ]; then
	echo $$ >up.pid
	while :; do sleep 0.1; done
fi
`)
			cmd := exec.Command(bin, "-test.run", "^$")
			cmd.Dir = dir
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				cmd.Process.Kill()
				cmd.Wait()
				if b, err := os.ReadFile(filepath.Join(dir, "up.pid")); err == nil {
					if pid, _ := strconv.Atoi(strings.TrimSpace(string(b))); pid > 0 && alive(pid, mark) {
						syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			})
			if !waitFile(filepath.Join(dir, "up.pid"), 60*time.Second) {
				t.Fatal("harness: the lab test never ran lab.sh up")
			}
			b, _ := os.ReadFile(filepath.Join(dir, "up.pid"))
			upPid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			cmd.Process.Signal(sig)
			cmd.Wait()
			for end := time.Now().Add(10 * time.Second); alive(upPid, mark) && time.Now().Before(end); {
				time.Sleep(50 * time.Millisecond)
			}
			if alive(upPid, mark) {
				t.Errorf("the lab test died of %v, and its `lab.sh up` (PID %d) runs on without the lab lock", sig, upPid)
			}
			calls, _ := os.ReadFile(filepath.Join(dir, "calls"))
			if sig == syscall.SIGTERM && !strings.Contains(string(calls), "down") {
				t.Errorf("the lab test stopped by SIGTERM never tore the lab down: lab.sh calls %q", strings.Fields(string(calls)))
			}
		})
	}
}

// `lab.sh up` and `lab.sh down` (README: "scripts/lab/lab.sh up|down
// builds this on one machine") act without the lab lock that the lab test
// and the demo hold for their whole run: up begins with down, and down
// kills the processes of every fl-* namespace and deletes them, so an
// operator who brings the lab up or down by hand while CI's lab test (or a
// demo) runs destroys that run's lab under it. With the lock held, as a
// running lab test holds it, down must refuse and leave the namespaces.
func TestLabScriptRespectsLabLock(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces)")
	}
	holdLabLock(t)
	const probe = "fl-lb9" // a lab name: down would remove it without the lock
	if out, err := exec.Command("ip", "netns", "add", probe).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", probe).Run() })
	cmd := exec.Command("./lab/lab.sh", "down")
	cmd.Env = append(os.Environ(), "LAB_DIR="+t.TempDir())
	out, _ := cmd.CombinedOutput()
	if exec.Command("ip", "netns", "exec", probe, "true").Run() != nil {
		t.Errorf("with the lab lock held by a running lab, `lab.sh down` deleted its namespace %s (output %q)", probe, out)
	}
}

// scripts/deb-test.sh mounts a 4 GB tmpfs on /tmp/fulcrum-debtest.XXXXXX,
// an overlay over the cached root on it, and proc, /sys and /dev (rbind)
// under that, and undoes them in an EXIT trap. Killed by SIGKILL (a CI
// job's hard kill, the OOM killer) the trap does not run: the mounts stay,
// with the tmpfs's contents (the packages apt-get installed) in memory, a
// live bind of the host's /dev and /sys under /tmp, and no later run
// removes them (each makes a new directory). The test runs the script in
// a mount namespace of its own, with a cached root and a chroot that
// waits, kills the script's process group with SIGKILL once it is in the
// chroot, runs it again, and counts the mounts under
// /tmp/fulcrum-debtest.* left.
func TestDebTestKilledLeavesNoMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (mount namespaces)")
	}
	for _, tool := range []string{"unshare", "findmnt", "setsid"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	base := t.TempDir()
	for _, d := range []string{"dev", "sys", "proc", "etc", "tmp"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeExec(t, filepath.Join(base, "bin", "bash"), "#!/bin/sh\nexit 1\n")
	fake := t.TempDir()
	// chroot: the first run waits in it (apt-get update's place); once
	// fail-now exists, it fails at once.
	writeExec(t, filepath.Join(fake, "chroot"), "#!/bin/sh\n[ -e '"+fake+"/fail-now' ] && exit 1\ntouch '"+fake+"/in-chroot'\nexec sleep 600\n")
	deb := filepath.Join(t.TempDir(), "fulcrum.deb")
	if err := os.WriteFile(deb, []byte("not a package"), 0o644); err != nil {
		t.Fatal(err)
	}
	before, _ := filepath.Glob("/tmp/fulcrum-debtest.*")
	t.Cleanup(func() {
		// The killed run's directory (its mounts went with the namespace).
		after, _ := filepath.Glob("/tmp/fulcrum-debtest.*")
		for _, d := range after {
			if !contains(before, d) {
				os.Remove(d) // empty: never recursive, it might hold a bind of /dev
			}
		}
	})
	sh := `fake=$1 base=$2 deb=$3
n() { findmnt -rn -o TARGET | grep -c '^/tmp/fulcrum-debtest\.' || true; }
before=$(n)
PATH="$fake:$PATH" FRESH_BASE="$base" setsid ./deb-test.sh "$deb" >/dev/null 2>&1 &
pid=$!
for i in $(seq 400); do [ -e "$fake/in-chroot" ] && break; sleep 0.05; done
[ -e "$fake/in-chroot" ] || { echo "harness: deb-test.sh never reached its chroot"; kill -KILL -- -$pid; exit 1; }
kill -KILL -- -$pid
wait $pid 2>/dev/null
touch "$fake/fail-now"
PATH="$fake:$PATH" FRESH_BASE="$base" ./deb-test.sh "$deb" >/dev/null 2>&1
echo "$before $(n)"
for m in $(findmnt -rn -o TARGET | grep '^/tmp/fulcrum-debtest\.[^/]*$'); do umount -R -l "$m"; done`
	out, err := exec.Command("unshare", "-m", "--propagation", "private", "bash", "-c", sh, "sh", fake, base, deb).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// The counts are the last line: bash may report the killed job
	// ("Killed ...") on its stderr before it, at a moment of its own.
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	f := strings.Fields(lines[len(lines)-1])
	if len(f) != 2 {
		t.Fatalf("output %q", out)
	}
	if f[0] != f[1] {
		t.Errorf("mounts under /tmp/fulcrum-debtest.*: %s before, %s after a run killed with SIGKILL and another run (a tmpfs, the overlay, proc and binds of the host's /sys and /dev left for good)", f[0], f[1])
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// scripts/fuzz.sh (make fuzz, part of make test) sends each target's go
// test output to the fixed /tmp/fulcrum-fuzz.log and, when the target
// fails, prints that file and decides from it whether to try again. Two
// make test runs on one machine (two clones, CI and a developer) share the
// file: a run whose target failed prints the other run's log, its own
// failure (the panic, the failing input's path) lost. The test runs two
// fuzz.sh at once with a fake go whose first run fails while the second
// passes, in a private /tmp (a mount namespace) so that no real run's log
// is touched.
func TestFuzzLogNotSharedBetweenRuns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (mount namespaces)")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("unshare not installed")
	}
	priv := t.TempDir()
	src, err := os.ReadFile("fuzz.sh")
	if err != nil {
		t.Fatal(err)
	}
	writeExec(t, filepath.Join(priv, "tree", "scripts", "fuzz.sh"), string(src))
	if err := os.MkdirAll(filepath.Join(priv, "pkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(priv, "pkg", "x_test.go"), []byte("package p\n\nfunc FuzzX(f *testing.F) {}\n"), 0o644)
	// As seen after /tmp is replaced by priv: /tmp/fake/go.
	writeExec(t, filepath.Join(priv, "fake", "go"), `#!/bin/bash
case $1 in
list) echo "example.com/p /tmp/pkg x_test.go" ;;
test)
	if [ "$RUN" = A ]; then
		echo "--- FAIL: FuzzX: run A's own failure"
		echo "    Failing input written to testdata/fuzz/FuzzX/a"
		touch /tmp/a-wrote
		for i in $(seq 200); do [ -e /tmp/b-done ] && break; sleep 0.05; done
		exit 1
	fi
	for i in $(seq 200); do [ -e /tmp/a-wrote ] && break; sleep 0.05; done
	echo "ok  	example.com/p	4.1s (run B)"
	touch /tmp/b-done
	;;
esac
`)
	sh := `mount --bind "$1" /tmp || exit 1
cd /tmp/tree
PATH=/tmp/fake:$PATH RUN=A FUZZTIME=1s scripts/fuzz.sh >/tmp/a.out 2>&1 &
a=$!
PATH=/tmp/fake:$PATH RUN=B FUZZTIME=1s scripts/fuzz.sh >/tmp/b.out 2>&1
wait $a
cat /tmp/a.out`
	out, err := exec.Command("unshare", "-m", "--propagation", "private", "bash", "-c", sh, "sh", priv).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.Contains(string(out), "FuzzX FAILED") {
		t.Fatalf("harness: run A did not fail: %q", out)
	}
	if !strings.Contains(string(out), "run A's own failure") {
		t.Errorf("a fuzz run whose target failed printed another run's log, not its own failure:\n%s", out)
	}
}

// make demo "tears the lab down at the end, also on Ctrl-C" (README). Its
// trap does (`lab down` on EXIT, INT and TERM), but the INT/TERM trap
// does not exit: the demo resumes where the signal fell, on a lab that is
// gone. Stopped while it waits for the router to drop the killed lb1, it
// finds no route left (the router's namespace is gone), prints "the router
// took lb1 out of the ECMP route ... after the kill" and goes on for up to
// 40 s more. The test runs the demo with fakes for lab.sh, ip (the
// namespaces' commands) and fulcrumctl, sends SIGINT to its process group
// (Ctrl-C) once lb1 has been killed, and watches what it prints next.
func TestDemoStopsOnCtrlC(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	holdLabLock(t).Close() // no lab run may hold it: the demo takes it
	tree := t.TempDir()
	demo, err := os.ReadFile("lab/demo.sh")
	if err != nil {
		t.Fatal(err)
	}
	lab := filepath.Join(tree, "lab")
	calls := filepath.Join(tree, "calls")
	writeExec(t, filepath.Join(tree, "scripts", "lab", "demo.sh"), string(demo))
	writeExec(t, filepath.Join(tree, "scripts", "lab", "lab.sh"), "#!/bin/sh\necho \"$*\" >>'"+calls+"'\n")
	writeExec(t, filepath.Join(lab, "bin", "fulcrumctl"), "#!/bin/sh\necho '{\"total\":{\"forwarded\":1}}'\n")
	fake := filepath.Join(tree, "fake")
	// ip netns exec NS CMD...: the router's route has lb1 and lb2 until
	// the lab is down; the client's curl answers; its conncheck writes a
	// report of 200 open connections and runs on.
	writeExec(t, filepath.Join(fake, "ip"), `#!/bin/bash
[ "$1 $2" = "netns exec" ] || exit 1
grep -q '^down' '`+calls+`' 2>/dev/null && exit 1
case "$4" in
ip) printf '203.0.113.7 proto bird\n\tnexthop via 10.77.2.11\n\tnexthop via 10.77.2.12\n' ;;
curl) echo "HTTP 200 from be1" ;;
*fulcrum-conncheck)
	while [ $# -gt 0 ]; do [ "$1" = -report ] && r=$2; shift; done
	echo '{"connections": 200, "per_backend": {"be1": 200}, "stalled": 0}' >"$r"
	exec sleep 600 ;;
esac
`)
	cmd := exec.Command("setsid", filepath.Join(tree, "scripts", "lab", "demo.sh"))
	cmd.Env = append(os.Environ(), "LAB_DIR="+lab, "PATH="+fake+":"+os.Getenv("PATH"))
	outPath := filepath.Join(tree, "out")
	outf, _ := os.Create(outPath)
	cmd.Stdout, cmd.Stderr = outf, outf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); <-done })
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		b, _ := os.ReadFile(calls)
		if strings.Contains(string(b), "stop-lb 1 KILL") {
			break
		}
		if time.Now().After(end) {
			o, _ := os.ReadFile(outPath)
			t.Fatalf("harness: the demo never killed lb1; lab.sh calls %q, output:\n%s", b, o)
		}
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) // Ctrl-C
	const claim = "took lb1 out of the ECMP route"
	for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		o, _ := os.ReadFile(outPath)
		if strings.Contains(string(o), claim) {
			b, _ := os.ReadFile(calls)
			t.Fatalf("after Ctrl-C and its teardown the demo went on and reported on a lab that no longer exists (lab.sh calls %q):\n%s", strings.Split(strings.TrimSpace(string(b)), "\n"), o)
		}
		select {
		case <-done:
			b, _ := os.ReadFile(calls)
			if !strings.Contains(string(b), "down") {
				t.Errorf("the demo stopped by Ctrl-C did not tear the lab down: lab.sh calls %q", b)
			}
			return
		default:
		}
	}
	t.Error("the demo was still running 60 s after Ctrl-C")
}
