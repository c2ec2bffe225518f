package control

// Status: what the admin API and fulcrumctl show of VIPs and backends.

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/fulcrumlb/fulcrum/dataplane"
)

// BackendStatus is one backend as the admin API shows it.
type BackendStatus struct {
	VIP       string
	Name      string
	Address   string
	ID        uint32
	Weight    int // configured (or set by the operator)
	Effective int // in the table now, scaled by 100
	Health    string
	Reason    string
	Drained   bool
	Down      bool
	SlowStart bool
	Slots     int
	Share     float64
	Flows     uint64
	Outlier   bool // ejected by the passive checks
	Ejections int  // passive ejections so far
	NewFlows  uint64
	Packets   uint64
	Bytes     uint64
}

// VIPStatus is one VIP as the admin API shows it.
type VIPStatus struct {
	Name      string
	Address   string
	Port      uint16
	Protocol  string
	Encap     string
	Hash      string // the hash setting: "5-tuple", "3-tuple", ...
	TableSize int
	Panic     bool
	Serving   bool // some backend takes new flows
	Packets   uint64
	Bytes     uint64
	NewFlows  uint64
	// Flows is the VIP's tracked connections pinned to its live backends,
	// each once (with flows): a connection with a second chance counts in
	// the Flows of two backends.
	Flows    uint64
	Backends []BackendStatus
}

// Status is the whole control plane state.
type Status struct {
	Generation    uint64
	Rebuilds      uint64
	LastRebuildMs float64
	LastError     string
	VIPs          []VIPStatus
	Workers       []dataplane.Counters
	// Stale lists the workers that did not answer the counter snapshot in
	// time (stopped or stuck): their counters read zero.
	Stale []int
	// Stalled lists the workers that have answered no counter snapshot
	// for control.stall_timeout (stall.go); StallWithdrawn is true while
	// the instance withdraws every VIP for them.
	Stalled        []int
	StallWithdrawn bool
	// FlowsMissing lists the workers whose flow count did not finish in
	// time (busy with another operation, or a large table on an idle
	// worker): the per-VIP and per-backend flow counts lack their flows.
	FlowsMissing []int
	// BGP lists the BGP sessions (none without a [bgp] section) and the
	// announced VIPs.
	BGP       []PeerInfo
	Announced []string
	// Converging is true from start until every active health check of
	// the backends configured at start has given its first verdict: until
	// then nothing is announced and new flows use every configured backend
	// (health unknown counts as up). ConvergingNewFlows counts the new
	// flows forwarded meanwhile (the router may still send traffic over
	// the old route); it stops counting at the first signals fold after
	// convergence (or the first Status read, if sooner), so it may include
	// up to one fold period (1 s) more.
	Converging         bool
	ConvergingNewFlows uint64
	// HealthProbes is how many health checks run each round: one for the
	// backends of every VIP that are checked the same way at one address.
	HealthProbes int
	// HealthLocalFailures counts the checks this host failed to make (out
	// of file descriptors, socket buffers or memory), which no backend's
	// verdict took: while it grows, verdicts are stale.
	HealthLocalFailures uint64
}

// StatusBuf is the memory of a Status reading that a periodic reader (the
// metrics exporter) keeps from one call to the next: the workers' counter
// snapshots and the flow counts. A Status read with a StatusBuf refers to
// it (Workers), so it is valid until the StatusBuf is used again; one
// reader at a time.
type StatusBuf struct {
	workers []dataplane.Counters
	flows   []uint64 // summed over the workers (each worker's fits 32 bits, their sum may not)
	scan    []uint32 // one worker's count; reused unless its scan timed out
	vips    []uint64 // by VIP id, summed over the workers
	vipScan []uint32 // one worker's count by VIP id
}

// Status reports every VIP and backend with their counters. With flows, it
// also counts active flows per backend on every worker (a background scan
// of each conntrack table; it takes a few milliseconds per million
// entries).
func (p *Plane) Status(withFlows bool) Status {
	return p.StatusInto(withFlows, &StatusBuf{})
}

// stalledSnapshotWait is how long StatusInto waits for a stalled
// worker's counters (it may have just come back).
const stalledSnapshotWait = 10 * time.Millisecond

// flowsOpTimeout bounds one worker's flow count in StatusInto: a worker
// that misses it is named in Status.FlowsMissing.
const flowsOpTimeout = 5 * time.Second

