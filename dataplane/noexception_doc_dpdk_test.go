//go:build dpdk

package dataplane

import (
	"testing"
	"time"

	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/punt"
)

// docs/drop-reasons.md: traffic for the host while the exception path is
// disabled is no-exception-path; punt-rate-limited is for the kernel, over
// its class's budget (fulcrum_worker_punt_rate_limited_total{class}). With
// no exception path there is no kernel to protect and no budget to spend:
// every host packet is no-exception-path, however many arrive.
func TestNoExceptionPathIsNotPuntRateLimited(t *testing.T) {
	l := newLab(t, labToml("exception = false"))
	const n = 400 // more than the "other" class's burst (100 at 1000/s)
	frames := make([][]byte, n)
	for i := range frames {
		frames[i] = frame(t, "198.51.100.10", "192.0.2.10", uint16(1000+i), 22, layers.IPProtocolTCP, "S", 0, true)
	}
	l.send(frames...)
	deadline := time.Now().Add(5 * time.Second)
	var c Counters
	for {
		c = l.counters()
		if c.RxPackets >= n || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if c.RxPackets != n {
		t.Fatalf("rx %d, want %d", c.RxPackets, n)
	}
	if c.Drops[DropNoException] != n || c.Drops[DropPuntRateLimited] != 0 || c.PuntLimited[punt.Other] != 0 {
		t.Errorf("%d host packets with the exception path off: no-exception-path %d, punt-rate-limited %d (class other %d)",
			n, c.Drops[DropNoException], c.Drops[DropPuntRateLimited], c.PuntLimited[punt.Other])
	}
}
