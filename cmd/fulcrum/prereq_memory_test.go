package main

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/fulcrumlb/fulcrum/conntrack"
)

// A daemon in a memory cgroup smaller than what it takes is killed by
// the kernel soon after it starts (the EAL's memory without hugepages and
// the conntrack tables are touched at start), and systemd restarts it in
// a loop: prereq (the unit's ExecStartPre) says so first, under cgroup v2
// (memory.max) and v1's memory controller (memory.limit_in_bytes), the
// smallest limit on the way to the root taken; no limit says nothing.
func TestPrereqMemoryCgroup(t *testing.T) {
	noHuge := prereqConfig(t, "[eal]\nmemory_mb = 1024")
	huge := prereqConfig(t, "[eal]\nhugepages = true\nmemory_mb = 2048")
	need := ealTouched(noHuge) + uint64(len(noHuge.EAL.WorkerLcores))*uint64(conntrack.TableBytes(noHuge.Conntrack.Capacity)) + goSlack
	for _, tc := range []struct {
		name  string
		self  string            // /proc/self/cgroup
		files map[string]string // under sys/fs/cgroup
		huge  bool
		warn  bool
	}{
		{"v2, too small", "0::/system.slice/fulcrum.service\n", map[string]string{"system.slice/fulcrum.service/memory.max": itoa(need - 1<<20)}, false, true},
		{"v2, a parent too small", "0::/system.slice/fulcrum.service\n", map[string]string{"system.slice/fulcrum.service/memory.max": "max\n", "system.slice/memory.max": itoa(need - 1<<20)}, false, true},
		{"v2, enough", "0::/system.slice/fulcrum.service\n", map[string]string{"system.slice/fulcrum.service/memory.max": itoa(need + 1<<20)}, false, false},
		{"v2, no limit", "0::/system.slice/fulcrum.service\n", map[string]string{"system.slice/fulcrum.service/memory.max": "max\n"}, false, false},
		{"v2, hugepages: only the Go side charged", "0::/fulcrum\n", map[string]string{"fulcrum/memory.max": itoa(goSlack + 1<<20)}, true, false},
		{"v2, hugepages, below the Go side", "0::/fulcrum\n", map[string]string{"fulcrum/memory.max": itoa(goSlack - 1<<20)}, true, true},
		{"v1 memory controller, too small", "4:memory:/lb\n0::/\n", map[string]string{"memory/lb/memory.limit_in_bytes": itoa(need - 1<<20)}, false, true},
		{"v1 memory controller, unlimited", "4:memory:/lb\n0::/\n", map[string]string{"memory/lb/memory.limit_in_bytes": "9223372036854771712\n", "memory/memory.limit_in_bytes": "9223372036854771712\n"}, false, false},
		{"v1, another controller's path", "3:cpu,cpuacct:/lb\n", map[string]string{"cpu,cpuacct/lb/memory.limit_in_bytes": "1048576\n"}, false, false},
		{"no cgroup file", "", nil, false, false},
	} {
		h := fakeHost(t, 512, true, nil)
		dir := t.TempDir()
		h.cgroup = filepath.Join(dir, "cgroup")
		if tc.self != "" {
			if err := os.WriteFile(h.cgroup, []byte(tc.self), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for p, v := range tc.files {
			f := filepath.Join(h.sys, "fs", "cgroup", p)
			if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(f, []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cfg := noHuge
		if tc.huge {
			cfg = huge
		}
		got := prereqWarnings(cfg, h)
		if p := prereqProblems(cfg, h); len(p) != 0 {
			t.Errorf("%s: problems %q: a memory estimate warns, it does not refuse", tc.name, p)
		}
		if (len(got) > 0) != tc.warn {
			t.Errorf("%s: memory warnings %q, want a warning %v (need about %d MiB)", tc.name, got, tc.warn, need>>20)
		}
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) + "\n" }
