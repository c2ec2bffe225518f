//go:build dpdk

package dpdk

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
func RemoveRuntimeDir(dir string) error { return removeRuntimeDir(RuntimeBase, dir) }

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
