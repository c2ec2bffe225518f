package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/config/configtest"
)

// fakeHost is a host whose sysfs, meminfo and mounts are files under a
// test directory: PCI devices by address, with a driver or none.
func fakeHost(t *testing.T, hugepages int, hugetlbfs bool, devices map[string]string) host {
	t.Helper()
	dir := t.TempDir()
	h := host{sys: filepath.Join(dir, "sys"), meminfo: filepath.Join(dir, "meminfo"), mounts: filepath.Join(dir, "mounts"), hw: "/usr/share/fulcrum/hw"}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(h.meminfo, "MemTotal:       24000000 kB\nHugePages_Total:    "+strconv.Itoa(hugepages)+"\nHugePages_Free:     0\n")
	mounts := "proc /proc proc rw 0 0\n"
	if hugetlbfs {
		mounts += "nodev /dev/hugepages hugetlbfs rw,relatime,pagesize=2M 0 0\n"
	}
	write(h.mounts, mounts)
	drivers := filepath.Join(h.sys, "bus", "pci", "drivers")
	for dev, drv := range devices {
		d := filepath.Join(h.sys, "bus", "pci", "devices", dev)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if drv != "" {
			if err := os.MkdirAll(filepath.Join(drivers, drv), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join("..", "..", "..", "bus", "pci", "drivers", drv), filepath.Join(d, "driver")); err != nil {
				t.Fatal(err)
			}
		}
	}
	return h
}

// prereqConfig is a valid file whose [eal] is written by eal, in any TOML
// form the daemon's decoder reads.
func prereqConfig(t *testing.T, eal string) *config.Config {
	t.Helper()
	toml := strings.Replace(configtest.New().Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).Web(2).String(), "[dataplane]", eal+"\n[dataplane]", 1)
	cfg, err := config.Parse([]byte(toml), "f.toml")
	if err != nil {
		t.Fatalf("%v\n%s", err, toml)
	}
	return cfg
}

// The host's prerequisites are read from the file as the daemon reads it:
// a table header written "[ eal ]", dotted keys and devargs holding a
// ']' (mlx5's representor=[0-1]) each hid what the shell script checked,
// and the daemon then failed in the EAL without saying how to fix it. An
// upper-case address names the same device (sysfs writes lower case),
// and a device with no driver is not "bound to" one.
func TestPrereqReadsTheFileAsRunDoes(t *testing.T) {
	const bound, unbound, absent = "0000:af:00.0", "0000:af:00.1", "0000:99:1f.7"
	h := fakeHost(t, 0, false, map[string]string{bound: "vfio-pci", unbound: ""})
	for _, tc := range []struct {
		name, eal string
		want      []string // a substring of each problem, in order
	}{
		{"absent device", "[eal]\npci = [\"" + absent + "\"]", []string{absent + " is not present"}},
		{"devargs with a bracket", "[eal]\npci = [\"" + bound + ",representor=[0-1]\", \"" + absent + "\"]", []string{absent + " is not present"}},
		{"spaced header", "[ eal ]\npci = [\"" + absent + "\"]", []string{absent + " is not present"}},
		{"dotted key", "eal.pci = [\"" + absent + "\"]", []string{absent + " is not present"}},
		{"hugepages as a dotted key", "eal.hugepages = true", []string{"no hugepages are reserved"}},
		{"bound, in every spelling", "[eal]\npci = [\"0000:af:00.0\", \"af:00.0\", \"0000:AF:00.0\", \"AF:00.0,x=1\"]", nil},
		{"no driver", "[eal]\npci = [\"" + strings.ToUpper(unbound) + "\"]", []string{unbound + " is bound to no driver"}},
		{"not an address", "[eal]\npci = [\"../../../etc\"]", []string{"not a PCI address"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := prereqProblems(prereqConfig(t, tc.eal), h)
			if len(got) != len(tc.want) {
				t.Fatalf("problems %q, want %d matching %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d %q, want it to say %q", i, got[i], w)
				}
			}
		})
	}
}

// hugepages = true needs pages reserved, then a hugetlbfs mounted.
func TestPrereqHugepages(t *testing.T) {
	cfg := prereqConfig(t, "[eal]\nhugepages = true")
	for _, tc := range []struct {
		pages   int
		mounted bool
		want    string
	}{
		{0, true, "no hugepages are reserved"},
		{4, false, "no hugetlbfs is mounted"},
		{4, true, ""},
	} {
		got := prereqProblems(cfg, fakeHost(t, tc.pages, tc.mounted, nil))
		if tc.want == "" && len(got) != 0 || tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)) {
			t.Errorf("%d pages, hugetlbfs %v: %q, want %q", tc.pages, tc.mounted, got, tc.want)
		}
	}
}
