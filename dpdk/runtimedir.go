//go:build dpdk

package dpdk

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// RuntimeBase is where a root EAL keeps one runtime directory per file
// prefix (DPDK's eal_get_runtime_dir: /var/run/dpdk/<prefix>).
const RuntimeBase = "/var/run/dpdk"

// runtimeFile reports whether name is a file DPDK 22.11 creates in a
// runtime directory: the shared config and its lock, the hugepage map,
// the memory segment and memzone arrays, the multi-process sockets and
// the telemetry sockets.
func runtimeFile(name string) bool {
	switch name {
	case "config", "hugepage_info", "mp_socket":
		return true
	}
	for _, p := range []string{"fbarray_", "mp_socket_", "dpdk_telemetry.v"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// RemoveRuntimeDir removes what DPDK left in dir, its runtime directory
// (RuntimeDir), after CleanupEAL: DPDK 22.11 does not, and a restart with
// the same file prefix must not trip over it. It removes only the files
// DPDK creates, only if dir resolves to a direct child of RuntimeBase,
// and then the directory itself if it is empty; anything else it leaves
// where it is and reports.
func RemoveRuntimeDir(dir string) error { return removeRuntimeDir(runtimeBase(), dir) }

func removeRuntimeDir(base, dir string) error {
	rbase, err := filepath.EvalSymlinks(base)
	if err != nil {
		return fmt.Errorf("dpdk runtime dir %s: %w", dir, err)
	}
	rdir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("dpdk runtime dir %s: %w", dir, err)
	}
	if filepath.Dir(rdir) != rbase || rdir == rbase {
		return fmt.Errorf("dpdk runtime dir %s: resolves to %s, not a directory directly under %s; left alone", dir, rdir, rbase)
	}
	ents, err := os.ReadDir(rdir)
	if err != nil {
		return fmt.Errorf("dpdk runtime dir %s: %w", dir, err)
	}
	var errs, kept []string
	for _, e := range ents {
		if e.IsDir() || !runtimeFile(e.Name()) {
			kept = append(kept, e.Name())
			continue
		}
		if err := os.Remove(filepath.Join(rdir, e.Name())); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(kept) > 0 {
		errs = append(errs, fmt.Sprintf("kept %s: not DPDK's", strings.Join(kept, ", ")))
	} else if err := os.Remove(rdir); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return fmt.Errorf("dpdk runtime dir %s: %w", dir, errors.New(strings.Join(errs, "; ")))
	}
	return nil
}

// runtimeBase is where the EAL of this process will keep its runtime
// directories: /var/run/dpdk for root, else $XDG_RUNTIME_DIR/dpdk or
// /tmp/dpdk (DPDK's eal_create_runtime_dir).
func runtimeBase() string {
	if os.Getuid() == 0 {
		return RuntimeBase
	}
	if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" {
		return filepath.Join(x, "dpdk")
	}
	return "/tmp/dpdk"
}

// CheckRuntimeSpace refuses to start the EAL where its runtime directory
// has less than need bytes free. The EAL mmaps its shared config and its
// memory segment arrays from files there and writes them whole: on a
// full tmpfs (/run) that write is a SIGBUS inside rte_eal_init, a crash
// that leaves the files behind, instead of an error.
func CheckRuntimeSpace(need uint64) error {
	dir := runtimeBase()
	// The nearest directory that exists: the EAL creates the rest.
	for {
		if _, err := os.Stat(dir); err == nil || filepath.Dir(dir) == dir {
			break
		}
		dir = filepath.Dir(dir)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return nil // nothing to say: the EAL reports what it meets
	}
	if free := st.Bavail * uint64(st.Bsize); free < need {
		return fmt.Errorf("DPDK runtime directory %s: %d KiB free, the EAL needs about %d KiB there for its shared memory files (free some space, or make the filesystem larger)",
			runtimeBase(), free>>10, need>>10)
	}
	return nil
}

// RemoveFailedRuntimeDir removes what a failed InitEAL left in the
// runtime directory of prefix: its shared config and multi-process
// socket, made before the EAL failed (no hugepages, a driver refusing).
// Only if the config's lock (DPDK's fcntl write lock) can be taken by
// this process: a directory whose config another primary holds ("Is
// another primary process running?") is that process's and is left
// alone, and so is one without a config.
func RemoveFailedRuntimeDir(prefix string) error {
	if ealRunning.Load() || prefix == "" || strings.ContainsAny(prefix, "/\x00") || prefix == "." || prefix == ".." {
		return nil
	}
	dir := filepath.Join(runtimeBase(), prefix)
	f, err := os.OpenFile(filepath.Join(dir, "config"), os.O_RDWR|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &lk); err != nil {
		return nil // another process's
	}
	return removeRuntimeDir(runtimeBase(), dir)
}
