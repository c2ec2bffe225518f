package main

import (
	"os"
	"path/filepath"
	"testing"
)

// scripts/hw/hugepages.sh documents `PAGESIZE=1G hugepages.sh 8G`
// (dpdk-hugepages.py -p 1G): 1 GiB pages reserved through sysfs while the
// kernel's default hugepage size stays 2 MiB. /proc/meminfo's
// HugePages_Total counts only the default size, so it reads 0 there,
// yet DPDK runs on the 1 GiB pages. prereq must not refuse that host.
func TestPrereqHugepagesOfANonDefaultSize(t *testing.T) {
	cfg := prereqConfig(t, "[eal]\nhugepages = true")
	h := fakeHost(t, 0, true, nil) // HugePages_Total: 0 (default 2M size), hugetlbfs mounted
	d := filepath.Join(h.sys, "kernel", "mm", "hugepages", "hugepages-1048576kB")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "nr_hugepages"), []byte("8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := prereqProblems(cfg, h); len(got) != 0 {
		t.Errorf("8 pages of 1 GiB reserved and hugetlbfs mounted: problems %q, want none", got)
	}
}

// DPDK's PCI address parser (rte_pci_addr_parse) reads each field as a
// hex number: "3:0.0", "0:03:00.0" and "0000:3:00.0" are the device
// sysfs names 0000:03:00.0, and run accepts them. prereq must find it.
func TestPrereqPCIAddressUnpadded(t *testing.T) {
	h := fakeHost(t, 0, false, map[string]string{"0000:03:00.0": "vfio-pci"})
	for _, a := range []string{"3:0.0", "0:03:00.0", "0000:3:00.0", "03:0.0,x=1"} {
		if got := prereqProblems(prereqConfig(t, "[eal]\npci = [\""+a+"\"]"), h); len(got) != 0 {
			t.Errorf("pci %q: problems %q, want none", a, got)
		}
	}
}
