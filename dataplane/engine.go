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
