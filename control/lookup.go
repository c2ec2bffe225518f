package control

// Lookup: which backend a given flow goes to, and why.

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/flow"
	"github.com/fulcrumlb/fulcrum/packet"
)

// LookupResult says which backend a flow goes to, and why.
type LookupResult struct {
	VIP     string
	Backend string
	Address string
	// Reason: "conntrack" (pinned by an earlier packet, on Worker),
	// "conntrack-stale" (pinned to a backend that is gone or down: the next
	// packet is placed as a new flow), "table" (Maglev: a new flow would
	// take table slot Slot), "scheduler" (another scheduler picks a new
	// flow's backend at connection time, by load: Backend is empty and
	// Candidates lists what it picks from), "no-backend" (the VIP takes no
	// new flows), or "not-a-vip".
	Reason string
	Worker int
	State  string
	IdleMs uint32
	Slot   int // -1 unless a Maglev table slot decides
	// Hash is the fleet hash of the flow under the VIP's hash setting,
	// HashFields (dataplane VIP.Hash: "5-tuple", "3-tuple", ...); the
	// 5-tuple's when the destination is no VIP.
	Hash       string
	HashFields string
	// Scheduler is the VIP's scheduler ("maglev", "p2c", "least-conn",
	// ...). Candidates are the backends a non-Maglev scheduler picks a new
	// flow from, with the weights and loads it compares.
	Scheduler  string
	Candidates []LookupCandidate
	// Untracked (a TCP VIP of a load-based scheduler, Reason "scheduler"):
	// where a segment that is not a SYN goes when no worker tracks its
	// connection (ECMP moved it here, or its entry expired): the VIP's
	// Maglev table slot, under every scheduler (dataplane
	// Worker.selectBackend). Nil otherwise.
	Untracked *LookupSlot
}

// LookupSlot is a Maglev table slot and the backend it names.
type LookupSlot struct {
	Slot             int
	Backend, Address string
}

// LookupCandidate is one backend a load-aware scheduler may pick for a
// new flow, as the workers see it now.
type LookupCandidate struct {
	Backend string
	Address string
	// Weight is the effective weight (scaled by WeightScale); 0: not
	// eligible (down, drained, ejected).
	Weight int
	// Active is the load the schedulers read: active flows over every
	// worker, as published at the last signals fold (about a second old).
	Active int64
	// LatencyUs is the peak-EWMA latency estimate (peak-ewma only reads
	// it); 0 without samples.
	LatencyUs int64
}

// Lookup tells where a client's flow goes: its conntrack entry if a worker
// has one; otherwise, for a Maglev VIP, its table slot, and for another
// scheduler, the candidates it picks from when the SYN arrives (the choice
// depends on the loads at that moment, so it cannot be named in advance).
func (p *Plane) Lookup(src, dst netip.Addr, sport, dport uint16, proto uint8) (LookupResult, error) {
	t, ok := flow.TupleFrom(src, dst, sport, dport, proto)
	if !ok {
		return LookupResult{}, fmt.Errorf("lookup %v -> %v: addresses of different families", src, dst)
	}
	p.mu.Lock()
	key, err := flow.ParseKey(p.cfg.Dataplane.HashKey)
	p.mu.Unlock()
	if err != nil {
		return LookupResult{}, err
	}
	hasher := flow.NewHasher(key)
	h := hasher.Hash(&t)
	svc := p.shared.Services.Load()
	v := svc.LookupVIP(dst, dport, proto)
	res := LookupResult{Reason: "not-a-vip", Slot: -1, Hash: fmt.Sprintf("%016x", h)}
	if v == nil {
		return res, nil
	}
	// The slot follows the VIP's hash setting, as the workers' does
	// (dataplane Worker.fleetHash).
	h = hasher.HashFields(&t, v.Hash)
	res.Hash, res.HashFields = fmt.Sprintf("%016x", h), v.Hash.String()
	res.VIP, res.Scheduler = v.Name, v.Sched.String()
	for i, w := range p.workers {
		op := dataplane.LookupOp(t)
		// The worker takes one operation at a time: a lookup may wait for
		// a status read's flow count or a flush before it.
		if err := w.Run(op, lookupOpTimeout); err != nil {
			return res, fmt.Errorf("worker %d: %w", i, err)
		}
		if op.Found && int(op.Backend) < len(svc.Backends) && svc.Backends[op.Backend] != nil {
			b := svc.Backends[op.Backend]
			res.Reason, res.Worker, res.Backend, res.Address = "conntrack", i, b.Name, b.Addr.String()
			res.State, res.IdleMs = op.State.String(), op.IdleMs
			if b := svc.Holder(op.Backend, op.Gen); b != nil && !b.Down && b.VIP == v.ID {
				return res, nil
			}
			// A stale pin (its backend gone, down, or another VIP's: a
			// reload gave the flow's port to a new VIP): the next packet
			// re-selects, as Worker.pinned refuses it.
			res.Reason = "conntrack-stale"
		}
	}
	if v.Table == nil {
		res.Reason = "no-backend"
		return res, nil
	}
	if v.Sched.IsPicker() {
		// The worker's picker decides at the SYN, by the loads of that
		// moment (dataplane Worker.choose): no slot names the backend.
		if res.Reason != "conntrack-stale" {
			res.Reason = "scheduler"
		}
		res.Backend, res.Address = "", ""
		res.Candidates = p.candidates(svc, v)
		if proto == packet.ProtoTCP && res.Reason == "scheduler" {
			// Not for a stale pin: its next segment, SYN or not, is
			// placed by the scheduler (Worker.selectBackend re-selects
			// with choose), not by the table.
			at := tableSlot(svc, v, h)
			res.Untracked = &at
		}
		return res, nil
	}
	if res.Reason != "conntrack-stale" {
		res.Reason = "table"
	}
	at := tableSlot(svc, v, h)
	res.Slot, res.Backend, res.Address = at.Slot, at.Backend, at.Address
	return res, nil
}

// tableSlot is the slot of VIP v's Maglev table (not nil) that flow hash
// h takes, and the backend it names.
func tableSlot(svc *dataplane.Services, v *dataplane.VIP, h uint64) LookupSlot {
	b := svc.Backends[v.Backends[v.Table.Lookup(h)]]
	return LookupSlot{Slot: int(h % uint64(v.Table.Size())), Backend: b.Name, Address: b.Addr.String()}
}

// candidates lists what a load-aware scheduler picks a VIP's new flow
// from: every member with the weight and load the workers read (the
// published Loads; each worker adds the change in its own active flows
// since then, Worker.localLoad).
func (p *Plane) candidates(svc *dataplane.Services, v *dataplane.VIP) []LookupCandidate {
	loads := p.shared.Loads.Load()
	out := make([]LookupCandidate, 0, len(v.Members))
	for _, id := range v.Members {
		b := svc.Backends[id]
		if b == nil {
			continue
		}
		c := LookupCandidate{Backend: b.Name, Address: b.Addr.String()}
		if !b.Down { // as Worker.choose weighs it
			c.Weight = b.Weight
		}
		if loads != nil && loads.For(id, b) {
			c.Active = loads.Active[id]
			c.LatencyUs, _ = loads.Latency[id].Micros()
		}
		out = append(out, c)
	}
	return out
}

// lookupOpTimeout bounds one worker's part of a lookup, mostly the wait
// for the operation before it (a flow count of Status, flowsOpTimeout).
const lookupOpTimeout = flowsOpTimeout + time.Second
