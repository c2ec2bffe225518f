package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/conntrack"
)

// host is where prereq reads the host's state: the sysfs, /proc and the
// host scripts' directory (tests point them elsewhere).
type host struct {
	sys     string // sysfs root ("/sys")
	meminfo string // "/proc/meminfo"
	mounts  string // "/proc/mounts"
	hw      string // the host scripts, for the messages
	cgroup  string // this process's cgroups ("/proc/self/cgroup"); its v2 tree is sys/fs/cgroup
}

// realHost is this machine; the host scripts are installed beside the
// binary (/usr/bin/fulcrum: /usr/share/fulcrum/hw).
func realHost() host {
	hw := "/usr/share/fulcrum/hw"
	if exe, err := os.Executable(); err == nil {
		if d := filepath.Join(filepath.Dir(exe), "..", "share", "fulcrum", "hw"); isDir(d) {
			hw = d // make install under another PREFIX
		}
	}
	return host{sys: "/sys", meminfo: "/proc/meminfo", mounts: "/proc/mounts", hw: hw, cgroup: "/proc/self/cgroup"}
}

func isDir(p string) bool { fi, err := os.Stat(p); return err == nil && fi.IsDir() }

// cmdPrereq checks what `fulcrum run` needs from the host for the file
// (the unit's ExecStartPre), with a message saying how to fix each
// problem: hugepages reserved and a hugetlbfs mounted when [eal]
// hugepages = true, and each [eal] pci device present and bound to a
// driver DPDK can use. It reads the file with the daemon's own decoder,
// so it sees what run will (a shell reading of the TOML missed a table
// header written "[ eal ]", dotted keys and devargs holding a ']').
func cmdPrereq(args []string, stdout, stderr io.Writer) int {
	cfg, code := fileCommand("prereq", "prereq [flags]: check that the host has what the file needs (hugepages, PCI devices bound for DPDK)", args, stdout, stderr)
	if cfg == nil {
		return code
	}
	h := realHost()
	for _, w := range prereqWarnings(cfg, h) {
		fmt.Fprintf(stderr, "fulcrum prereq: %s: warning: %s\n", cfg.File, w)
	}
	problems := prereqProblems(cfg, h)
	for _, p := range problems {
		fmt.Fprintf(stderr, "fulcrum prereq: %s: %s\n", cfg.File, p)
	}
	if len(problems) > 0 {
		return 1
	}
	fmt.Fprintf(stdout, "# %s: the host has what it needs\n", cfg.File)
	return 0
}

// dpdkDrivers are the kernel drivers a PCI device may be bound to for
// DPDK: the user-space I/O ones, and Mellanox's, whose PMDs run on the
// kernel driver.
var dpdkDrivers = map[string]bool{"vfio-pci": true, "uio_pci_generic": true, "igb_uio": true, "mlx4_core": true, "mlx5_core": true}

