package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/fulcrumlb/fulcrum/config"
)

// host is where prereq reads the host's state: the sysfs, /proc and the
// host scripts' directory (tests point them elsewhere).
type host struct {
	sys     string // sysfs root ("/sys")
	meminfo string // "/proc/meminfo"
	mounts  string // "/proc/mounts"
	hw      string // the host scripts, for the messages
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
	return host{sys: "/sys", meminfo: "/proc/meminfo", mounts: "/proc/mounts", hw: hw}
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
	return out
}
