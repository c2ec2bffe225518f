//go:build dpdk

package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// ownPrefixConfig is exampleConfig with its input pcap copied into dir
// (a test that drops privileges reads it there) and a file prefix of the
// test's own, which it returns.
func ownPrefixConfig(t *testing.T, dir string) (cfg, prefix string) {
	t.Helper()
	in, err := os.ReadFile("../../examples/in.pcap")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "in.pcap"), in, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg = exampleConfig(t, dir, filepath.Join(dir, "in.pcap"), filepath.Join(dir, "out.pcap"))
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	prefix = fmt.Sprintf("fulcrum-hostlim-%d-%d", os.Getpid(), time.Now().UnixNano()%1e9)
	s := strings.Replace(string(b), fmt.Sprintf(`file_prefix = "fulcrum-pcaptest-%d"`, os.Getpid()), fmt.Sprintf("file_prefix = %q", prefix), 1)
	if err := os.WriteFile(cfg, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg, prefix
}

// TestRunFullRuntimeDirExitsCleanly starts the daemon with DPDK's runtime
// base (/var/run/dpdk, a tmpfs under /run) nearly full: a private mount
// namespace with a 64 KiB tmpfs there. The EAL's shared config and its
// memseg arrays are files it mmaps there and then writes: on a full tmpfs
// that write is a SIGBUS, and the daemon died inside rte_eal_init with a
// Go crash dump and exit status 2 (documented as "bad configuration"),
// leaving its runtime files in the full directory. It must refuse with
// exit status 1 before touching DPDK, leaving nothing behind.
func TestRunFullRuntimeDirExitsCleanly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (mount namespace, DPDK)")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare(1)")
	}
	bin := buildFulcrum(t)
	dir := t.TempDir()
	cfg, prefix := ownPrefixConfig(t, dir)
	left := filepath.Join(dir, "leftover")
	// Everything happens inside the namespace: the tmpfs vanishes with it.
	script := `set -e
mount --make-rprivate /
mkdir -p /run/dpdk
mount -t tmpfs -o size=64k tmpfs /run/dpdk
set +e
"$BIN" run -c "$CFG" --exit-when-idle 1s --stats-interval 0
rc=$?
if [ -e "/run/dpdk/$PREFIX" ]; then : > "$LEFT"; fi
exit $rc`
	cmd := exec.Command("unshare", "-m", "sh", "-c", script)
	cmd.Env = append(os.Environ(), "BIN="+bin, "CFG="+cfg, "PREFIX="+prefix, "LEFT="+left)
	out, err := cmd.CombinedOutput()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code != 1 {
		t.Errorf("exit status %d, want 1 (a runtime failure named before the EAL starts)\n%s", code, tail(out, 1500))
	}
	if _, err := os.Stat(left); err == nil {
		t.Errorf("the runtime directory /var/run/dpdk/%s was left in the full tmpfs", prefix)
	}
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// TestRunNonRootRemovesRuntimeDir runs the daemon as nobody (setpriv),
// where DPDK keeps its runtime directory under $XDG_RUNTIME_DIR/dpdk or
// /tmp/dpdk, not /var/run/dpdk. A clean stop must remove it as it does
// root's: it was left behind on every stop (6 MiB at memory_mb = 512),
// only a warning saying so.
func TestRunNonRootRemovesRuntimeDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to drop to nobody")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("no setpriv(1)")
	}
	bin := buildFulcrum(t)
	// Everything nobody must read or write: a directory of its own.
	dir, err := os.MkdirTemp("", "fulcrum-hostlim-nonroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	xdg := filepath.Join(dir, "xdg")
	for _, d := range []string{dir, xdg} {
		os.MkdirAll(d, 0o777)
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	nbin := filepath.Join(dir, "fulcrum")
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(nbin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, prefix := ownPrefixConfig(t, dir)
	runDir := filepath.Join(xdg, "dpdk", prefix)
	cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
		nbin, "run", "-c", cfg, "--exit-when-idle", "1s", "--stats-interval", "0")
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+xdg)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("fulcrum run as nobody: %v\n%s", err, tail(out, 1500))
	}
	if ents, err := os.ReadDir(runDir); err == nil {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("runtime directory %s left with %v after a clean stop", runDir, names)
	}
}

// TestRunEALFailureLeavesNoRuntimeFiles: an EAL that fails after it made
// its shared config (here hugepages = true on a host with none reserved,
// "Cannot get hugepage information") left /var/run/dpdk/<prefix> with
// config and mp_socket behind: the clean-up ran only once the EAL was up.
func TestRunEALFailureLeavesNoRuntimeFiles(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("DPDK needs root here")
	}
	if b, err := os.ReadFile("/proc/meminfo"); err != nil || !strings.Contains(string(b), "HugePages_Total:       0\n") {
		t.Skip("this host has hugepages reserved: the EAL would start")
	}
	bin := buildFulcrum(t)
	dir := t.TempDir()
	cfg, prefix := ownPrefixConfig(t, dir)
	b, _ := os.ReadFile(cfg)
	if err := os.WriteFile(cfg, []byte(strings.Replace(string(b), "hugepages = false", "hugepages = true", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Join("/var/run/dpdk", prefix)
	t.Cleanup(func() { os.RemoveAll(runDir) })
	out, err := exec.Command(bin, "run", "-c", cfg).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("exit %v, want status 1\n%s", err, tail(out, 1500))
	}
	if ents, err := os.ReadDir(runDir); err == nil {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("failed start left %s with %v", runDir, names)
	}
}
