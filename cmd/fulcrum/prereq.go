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
	problems := prereqProblems(cfg, realHost())
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
	if limit, at := memoryLimit(h); limit > 0 {
		if need := memoryNeed(cfg); need > limit {
			out = append(out, fmt.Sprintf("the memory cgroup %s allows %d MiB (memory.max), and the daemon takes about %d MiB (%s): the kernel would kill it; raise MemoryMax or lower what it takes",
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
		need += uint64(cfg.EAL.MemoryMB)<<20 + uint64(len(cfg.EAL.WorkerLcores))*uint64(conntrack.TableBytes(cfg.Conntrack.Capacity))
	}
	return need
}

func memoryWhat(cfg *config.Config) string {
	if cfg.EAL.Hugepages {
		return fmt.Sprintf("%d MiB for the Go runtime and the control plane", goSlack>>20)
	}
	return fmt.Sprintf("eal.memory_mb %d, %d conntrack table(s) of %d MiB, and %d MiB for the Go runtime", cfg.EAL.MemoryMB,
		len(cfg.EAL.WorkerLcores), conntrack.TableBytes(cfg.Conntrack.Capacity)>>20, goSlack>>20)
}

// memoryLimit is the smallest memory limit on the way from this
// process's memory cgroup to the root, and where it is set: memory.max
// under cgroup v2, memory.limit_in_bytes under v1's memory controller
// (a hybrid host's); 0 when none is set (or no cgroup is mounted).
func memoryLimit(h host) (limit uint64, at string) {
	if h.cgroup == "" {
		return 0, ""
	}
	b, err := os.ReadFile(h.cgroup)
	if err != nil {
		return 0, ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) != 3 || !strings.HasPrefix(f[2], "/") || strings.Contains(f[2], "..") {
			continue
		}
		root, file := filepath.Join(h.sys, "fs", "cgroup"), "memory.max"
		switch {
		case f[0] == "0" && f[1] == "":
		case slices.Contains(strings.Split(f[1], ","), "memory"):
			root, file = filepath.Join(root, "memory"), "memory.limit_in_bytes"
		default:
			continue
		}
		for p := f[2]; ; p = filepath.Dir(p) {
			if b, err := os.ReadFile(filepath.Join(root, p, file)); err == nil {
				// v2 writes "max" for none; v1 a page-rounded 2^63-1.
				if n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil && n < 1<<62 && (limit == 0 || n < limit) {
					limit, at = n, p
				}
			}
			if p == "/" {
				break
			}
		}
	}
	return limit, at
}