// addCounts adds a worker's per-id counts to sum, the first worker's
// into n counts of *mem (grown if it is short, and cleared). It returns
// the sum.
func addCounts(sum []uint64, mem *[]uint64, counts []uint32, n int) []uint64 {
	if sum == nil {
		if cap(*mem) < n {
			*mem = make([]uint64, n)
		}
		sum = (*mem)[:n]
		clear(sum)
	}
	for id, k := range counts[:min(len(sum), len(counts))] { // a reload between two workers may change n
		sum[id] += uint64(k)
	}
	return sum
}

// StatusInto is Status reading the counters into buf's memory, reused from
// the last call: the counter snapshots then allocate nothing.
func (p *Plane) StatusInto(withFlows bool, buf *StatusBuf) Status {
	if len(buf.workers) != len(p.workers) {
		buf.workers = make([]dataplane.Counters, len(p.workers))
	}
	counters := buf.workers
	var flows, vipFlows []uint64
	var stale, missing []int
	// A stalled worker (stall.go) is not waited for: with the 2 s of its
	// snapshot and the 5 s of its flow count, each stuck worker made a
	// status read, and every read queued behind it, 7 s longer (a
	// /metrics scrape with two stuck workers outlived Prometheus's 10 s
	// scrape_timeout, so fulcrum_workers_stalled went unseen).
	p.mu.Lock()
	stalled := slices.Clone(p.stall.stalled)
	p.mu.Unlock()
	for i, w := range p.workers {
		wait := 2 * time.Second
		if slices.Contains(stalled, i) {
			wait = stalledSnapshotWait
		}
		if !w.Snapshot(&counters[i], wait) {
			stale = append(stale, i)
			if withFlows {
				// It did not answer: its flow count would time out too,
				// and stay posted for the next reader to wait on.
				missing = append(missing, i)
			}
			continue
		}
		if withFlows {
			svc := p.shared.Services.Load()
			n, nv := svc.NumBackendIDs(), len(svc.VIPs)
			if cap(buf.scan) < n {
				buf.scan = make([]uint32, n)
			}
			if cap(buf.vipScan) < nv {
				buf.vipScan = make([]uint32, nv)
			}
			op := dataplane.CountFlowsOpInto(buf.scan[:n]).CountVIPsInto(buf.vipScan[:nv])
			if err := w.Run(op, flowsOpTimeout); err != nil {
				// The op stays posted and the worker may still write it.
				buf.scan, buf.vipScan = nil, nil
				missing = append(missing, i)
				continue
			}
			vipFlows = addCounts(vipFlows, &buf.vips, op.VIPFlows, nv)
			flows = addCounts(flows, &buf.flows, op.Flows, n)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	svc := p.shared.Services.Load()
	st := Status{Generation: svc.Gen, Rebuilds: p.rebuilds, LastRebuildMs: float64(p.lastDur.Microseconds()) / 1000, Workers: counters, Stale: stale, FlowsMissing: missing}
	st.Stalled, st.StallWithdrawn = slices.Clone(p.stall.stalled), p.stallWithdrawsLocked()
	// Until the fold that freezes it (the first after convergence), the
	// count is the running total read now, which the signals fold's older
	// reading may be behind: a counter in the metrics, it must not fall
	// when convergence ends between two folds.
	st.Converging = p.convergingLocked()
	if !p.convergedFold {
		p.foldConverging(counters)
	}
	st.ConvergingNewFlows = p.convergingFlows
	if p.checks != nil {
		st.HealthProbes = p.checks.Probes()
		st.HealthLocalFailures = p.checks.LocalFailures()
	}
	if p.peers != nil {
		st.BGP = p.peers()
	}
	if p.announce != nil && p.announced != "" {
		st.Announced = strings.Fields(strings.Trim(p.announced, "[]"))
	}
	if p.lastErr != nil {
		st.LastError = p.lastErr.Error()
	}
	for _, v := range svc.VIPs {
		if v == nil {
			continue
		}
		vs := VIPStatus{Name: v.Name, Address: v.Addr.String(), Port: v.Port, Protocol: protoName(v.Proto), Encap: v.Encap.String(), Hash: v.Hash.String(), Panic: p.panicked[v.Name], Serving: v.Table != nil}
		if int(v.ID) < len(vipFlows) {
			vs.Flows = uint64(vipFlows[v.ID])
		}
		slots, size := tableSlots(v)
		vs.TableSize = size
		for _, c := range counters {
			vc := c.VIP(v.ID)
			if vc.Gen != v.Gen {
				continue // the counters of the id's earlier VIP: none of this one's yet
			}
			vs.Packets += vc.Packets
			vs.Bytes += vc.Bytes
			vs.NewFlows += vc.NewFlows
		}
		for _, id := range v.Members {
			b := svc.Backends[id]
			bs := p.backendStatusLocked(svc, v, id, slots[id], vs.TableSize)
			for _, c := range counters {
				if bc := c.Backend(id); bc.Gen == b.Gen {
					bs.Packets += bc.Packets
					bs.Bytes += bc.Bytes
					bs.NewFlows += bc.NewFlows
				}
			}
			if int(id) < len(flows) {
				bs.Flows = uint64(flows[id])
			}
			vs.Backends = append(vs.Backends, bs)
		}
		st.VIPs = append(st.VIPs, vs)
	}
	sort.Slice(st.VIPs, func(i, j int) bool { return st.VIPs[i].Name < st.VIPs[j].Name })
	return st
}

// backendStatusLocked is the backend id of v as Status shows it, but for
// its counters and flows: its published weight and table slots (of a
// table of size slots) and its control state.
func (p *Plane) backendStatusLocked(svc *dataplane.Services, v *dataplane.VIP, id uint32, slots, size int) BackendStatus {
	b := svc.Backends[id]
	bst := p.backends[dataplane.BackendRef{VIP: v.Name, Backend: b.Name}]
	bs := BackendStatus{VIP: v.Name, Name: b.Name, Address: b.Addr.String(), ID: id, Effective: b.Weight, Down: b.Down, Slots: slots}
	if bst != nil {
		bs.Weight = p.baseWeight(bst)
		bs.Health, bs.Reason, bs.Drained = bst.health.String(), bst.reason, bst.drained
		if !bst.passive.until.IsZero() {
			bs.Outlier, bs.Reason = true, bst.passive.reason
		}
		bs.Ejections = bst.passive.ejections
		// Ramping in the published table (what the dataplane uses),
		// not in what the next rebuild would publish.
		bs.SlowStart = !bst.drained && !b.Down && b.Weight > 0 && b.Weight < bs.Weight*WeightScale
	}
	if size > 0 {
		bs.Share = float64(bs.Slots) / float64(size)
	}
	return bs
}

// tableSlots is each backend id's slots in v's published table, and the
// table's size (none: 0).
func tableSlots(v *dataplane.VIP) (map[uint32]int, int) {
	slots := map[uint32]int{}
	if v.Table == nil {
		return slots, 0
	}
	for i, id := range v.Backends {
		slots[id] = v.Table.Count(i)
	}
	return slots, v.Table.Size()
}

// BackendNow is one backend as Status shows it, without its counters and
// flows (no worker is asked, so it is quick): what an operator's action
// left, read before anything else may change it.
func (p *Plane) BackendNow(vip, name string) (BackendStatus, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	svc := p.shared.Services.Load()
	if v := findVIPByName(svc, vip); v != nil {
		for _, id := range v.Members {
			if b := svc.Backends[id]; b != nil && b.Name == name {
				slots, size := tableSlots(v)
				return p.backendStatusLocked(svc, v, id, slots[id], size), nil
			}
		}
	}
	return BackendStatus{}, fmt.Errorf("vip %q backend %q: %w", vip, name, ErrNotFound)
}

func protoName(p uint8) string {
	if p == 17 {
		return "udp"
	}
	return "tcp"
}

// Table lists, slot by slot, the backend names of a VIP's current table
// (what two instances must agree on).
func (p *Plane) Table(vip string) ([]string, error) {
	keys, _, _, err := p.TablePlacement(vip)
	return keys, err
}

// TablePlacement is Table with what else decides where the VIP's new
// flows go, from the same snapshot: its hash fields ("5-tuple", ...) and
// the address of each backend the table names, by name. Instances whose
// slot names agree but whose hash fields or addresses differ send flows
// to other servers (README, "Slow start and the fleet").
func (p *Plane) TablePlacement(vip string) (keys []string, fields string, addrs map[string]string, err error) {
	svc := p.shared.Services.Load()
	for _, v := range svc.VIPs {
		if v == nil || v.Name != vip {
			continue
		}
		if v.Table == nil {
			return nil, v.Hash.String(), nil, nil
		}
		out := make([]string, v.Table.Size())
		for i := range out {
			out[i] = v.Table.Backend(v.Table.Slot(i)).Key
		}
		addrs = make(map[string]string, len(v.Backends))
		for i, id := range v.Backends {
			if int(id) < len(svc.Backends) && svc.Backends[id] != nil {
				addrs[v.Table.Backend(i).Key] = svc.Backends[id].Addr.String()
			}
		}
		return out, v.Hash.String(), addrs, nil
	}
	return nil, "", nil, fmt.Errorf("vip %q: %w", vip, ErrNotFound)
}

// Panicked reports the VIPs in panic mode.
func (p *Plane) Panicked() map[string]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]bool{}
	for k, v := range p.panicked {
		out[k] = v
	}
	return out
}

