package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// In a container without a cgroup namespace of its own (cgroup v1, or v2
// with --cgroupns=host and the container's subtree mounted), the paths in
// /proc/self/cgroup are the hierarchy's while the cgroup filesystem at
// /sys/fs/cgroup is mounted from the container's own cgroup
// (/proc/self/mountinfo's root field). A systemd in the container puts
// fulcrum.service in a cgroup of its own with its MemoryMax: prereq must
// find that limit under the mount, not look for the hierarchy's full
// path under it and, finding nothing there, read only the container's.
func TestPrereqMemoryCgroupMountRoot(t *testing.T) {
	noHuge := prereqConfig(t, "[eal]\nmemory_mb = 1024")
	for _, tc := range []struct {
		name, self, mountinfo string
		files                 map[string]string // under sys/fs/cgroup
	}{
		{"v1, the container's subtree mounted",
			"4:memory:/docker/abc/system.slice/fulcrum.service\n0::/\n",
			"34 30 0:31 /docker/abc /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime - cgroup cgroup rw,memory\n",
			map[string]string{"memory/memory.limit_in_bytes": "68719476736\n", "memory/system.slice/fulcrum.service/memory.limit_in_bytes": "268435456\n"}},
		{"v2, the container's subtree mounted",
			"0::/lxc.payload.c1/system.slice/fulcrum.service\n",
			"30 22 0:27 /lxc.payload.c1 /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw\n",
			map[string]string{"memory.max": "68719476736\n", "system.slice/fulcrum.service/memory.max": "268435456\n"}},
	} {
		h := fakeHost(t, 512, true, nil)
		dir := t.TempDir()
		h.cgroup = filepath.Join(dir, "cgroup")
		if err := os.WriteFile(h.cgroup, []byte(tc.self), 0o644); err != nil {
			t.Fatal(err)
		}
		// /proc/self/mountinfo beside /proc/self/cgroup.
		if err := os.WriteFile(filepath.Join(dir, "mountinfo"), []byte(tc.mountinfo), 0o644); err != nil {
			t.Fatal(err)
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
		var got []string
		for _, p := range prereqWarnings(noHuge, h) {
			if strings.Contains(p, "memory cgroup") {
				got = append(got, p)
			}
		}
		if len(got) == 0 {
			t.Errorf("%s: fulcrum.service's 256 MiB limit not found (need about %d MiB): prereq passes and the kernel kills the daemon after start", tc.name, memoryNeed(noHuge)>>20)
		}
	}
}