// prereqProblems lists what h lacks for cfg, each with its fix.
func prereqProblems(cfg *config.Config, h host) []string {
	var out []string
	if cfg.EAL.Hugepages {
		total := -1
		if b, err := os.ReadFile(h.meminfo); err == nil {
			for _, l := range strings.Split(string(b), "\n") {
				if f := strings.Fields(l); len(f) >= 2 && f[0] == "HugePages_Total:" {
					total, _ = strconv.Atoi(f[1])
				}
			}
		}
		// HugePages_Total counts the default size only: pages of another
		// size (PAGESIZE=1G hugepages.sh) are in sysfs.
		if total <= 0 {
			sizes, _ := filepath.Glob(filepath.Join(h.sys, "kernel", "mm", "hugepages", "hugepages-*", "nr_hugepages"))
			for _, f := range sizes {
				if b, err := os.ReadFile(f); err == nil {
					if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n > 0 {
						total = max(total, 0) + n
					}
				}
			}
		}
		mounted := false
		if b, err := os.ReadFile(h.mounts); err == nil {
			for _, l := range strings.Split(string(b), "\n") {
				if f := strings.Fields(l); len(f) >= 3 && f[2] == "hugetlbfs" {
					mounted = true
				}
			}
		}
		switch {
		case total <= 0:
			out = append(out, fmt.Sprintf("hugepages = true but no hugepages are reserved: run %s/hugepages.sh 4G (or hugepages= on the kernel command line)", h.hw))
		case !mounted:
			out = append(out, fmt.Sprintf("hugepages = true but no hugetlbfs is mounted: mount -t hugetlbfs nodev /dev/hugepages (or %s/hugepages.sh)", h.hw))
		}
	}
	for _, entry := range cfg.EAL.PCI {
		dev, _, _ := strings.Cut(entry, ",") // DPDK devargs follow the address
		dev = strings.ToLower(strings.TrimSpace(dev))
		if dev == "" || strings.ContainsAny(dev, "/\x00") || dev[0] == '.' {
			out = append(out, fmt.Sprintf("pci entry %q is not a PCI address (such as 0000:03:00.0)", entry))
			continue
		}
		if strings.Count(dev, ":") == 1 {
			dev = "0000:" + dev // the domain, as sysfs names it
		}
		// DPDK reads each field as a hex number ("3:0.0"); sysfs pads them.
		var dom, bus, slot, fn uint64
		if n, err := fmt.Sscanf(strings.NewReplacer(":", " ", ".", " ").Replace(dev), "%x %x %x %x", &dom, &bus, &slot, &fn); err == nil && n == 4 &&
			dom <= 0xffffffff && bus <= 0xff && slot <= 0x1f && fn <= 7 {
			dev = fmt.Sprintf("%04x:%02x:%02x.%x", dom, bus, slot, fn)
		}
		dir := filepath.Join(h.sys, "bus", "pci", "devices", dev)
		if _, err := os.Stat(dir); err != nil {
			out = append(out, fmt.Sprintf("PCI device %s is not present on this host (ls /sys/bus/pci/devices)", dev))
			continue
		}
		drv := "no driver"
		if target, err := os.Readlink(filepath.Join(dir, "driver")); err == nil {
			drv = filepath.Base(target)
		}
		if !dpdkDrivers[drv] {
			out = append(out, fmt.Sprintf("PCI device %s is bound to %s, not vfio-pci: modprobe vfio-pci; %s/bind-nic.sh %s", dev, drv, h.hw, dev))
		}
	}
	return out
}

// prereqWarnings are what the host may lack, by an estimate that can be
// wrong either way, so they are said but do not fail the start: a memory
// cgroup limit below what the daemon takes (the kernel would kill it
// after start, and systemd restart it in a loop).
func prereqWarnings(cfg *config.Config, h host) []string {
	var out []string
	if limit, at := memoryLimit(h); limit > 0 {
		if need := memoryNeed(cfg); need > limit {
			out = append(out, fmt.Sprintf("the memory cgroup %s allows %d MiB, and the daemon takes about %d MiB (%s): the kernel would kill it; raise MemoryMax or lower what it takes",
				at, limit>>20, need>>20, memoryWhat(cfg)))
		}
	}
	return out
}

// goSlack is what memoryNeed allows the daemon beyond its EAL memory and
// conntrack tables: the Go runtime, the control plane's tables and
// health checks, and the libraries.
const goSlack = 256 << 20

// memoryNeed is about the memory the daemon's cgroup is charged for: on
// hugepages only what the Go side takes (the EAL's memory, and the
// conntrack tables in it, are hugetlb pages, not charged to memory.max);
// without, also the EAL's memory_mb and each worker's conntrack table on
// the Go heap.
func memoryNeed(cfg *config.Config) uint64 {
	need := uint64(goSlack)
	if !cfg.EAL.Hugepages {
		need += ealTouched(cfg) + uint64(len(cfg.EAL.WorkerLcores))*uint64(conntrack.TableBytes(cfg.Conntrack.Capacity))
	}
	return need
}

// ealOwn is what the EAL itself and the port's rings take of its memory
// beyond the mbuf pools (and its runtime directory on a tmpfs), about.
const ealOwn = 64 << 20

// ealTouched is what the EAL's memory costs without hugepages: it maps
// memory_mb but only the pages it allocates are charged, each worker's
// mbuf pool (2,432 bytes an mbuf, as config's check on hugepages counts)
// and its own, at most memory_mb.
func ealTouched(cfg *config.Config) uint64 {
	pools := uint64(len(cfg.EAL.WorkerLcores)) * uint64(cfg.Dataplane.MempoolSize) * 2432
	return min(uint64(cfg.EAL.MemoryMB)<<20, pools+ealOwn+ealRuntimeBytesNoHuge(cfg))
}

