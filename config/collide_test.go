package config

import (
	"strings"
	"testing"
)

// TestEALSecondaryRefused: eal.extra_args may not make Fulcrum a DPDK
// secondary process. With --proc-type=auto (DPDK's examples use it) a
// second daemon on a running one's file_prefix attaches to that one's
// shared memory as a secondary instead of exiting 1 ("Is another primary
// process running?", README); its port setup then fails, and its
// clean-up removes the running daemon's whole runtime directory
// (/var/run/dpdk/<prefix>: config and its lock, mp_socket,
// hugepage_info, fbarray_*): dpdk-dumpcap can no longer attach, and a
// third daemon on that prefix starts as a primary beside the first.
func TestEALSecondaryRefused(t *testing.T) {
	eal := func(extra string) string {
		return strings.Replace(base, "memory_mb = 256\n", "memory_mb = 256\n"+extra+"\n", 1)
	}
	for _, c := range []struct {
		name string
		toml string
		ok   bool
	}{
		{"--proc-type=auto", eal(`extra_args = ["--proc-type=auto"]`), false},
		{"--proc-type=secondary", eal(`extra_args = ["--proc-type=secondary"]`), false},
		{"--proc-type secondary", eal(`extra_args = ["--proc-type", "secondary"]`), false},
		{"--proc=auto abbreviated", eal(`extra_args = ["--proc=auto"]`), false},
		{"--proc-type=primary", eal(`extra_args = ["--proc-type=primary"]`), true},
		{"--proc-type primary", eal(`extra_args = ["--proc-type", "primary"]`), true},
		{"--proc-type=PRIMARY (DPDK ignores case)", eal(`extra_args = ["--proc-type=PRIMARY"]`), true},
		// Without the runtime directory's lock two daemons on one
		// prefix both start (and fight over the NIC).
		{"--in-memory", eal(`extra_args = ["--in-memory"]`), false},
		{"--in-mem abbreviated", eal(`extra_args = ["--in-mem"]`), false},
		{"--no-shconf", eal(`extra_args = ["--no-shconf"]`), false},
		{"--no-sh abbreviated", eal(`extra_args = ["--no-sh"]`), false},
		{"--no-telemetry", eal(`extra_args = ["--no-telemetry"]`), true},
	} {
		_, err := Parse([]byte(c.toml), "p.toml")
		if (err == nil) != c.ok {
			t.Errorf("%s: accepted %v, want %v (%v)", c.name, err == nil, c.ok, err)
		}
		if err != nil && !strings.Contains(err.Error(), "extra_args") {
			t.Errorf("%s: error names no key: %v", c.name, err)
		}
	}
}