// RebuildStats are the table rebuild counters, for metrics.
func (p *Plane) RebuildStats() (n uint64, last time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rebuilds, p.lastDur
}

// RebuildBuckets are the upper bounds, in seconds, of the rebuild duration
// histogram: a table of 65537 slots over a few backends builds in about a
// millisecond, a million slots over hundreds of backends in tens to
// hundreds of milliseconds (docs/benchmarks.md), so the buckets span
// 100 µs to 5 s.
var RebuildBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

// Reload results, the label values of the reload counter.
const (
	ReloadOK      = "ok"      // applied
	ReloadRefused = "refused" // invalid, or needs a restart: the running one stays
	ReloadError   = "error"   // the file could not be read, or the exception interface not updated (ErrExceptionNotUpdated)
)

// opsStats are the reload and rebuild statistics. They are guarded by
// Plane.mu.
type opsStats struct {
	rebuildCounts []uint64 // per RebuildBuckets bound (not cumulative), then +Inf
	rebuildSum    float64  // seconds
	reloads       map[string]uint64
	applied       uint64    // reloads whose configuration is in force
	lastApplied   time.Time // of the last of them
}

func (o *opsStats) rebuilt(d time.Duration) {
	if o.rebuildCounts == nil {
		o.rebuildCounts = make([]uint64, len(RebuildBuckets)+1)
	}
	s := d.Seconds()
	i := sort.SearchFloat64s(RebuildBuckets, s) // first bound >= s
	o.rebuildCounts[i]++
	o.rebuildSum += s
}