// ealRuntimeBytesNoHuge is the memory segment list the EAL writes to its
// runtime directory without hugepages: 48 bytes a 4 KiB page of memory_mb.
func ealRuntimeBytesNoHuge(cfg *config.Config) uint64 {
	return uint64(cfg.EAL.MemoryMB) * (1 << 20 / 4096) * 48
}

func memoryWhat(cfg *config.Config) string {
	if cfg.EAL.Hugepages {
		return fmt.Sprintf("%d MiB for the Go runtime and the control plane", goSlack>>20)
	}
	return fmt.Sprintf("%d MiB of eal.memory_mb's %d in use (mbuf pools of %d), %d conntrack table(s) of %d MiB, and %d MiB for the Go runtime", ealTouched(cfg)>>20, cfg.EAL.MemoryMB,
		cfg.Dataplane.MempoolSize, len(cfg.EAL.WorkerLcores), conntrack.TableBytes(cfg.Conntrack.Capacity)>>20, goSlack>>20)
}

// memoryLimit is the smallest memory limit on the way from this
// process's memory cgroup to the root, and where it is set: memory.max
// under cgroup v2, memory.limit_in_bytes under v1's memory controller
// (a hybrid host's); 0 when none is set (or no cgroup is mounted). The
// paths in /proc/self/cgroup are the hierarchy's; each is looked up under
// the mount of its hierarchy that holds it (/proc/self/mountinfo, beside
// it: a container's mount is of its own subtree, whose root is not the
// hierarchy's). Without mountinfo, the usual mounts are taken.
func memoryLimit(h host) (limit uint64, at string) {
	if h.cgroup == "" {
		return 0, ""
	}
	b, err := os.ReadFile(h.cgroup)
	if err != nil {
		return 0, ""
	}
	v2, v1 := cgroupMounts(h)
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) != 3 || !strings.HasPrefix(f[2], "/") || strings.Contains(f[2], "..") {
			continue
		}
		mounts, file := v2, "memory.max"
		switch {
		case f[0] == "0" && f[1] == "":
		case slices.Contains(strings.Split(f[1], ","), "memory"):
			mounts, file = v1, "memory.limit_in_bytes"
		default:
			continue
		}
		for _, m := range mounts {
			rel, ok := strings.CutPrefix(f[2], m.root)
			if m.root == "/" {
				rel, ok = f[2], true
			} else if ok && rel != "" && !strings.HasPrefix(rel, "/") {
				ok = false // a sibling: /a/bc under a mount of /a/b
			}
			if !ok {
				continue
			}
			for p := filepath.Join("/", rel); ; p = filepath.Dir(p) {
				if b, err := os.ReadFile(filepath.Join(m.dir, p, file)); err == nil {
					// v2 writes "max" for none; v1 a page-rounded 2^63-1.
					if n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil && n < 1<<62 && (limit == 0 || n < limit) {
						limit, at = n, filepath.Join(m.root, p)
					}
				}
				if p == "/" {
					break
				}
			}
			break
		}
	}
	return limit, at
}

// cgroupMount is a mounted cgroup hierarchy: the cgroup at its root (the
// hierarchy's path) and the directory it is mounted on.
type cgroupMount struct{ root, dir string }

// cgroupMounts are the mounts of the cgroup v2 hierarchy and of v1's
// memory controller, from the mountinfo beside h.cgroup; without one,
// the usual places with the hierarchies' roots.
func cgroupMounts(h host) (v2, v1 []cgroupMount) {
	cg := filepath.Join(h.sys, "fs", "cgroup")
	b, err := os.ReadFile(filepath.Join(filepath.Dir(h.cgroup), "mountinfo"))
	if err != nil {
		return []cgroupMount{{"/", cg}}, []cgroupMount{{"/", filepath.Join(cg, "memory")}}
	}
	for _, l := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(l, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 {
			continue
		}
		// the mount point as seen from h.sys (the host's /sys, or a test's)
		dir := unescapeMount(f[4])
		if rest, ok := strings.CutPrefix(dir, "/sys/"); ok {
			dir = filepath.Join(h.sys, rest)
		}
		m := cgroupMount{unescapeMount(f[3]), dir}
		switch {
		case g[0] == "cgroup2":
			v2 = append(v2, m)
		case g[0] == "cgroup" && slices.Contains(strings.Split(g[2], ","), "memory"):
			v1 = append(v1, m)
		}
	}
	return v2, v1
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var out []byte
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				out = append(out, byte(n))
				i += 3
				continue
			}
		}
		out = append(out, s[i])
	}
	return string(out)
}
