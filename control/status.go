package control

// Status: what the admin API and fulcrumctl show of VIPs and backends.

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/fulcrumlb/fulcrum/dataplane"
)

// BackendStatus is one backend as the admin API shows it.
type BackendStatus struct {
	VIP       string  `json:"vip"`
	Name      string  `json:"name"`
	Address   string  `json:"address"`
	ID        uint32  `json:"id"`
	Weight    int     `json:"weight"`           // configured (or set by the operator)
	Effective int     `json:"effective_weight"` // in the table now, scaled by 100
	Health    string  `json:"health"`
	Reason    string  `json:"reason,omitempty"`
	Drained   bool    `json:"drained"`
	Down      bool    `json:"down"`
	SlowStart bool    `json:"slow_start"`
	Slots     int     `json:"table_slots"`
	Share     float64 `json:"table_share"`
	Flows     uint64  `json:"active_flows"`
	Outlier   bool    `json:"outlier"`   // ejected by the passive checks
	Ejections int     `json:"ejections"` // passive ejections so far
	NewFlows  uint64  `json:"new_flows"`
	Packets   uint64  `json:"packets"`
	Bytes     uint64  `json:"bytes"`
}

// VIPStatus is one VIP as the admin API shows it.
type VIPStatus struct {
	Name      string          `json:"name"`
	Address   string          `json:"address"`
	Port      uint16          `json:"port"`
	Protocol  string          `json:"protocol"`
	Encap     string          `json:"encap"`
	TableSize int             `json:"table_size"`
	Panic     bool            `json:"panic_mode"`
	Serving   bool            `json:"serving"` // some backend takes new flows
	Packets   uint64          `json:"packets"`
	Bytes     uint64          `json:"bytes"`
	NewFlows  uint64          `json:"new_flows"`
	Backends  []BackendStatus `json:"backends"`
}

// Status is the whole control plane state.
type Status struct {
	Generation    uint64               `json:"generation"`
	Rebuilds      uint64               `json:"rebuilds"`
	LastRebuildMs float64              `json:"last_rebuild_ms"`
	LastError     string               `json:"last_error,omitempty"`
	VIPs          []VIPStatus          `json:"vips"`
	Workers       []dataplane.Counters `json:"-"`
	// Stale lists the workers that did not answer the counter snapshot in
	// time (stopped or stuck): their counters read zero.
	Stale []int `json:"stale_workers,omitempty"`
	// BGP lists the BGP sessions (none without a [bgp] section) and the
	// announced VIPs.
	BGP       []PeerInfo `json:"bgp_peers,omitempty"`
	Announced []string   `json:"announced,omitempty"`
	// Converging is true from start until every active health check of
	// the backends configured at start has given its first verdict: until
	// then nothing is announced and new flows use every configured backend
	// (health unknown counts as up). ConvergingNewFlows counts the new
	// flows forwarded meanwhile (the router may still send traffic over
	// the old route); it stops counting at the first signals fold after
	// convergence, so it may include up to one fold period (1 s) more.
	Converging         bool   `json:"converging"`
	ConvergingNewFlows uint64 `json:"converging_new_flows"`
}

// Status reports every VIP and backend with their counters. With flows, it
// also counts active flows per backend on every worker (a background scan
// of each conntrack table; it takes a few milliseconds per million
// entries).
func (p *Plane) Status(withFlows bool) Status {
	counters := make([]dataplane.Counters, len(p.workers))
	var flows []uint32
	var stale []int
	for i, w := range p.workers {
		if !w.Snapshot(&counters[i], 2*time.Second) {
			stale = append(stale, i)
		}
		if withFlows {
			op := dataplane.CountFlowsOp()
			if w.Run(op, 5*time.Second) == nil {
				if flows == nil {
					flows = make([]uint32, len(op.Flows))
				}
				for id, n := range op.Flows {
					flows[id] += n
				}
			}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	svc := p.shared.Services.Load()
	st := Status{Generation: svc.Gen, Rebuilds: p.rebuilds, LastRebuildMs: float64(p.lastDur.Microseconds()) / 1000, Workers: counters, Stale: stale}
	st.Converging, st.ConvergingNewFlows = p.convergingLocked(), p.convergingFlows
	if st.Converging {
		st.ConvergingNewFlows = vipNewFlows(counters) // all of them so far
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
		vs := VIPStatus{Name: v.Name, Address: v.Addr.String(), Port: v.Port, Protocol: protoName(v.Proto), Encap: v.Encap.String(), Panic: p.panicked[v.Name], Serving: v.Table != nil}
		slots := map[uint32]int{}
		if v.Table != nil {
			vs.TableSize = v.Table.Size()
			for i, id := range v.Backends {
				slots[id] = v.Table.Count(i)
			}
		}
		for _, c := range counters {
			vs.Packets += c.VIPs[v.ID].Packets
			vs.Bytes += c.VIPs[v.ID].Bytes
			vs.NewFlows += c.VIPs[v.ID].NewFlows
		}
		for _, id := range v.Members {
			b := svc.Backends[id]
			bst := p.backends[dataplane.BackendRef{VIP: v.Name, Backend: b.Name}]
			bs := BackendStatus{VIP: v.Name, Name: b.Name, Address: b.Addr.String(), ID: id, Effective: b.Weight, Down: b.Down, Slots: slots[id]}
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
			if vs.TableSize > 0 {
				bs.Share = float64(bs.Slots) / float64(vs.TableSize)
			}
			for _, c := range counters {
				if bc := c.Backends[id]; bc.Gen == b.Gen {
					bs.Packets += bc.Packets
					bs.Bytes += bc.Bytes
					bs.NewFlows += bc.NewFlows
				}
			}
			if flows != nil {
				bs.Flows = uint64(flows[id])
			}
			vs.Backends = append(vs.Backends, bs)
		}
		st.VIPs = append(st.VIPs, vs)
	}
	sort.Slice(st.VIPs, func(i, j int) bool { return st.VIPs[i].Name < st.VIPs[j].Name })
	return st
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
	svc := p.shared.Services.Load()
	for _, v := range svc.VIPs {
		if v == nil || v.Name != vip {
			continue
		}
		if v.Table == nil {
			return nil, nil
		}
		out := make([]string, v.Table.Size())
		for i := range out {
			out[i] = v.Table.Backend(v.Table.Slot(i)).Key
		}
		return out, nil
	}
	return nil, fmt.Errorf("vip %q: %w", vip, ErrNotFound)
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
