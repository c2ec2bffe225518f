package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Without hugepages the EAL maps eal.memory_mb but touches (and the
// memory cgroup is charged for) only what it allocates: the mbuf pools
// and its own small structures; the conntrack tables are on the Go heap.
// Measured (examples/pcap.toml with memory_mb = 2048, in a v1 memory
// cgroup of 1 GiB): the daemon ran and forwarded, max_usage 113 MiB,
// failcnt 0, while prereq refused the same cgroup ("takes about 2308
// MiB"): a unit with MemoryMax=1G that started before this check no longer
// starts. What prereq counts must not be memory_mb itself.
func TestPrereqMemoryNoHugeCountsTouched(t *testing.T) {
	cfg := prereqConfig(t, "[eal]\nmemory_mb = 2048")
	h := fakeHost(t, 512, true, nil)
	dir := t.TempDir()
	h.cgroup = filepath.Join(dir, "cgroup")
	if err := os.WriteFile(h.cgroup, []byte("0::/system.slice/fulcrum.service\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(h.sys, "fs", "cgroup", "system.slice/fulcrum.service/memory.max")
	if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f, []byte("1073741824\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range prereqWarnings(cfg, h) {
		if strings.Contains(p, "memory cgroup") {
			t.Errorf("1 GiB refused for %d worker(s) of mempool_size %d and conntrack.capacity %d without hugepages: %s",
				len(cfg.EAL.WorkerLcores), cfg.Dataplane.MempoolSize, cfg.Conntrack.Capacity, p)
		}
	}
}
