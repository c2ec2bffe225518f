// Package scripts tests the shell scripts that make's targets run, on
// their failure paths, with fakes for the tools they drive.
package scripts

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func writeExec(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o755); err != nil {
		t.Fatal(err)
	}
}

// make icount must fail when a valgrind run fails (the SIGILL its own
// comment describes, a crash of the scenario), not print figures made
// from an empty count and exit 0.
func TestICountFailsWhenValgrindFails(t *testing.T) {
	fake := t.TempDir()
	// valgrind that counts the P-packet run and crashes on the 5P one.
	writeExec(t, filepath.Join(fake, "valgrind"), `#!/bin/sh
case "$FULCRUM_ICOUNT" in
*:160000) echo "==1== Process terminating with default action of signal 4 (SIGILL)"; exit 132 ;;
*) echo "==1== I   refs:      1,000,000"; exit 0 ;;
esac
`)
	cmd := exec.Command("./icount.sh", "est10k")
	cmd.Env = append(os.Environ(), "PATH="+fake+":"+os.Getenv("PATH"), "ICOUNT_BIN=/bin/true", "ICOUNT_PACKETS=32000")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err == nil {
		t.Fatalf("icount.sh exited 0 although valgrind failed; it printed:\n%s", out.String())
	}
}

// scripts/deb-test.sh bind-mounts /dev and /sys into its chroot. On a
// host whose mounts are shared (systemd makes every mount shared), its
// cleanup's unmounts propagate back and unmount the host's /dev/pts,
// /dev/shm, /dev/hugepages, /sys/fs/cgroup... The test runs the script in
// a mount namespace of its own (private from the host), made shared as
// systemd's is, with a cached root that stops the script at its first
// chroot, and compares the mounts under /dev and /sys before and after.
func TestDebTestKeepsHostMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (mount namespaces)")
	}
	for _, tool := range []string{"unshare", "findmnt"} {
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
	// A cached root that has bash but nothing else: the script's first
	// command in it fails, and it cleans up.
	writeExec(t, filepath.Join(base, "bin", "bash"), "#!/bin/sh\nexit 1\n")
	deb := filepath.Join(t.TempDir(), "fulcrum.deb")
	if err := os.WriteFile(deb, []byte("not a package"), 0o644); err != nil {
		t.Fatal(err)
	}
	sh := `set -e
mount --make-rshared /
n() { findmnt -rn -o TARGET | grep -cE '^/(dev|sys)/' || true; }
before=$(n)
FRESH_BASE="$1" ./deb-test.sh "$2" >/dev/null 2>&1 || true
echo "$before $(n)"`
	out, err := exec.Command("unshare", "-m", "--propagation", "private", "bash", "-c", sh, "sh", base, deb).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		t.Fatalf("output %q", out)
	}
	before, _ := strconv.Atoi(f[0])
	after, _ := strconv.Atoi(f[1])
	if before == 0 {
		t.Skip("no mounts under /dev or /sys here")
	}
	if after != before {
		t.Errorf("mounts under /dev and /sys: %d before deb-test.sh, %d after (its cleanup unmounted the host's)", before, after)
	}
}

// make demo must not take over a lab that another run (make lab-test,
// which holds /tmp/fulcrum-lab.lock for its whole run, or another demo)
// is using: its `lab.sh up` begins with `down`, which kills every fl-*
// namespace's processes, and its exit trap runs `down` again. The test
// holds the lock, as lab_test.go does, and runs the demo with a fake
// lab.sh that records what it is asked.
func TestDemoRespectsLabLock(t *testing.T) {
	lock, err := os.OpenFile("/tmp/fulcrum-lab.lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Skipf("lab lock: %v", err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			t.Skip("a lab run holds the lock")
		}
		t.Fatal(err)
	}
	defer unix.Flock(int(lock.Fd()), unix.LOCK_UN)
	tree := t.TempDir()
	demo, err := os.ReadFile("lab/demo.sh")
	if err != nil {
		t.Fatal(err)
	}
	writeExec(t, filepath.Join(tree, "scripts", "lab", "demo.sh"), string(demo))
	calls := filepath.Join(tree, "calls")
	writeExec(t, filepath.Join(tree, "scripts", "lab", "lab.sh"), "#!/bin/sh\necho \"$*\" >>'"+calls+"'\n[ \"$1\" != up ]\n")
	cmd := exec.Command(filepath.Join(tree, "scripts", "lab", "demo.sh"))
	cmd.Env = append(os.Environ(), "LAB_DIR="+filepath.Join(tree, "lab"))
	out, _ := cmd.CombinedOutput()
	if b, err := os.ReadFile(calls); err == nil && len(b) > 0 {
		t.Errorf("with the lab lock held by another run, the demo ran lab.sh %q (output %q)", strings.Fields(strings.ReplaceAll(string(b), "\n", ";")), out)
	}
}

// A debootstrap interrupted (Ctrl-C, a power cut) after it has unpacked
// bash leaves a root that has /bin/bash but was never configured: the next
// deb-test must make the root again, not take the broken one as its cache
// and fail every run in apt-get or dpkg inside it.
func TestDebTestRemakesInterruptedRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	base := filepath.Join(t.TempDir(), "fresh")
	writeExec(t, filepath.Join(base, "bin", "bash"), "#!/bin/sh\nexit 1\n")        // unpacked, not configured
	if err := os.MkdirAll(filepath.Join(base, "debootstrap"), 0o755); err != nil { // debootstrap's working directory, removed only at its end
		t.Fatal(err)
	}
	fake := t.TempDir()
	called := filepath.Join(fake, "called")
	// A debootstrap that notes it ran and fails: the script stops there.
	writeExec(t, filepath.Join(fake, "debootstrap"), "#!/bin/sh\ntouch '"+called+"'\nexit 1\n")
	deb := filepath.Join(t.TempDir(), "fulcrum.deb")
	os.WriteFile(deb, []byte("x"), 0o644)
	cmd := exec.Command("unshare", "-m", "--propagation", "private", "./deb-test.sh", deb)
	cmd.Env = append(os.Environ(), "PATH="+fake+":"+os.Getenv("PATH"), "FRESH_BASE="+base)
	out, _ := cmd.CombinedOutput()
	if _, err := os.Stat(called); err != nil {
		t.Errorf("deb-test.sh took a root left by an interrupted debootstrap as its cache (output %q)", out)
	}
}