// noteReload counts a Reload by its result.
func (p *Plane) noteReload(err error) {
	result := ReloadOK
	var pe *fs.PathError
	switch {
	case errors.As(err, &pe), errors.Is(err, ErrExceptionNotUpdated):
		result = ReloadError
	case err != nil:
		result = ReloadRefused
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ops.reloads == nil {
		p.ops.reloads = map[string]uint64{}
	}
	p.ops.reloads[result]++
	if err == nil || errors.Is(err, ErrExceptionNotUpdated) {
		// In force (ErrExceptionNotUpdated: only the kernel's side failed).
		p.ops.applied++
		p.ops.lastApplied = p.now()
	}
}

// OpsStats are the control plane's reload and rebuild statistics, for
// metrics.
type OpsStats struct {
	// RebuildBuckets are cumulative counts of rebuilds that took at most
	// RebuildBuckets[i] seconds; RebuildCount and RebuildSum are all of
	// them and their summed seconds.
	RebuildBuckets []uint64
	RebuildCount   uint64
	RebuildSum     float64
	// Reloads counts Reload calls by result (ReloadOK, ReloadRefused,
	// ReloadError).
	Reloads map[string]uint64
	// Applied counts the reloads that put their configuration in force:
	// ReloadOK, and the errors wrapping ErrExceptionNotUpdated;
	// LastApplied is the time of the last of them.
	Applied     uint64
	LastApplied time.Time
}

// OpsStats reads the reload and rebuild statistics.
func (p *Plane) OpsStats() OpsStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := OpsStats{RebuildBuckets: make([]uint64, len(RebuildBuckets)), RebuildSum: p.ops.rebuildSum,
		Reloads: map[string]uint64{ReloadOK: 0, ReloadRefused: 0, ReloadError: 0}, Applied: p.ops.applied, LastApplied: p.ops.lastApplied}
	var cum uint64
	for i, n := range p.ops.rebuildCounts {
		cum += n
		if i < len(out.RebuildBuckets) {
			out.RebuildBuckets[i] = cum
		}
	}
	out.RebuildCount = cum
	for k, n := range p.ops.reloads {
		out.Reloads[k] = n
	}
	return out
}

// ConntrackCapacity is every worker's conntrack table size in entries
// (fixed at start).
func (p *Plane) ConntrackCapacity() []int {
	out := make([]int, len(p.workers))
	for i, w := range p.workers {
		out[i] = w.Conntrack().Slots()
	}
	return out
}

// ConntrackOnHugepages tells, for every worker, whether its conntrack
// table lives on the EAL's hugepages (fixed at start).
func (p *Plane) ConntrackOnHugepages() []bool {
	out := make([]bool, len(p.workers))
	for i, w := range p.workers {
		out[i] = w.Conntrack().ExternalMemory()
	}
	return out
}

// ConnBuckets is every worker's conntrack bucket count (fixed at start):
// the bounds of a ConnCursor.
func (p *Plane) ConnBuckets() []int {
	out := make([]int, len(p.workers))
	for i, w := range p.workers {
		out[i] = w.Conntrack().Buckets()
	}
	return out
}
