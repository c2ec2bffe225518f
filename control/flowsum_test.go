package control

import (
	"testing"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/conntrack"
)

// TestFlowCountSumPastUint32: StatusInto sums the workers' per-backend and
// per-VIP flow counts (BackendStatus.Flows and VIPStatus.Flows, both
// uint64, what the admin API, fulcrumctl backends and the drain decision
// read) in uint32 slices (addCounts). Each worker's count fits (a table
// holds at most conntrack.MaxCapacity = 2^27 entries) but the limits allow
// config.MaxLcores = 128 forwarding lcores: from 32 full tables on, the
// sum passes 2^32 and wraps. A table cannot be filled that far in a test
// (2^27 entries are 8 GiB), so the sum is driven with the counts such
// workers return: 32 workers whose 2^27 flows all belong to one backend
// (a SYN flood or a single-backend VIP) read 0 flows, and a drain of that
// backend would look finished.
func TestFlowCountSumPastUint32(t *testing.T) {
	const workers = 32
	if workers > config.MaxLcores {
		t.Skip("the limits no longer allow it")
	}
	buf := &StatusBuf{}
	counts := []uint32{conntrack.MaxCapacity, 7}
	sum := addCounts(nil, &buf.flows, counts, 2)
	for range workers - 1 {
		sum = addCounts(sum, &buf.flows, counts, 2)
	}
	want := uint64(workers) * conntrack.MaxCapacity
	if got := uint64(sum[0]); got != want {
		t.Errorf("%d workers, each holding %d flows of backend 0: summed to %d flows, want %d", workers, conntrack.MaxCapacity, got, want)
	}
}
