package dataplane

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestICountScenario is not a test: it is the workload scripts/icount.sh
// runs under valgrind's cachegrind to count the instructions the
// forwarding path executes per packet, a measure this noisy shared host
// cannot disturb (docs/benchmarks.md, round 18). FULCRUM_ICOUNT=name:packets
// names the scenario and the packets to send after the warm-up; without
// it the function returns at once. The scenarios are BenchmarkProcess's
// and BenchmarkSYNFlood's inputs: est10k and est1m (ACKs of 10k or 1M
// established flows, bursts of 32), syn10k (SYNs of known flows), flood
// (a SYN from a new random 5-tuple every packet, into a full table), and
// refill10k and floodrefill (est10k's and flood's per-burst refill of the
// frames alone, which the script subtracts).
func TestICountScenario(t *testing.T) {
	spec := os.Getenv("FULCRUM_ICOUNT")
	if spec == "" {
		return
	}
	name, ns, _ := strings.Cut(spec, ":")
	total, err := strconv.Atoi(ns)
	if err != nil || total < 0 {
		t.Fatalf("FULCRUM_ICOUNT=%q: want name:packets", spec)
	}
	var refill, burst func()
	switch name {
	case "est10k", "refill10k":
		l := newEstLoad(t, 10_000, "A", false)
		refill, burst = l.refill, l.burst
	case "est1m":
		l := newEstLoad(t, 1_000_000, "A", false)
		refill, burst = l.refill, l.burst
	case "syn10k":
		l := newEstLoad(t, 10_000, "S", false)
		refill, burst = l.refill, l.burst
	case "flood", "floodrefill":
		l := newFloodLoad(t, 1<<16, false)
		refill, burst = l.refill, l.burst
	default:
		t.Fatalf("FULCRUM_ICOUNT: no scenario %q", name)
	}
	if strings.HasSuffix(name, "refill") || strings.HasPrefix(name, "refill") {
		burst = refill
	}
	for n := 0; n < total; n += estBurst {
		burst()
	}
}
