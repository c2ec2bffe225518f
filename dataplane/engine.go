package dataplane

import (
	"time"

	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/flow"
)

// EngineConfig is what the DPDK engine is built with at start. None of it
// can change while the engine runs: a reload that changes one of these
// settings is refused (control.reloadable).
type EngineConfig struct {
	Port         string // the wire port: DPDK device name (vdev name or PCI address)
	TxPort       string // optional separate egress port; "": Port
	Burst        int    // packets per rx/tx burst (1..64)
	RxDesc       int    // rx descriptors per queue
	TxDesc       int    // tx descriptors per queue
	MempoolSize  int    // mbufs per worker pool
	IdleBackoff  bool   // back off when idle
	IdleMaxSleep time.Duration
	Exception    bool   // create the net_tap exception path
	ExceptionIf  string // the tap's kernel-side name
	HashKey      flow.Key
	Conntrack    conntrack.Config // each worker's flow table
}

// idleSweep is how many conntrack buckets an idle poll that sleeps sleep
// sweeps: 8, and 8 more for every 256 µs of sleep, so that a pass over
// the largest table (2^24 buckets) takes about 9 minutes idle whatever
// idle_max_sleep is. At 8 a poll and 1 s sleeps it took 24 days, about
// the 2^31 ms within which conntrack must see an entry again to read its
// idle time right (conntrack.Time wraps after 49.7 days).
func idleSweep(sleep time.Duration) int {
	return 8 * max(1, int(sleep/(256*time.Microsecond)))
}
