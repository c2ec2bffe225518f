package config

import (
	"time"

	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/maglev"
)

// MaxTableSlots bounds the Maglev table slots of all VIPs together: as
// many as the most VIPs at the default table size.
const MaxTableSlots = conntrack.MaxVIPs * maglev.DefaultSize

// The defaults and limits package config owns: the EAL, the ports and
// queues, the control plane's knobs and the passive health checks. Every
// other setting is owned by the package that uses it, whose type config
// decodes the setting into and whose defaults, limits and names config
// reads: encapsulation (encap.Config.WithDefaults and Validate, encap.Kind,
// encap.DF), flow tables (conntrack.Config.WithDefaults and Validate, and
// conntrack.MaxBurst, conntrack.DefaultBurst and the snapshot's limits
// conntrack.MaxVIPs and conntrack.MaxBackends), Maglev tables
// (maglev.DefaultSize, maglev.MaxSize), hash fields (flow.Mode,
// flow.NewFields), schedulers (sched.Kind, sched.Options, sched.New),
// active health checks (health.DefaultConfig,
// health.Config.Validate) and BGP (bgp.Config.Validate).
//
// Durations are positive and bounded; a zero means "the default" unless
// the key's comment says it means off.
const (
	DefaultRxDesc      = 1024  // per queue; testpmd's default
	DefaultTxDesc      = 1024  // per queue; testpmd's default
	DefaultMempoolSize = 16383 // mbufs per pool; 2^n-1 is optimal for rte_mempool
	// MinDesc and MaxDesc bound rx_desc, tx_desc and mempool_size: below
	// 64 a NIC cannot hold one burst per queue, above 2^20 it is a typo.
	// MaxRingDesc bounds rx_desc and tx_desc further: DPDK counts a
	// queue's descriptors in 16 bits, and no NIC has more than 32768.
	MinDesc     = 64
	MaxDesc     = 1 << 20
	MaxRingDesc = 1 << 15

	DefaultMemoryMB = 1024 // EAL memory with --no-huge (-m)
	MinMemoryMB     = 64   // DPDK's EAL does not start with less
	// MaxMemoryMB is 1 TiB: more than any host this runs on; a larger
	// number is a typo that DPDK would fail on at start.
	MaxMemoryMB = 1 << 20

	// MaxLcores is DPDK's RTE_MAX_LCORE in its default build (22.11,
	// config/meson.build: 128): lcore ids are 0..MaxLcores-1.
	MaxLcores = 128

	// DefaultFilePrefix is the EAL --file-prefix. A prefix names a
	// directory under /run/dpdk that shutdown removes, so it must be a
	// plain name (see checkFilePrefix) of at most MaxFilePrefixLen bytes.
	DefaultFilePrefix = "fulcrum"
	MaxFilePrefixLen  = 64

	DefaultIdleMaxSleep = 200 * time.Microsecond
	MaxIdleMaxSleep     = time.Second // a longer nap is lost traffic, not saved power

	DefaultExceptionName = "fulcrum0" // the tap interface the kernel sees
	MaxIfaceNameLen      = 15         // Linux IFNAMSIZ minus the NUL

	DefaultLBPrefix4 = 24 // prefix lengths put on the exception interface
	DefaultLBPrefix6 = 64

	// MaxNameLen bounds VIP and backend names. Names are path segments of
	// the admin API (/vip/NAME/backend/NAME) and label values in
	// /metrics: 1..64 bytes, no '/', no spaces, no control characters.
	MaxNameLen = 64

	MaxWeight = 65535 // a backend's weight: 0 (no new flows)..65535
)

// Control-plane defaults and limits.
const (
	// DefaultPanicThreshold when the key is absent: the chapter's section
	// 5.4 and Envoy's healthy_panic_threshold. An explicit 0 disables
	// panic mode.
	DefaultPanicThreshold = 0.5
	DefaultSlowStartMin   = 0.1 // a ramping backend starts at 10% of its weight
	MaxSlowStart          = time.Hour
	// MaxDrainTimeout bounds control.drain_timeout (0: drained flows stay
	// until they end): a day is longer than any deploy waits.
	MaxDrainTimeout = 24 * time.Hour
	// control.stall_timeout: a worker that has answered no counter
	// snapshot for this long is stalled, and the instance withdraws its
	// VIPs (control/stall.go). The minimum leaves a worker asleep for
	// idle_max_sleep (at most 1 s) and a snapshot round that waits 1 s on
	// each silent worker room to answer twice; 0 only reports.
	DefaultStallTimeout = 5 * time.Second
	MinStallTimeout     = 3 * time.Second
	MaxStallTimeout     = 5 * time.Minute

	// DefaultSecondChanceWindow: how long a VIP keeps its previous table
	// (docs/second-chance.md): long enough for the routers to settle
	// after an instance fails during a change, short enough that a flow
	// that moves instance long after the change takes no detour.
	// MaxSecondChanceWindow bounds it.
	DefaultSecondChanceWindow = 5 * time.Minute
	MaxSecondChanceWindow     = 24 * time.Hour

	DefaultAdminListen   = "127.0.0.1:9180"
	DefaultAdminMaxConns = 64
)

// Health settings config owns: whether to check at all ("none") and the
// passive checks. The active check's own defaults and limits (flap_window's
// too) are package health's.
const (
	HealthNone = "none" // [health] kind that turns active checks off (the default)

	DefaultPassiveWindow    = 10 * time.Second
	MinPassiveWindow        = 2 * time.Second // a few signal periods
	MaxPassiveWindow        = 10 * time.Minute
	DefaultPassiveMin       = 20 // handshakes in the window before judging
	MaxPassiveMin           = 1 << 20
	DefaultPassiveThreshold = 0.5 // failed share that ejects
)
