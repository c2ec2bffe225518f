package dataplane

import (
	"github.com/fulcrumlb/fulcrum/flow"
	"time"

	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/maglev"
)

// The second chance (docs/second-chance.md).
//
// Maglev keeps a flow on its backend across a change of the backend set
// only where conntrack remembers it. When the routers move a flow to an
// instance that never saw it at the moment the set changes, that instance
// asks the new table, and for the flows whose slot changed it names a
// backend without a socket for them. So a VIP's snapshot keeps the table
// from before the change for a while (PrevTable). A mid-connection TCP
// packet of a flow this instance does not know, whose previous choice
// differs from the current one and is still a live backend of the VIP,
// goes to the current choice as usual and names the previous one in the
// tunnel header; the backend's agent (cmd/fulcrum-decap) forwards the
// packet there if no local socket owns it. The decision is stored in the
// flow's conntrack entry, so the flow's later packets carry it too, for
// as long as the flow lives (even after the previous table is dropped).

// PrevMinAge is how long a table must have been in force to become the
// previous table when it is replaced: a step of a slow-start ramp (the
// control plane rebuilds every second while one runs) lives shorter, and
// the long-lived flows were placed by the table before the ramp, so that
// one stays the previous table through the ramp.
const PrevMinAge = 3 * time.Second

// PrevTable is a VIP's previous Maglev table. When the VIP's table
// changes, the outgoing table becomes the previous one if it was in force
// for at least PrevMinAge (or if no previous table is held); otherwise the
// previous table stays. It is dropped Window after the change that made it
// previous: the control plane republishes the snapshot without it once
// the window has passed (Services.ChanceExpired).
type PrevTable struct {
	Table    *maglev.Table
	Backends []uint32  // Table's backend index -> backend id
	Gens     []uint32  // the ids' incarnations when the table was current
	Since    time.Time // the change that made it previous
	Window   time.Duration
	Hash     flow.Fields // the hash fields the table was used under: a reload may change the VIP's
}

// choose is the backend the previous table names for hash, if it is still
// a live backend of v (the same incarnation, not down; a drained backend,
// weight 0, still serves its flows and counts).
func (p *PrevTable) choose(svc *Services, v *VIP, hash uint64) *Backend {
	idx := p.Table.Lookup(hash)
	if idx < 0 || idx >= len(p.Backends) {
		return nil
	}
	id := p.Backends[idx]
	if int(id) >= len(svc.Backends) {
		return nil
	}
	if be := svc.Backends[id]; be != nil && be.Gen == p.Gens[idx] && be.VIP == v.ID && !be.Down {
		return be
	}
	return nil
}

// prevTable is the previous table of VIP cur in a snapshot built at now,
// given the VIP as the snapshot prev had it (old) and whether cur's table
// differs from old's.
func prevTable(prev *Services, old, cur *VIP, changed bool, window time.Duration, now time.Time) *PrevTable {
	if window <= 0 || cur.Sched.IsPicker() {
		return nil
	}
	kept := old.Prev
	if kept != nil && kept.Window != window {
		// A reload changed the window: the table is kept for the new
		// one, from the same change.
		k := *kept
		k.Window = window
		kept = &k
	}
	if kept != nil && now.Sub(kept.Since) >= window {
		kept = nil
	}
	// A slow start's step is never the previous table: the table from
	// before the ramp stays it through the ramp (its steps may each stand
	// for PrevMinAge or more), and once its window has passed the VIP has
	// none until the ramp is over.
	if !changed || old.Table == nil || old.Ramping || kept != nil && now.Sub(old.TableSince) < PrevMinAge {
		return kept
	}
	gens := make([]uint32, len(old.Backends))
	for i, id := range old.Backends {
		if int(id) < len(prev.Backends) && prev.Backends[id] != nil {
			gens[i] = prev.Backends[id].Gen
		}
	}
	return &PrevTable{Table: old.Table, Backends: old.Backends, Gens: gens, Since: now, Window: window, Hash: old.Hash}
}

// tableChanged reports whether any slot of the two VIPs' tables names
// another backend id (ids are stable across snapshots). Tables built from
// the same backends, weights and size are the same (Maglev is
// deterministic), which settles the common case without a pass over the
// slots.
func tableChanged(a, b *VIP) bool {
	if a.Table == nil || b.Table == nil {
		return a.Table != b.Table
	}
	if a.Table.Size() != b.Table.Size() {
		return true
	}
	if sameBuild(a, b) {
		return false
	}
	for s := range a.Table.Size() {
		if a.Backends[a.Table.Slot(s)] != b.Backends[b.Table.Slot(s)] {
			return true
		}
	}
	return false
}

// sameBuild reports whether the two VIPs' tables were built from the same
// backends (keys, weights, ids), in the same order.
func sameBuild(a, b *VIP) bool {
	if a.Table.Len() != b.Table.Len() || len(a.Backends) != len(b.Backends) {
		return false
	}
	for i := range a.Table.Len() {
		if a.Table.Backend(i) != b.Table.Backend(i) || a.Backends[i] != b.Backends[i] {
			return false
		}
	}
	return true
}

// ChanceExpired reports whether a VIP of s holds a previous table whose
// window has passed at now: the control plane then builds a snapshot
// without it.
func (s *Services) ChanceExpired(now time.Time) bool {
	if s == nil {
		return false
	}
	for _, v := range s.VIPs {
		if v != nil && v.Prev != nil && now.Sub(v.Prev.Since) >= v.Prev.Window {
			return true
		}
	}
	return false
}

// firstChance decides the second chance of a new flow's first packet, a
// mid-connection TCP packet (not a SYN) that conntrack did not know: the
// previous table's choice when it differs from be and the VIP's tunnel
// can name it, stored in the new entry e (nil if the insert failed) so
// that the flow's later packets carry it too. A choice the tunnel cannot
// name (GRE and an IPv6 backend; IPIP) is neither counted nor stored: the
// flow goes without, and its hits do not look the choice up for nothing.
func (w *Worker) firstChance(svc *Services, v *VIP, i int, be *Backend, e *conntrack.Entry) {
	pb := w.prevChoice(svc, v, i)
	if pb == nil || pb == be || !encap.CanCarry(v.Encap, &pb.Target) {
		return
	}
	w.chance[i] = pb
	if e != nil {
		e.SetChance(pb.ID)
		// Counted once, when stored: a flow whose insert failed is
		// decided again at each packet (each counted in SecondChance).
		w.c.SecondChanceFlows++
	}
}

// A closing entry is ambiguous when its pin and the table disagree. A
// segment without SYN on it is either its connection's (the close was
// forged, or it is the client's last ACK, or a half-closed download's
// ACKs), which the pin has; or a new connection's on the reused tuple
// whose SYN the routers sent to another instance (they moved the tuple
// between the two connections), which placed it by the fleet's table,
// while the pin holds the old connection in TIME_WAIT, which answers the
// new one's segments with ACKs of its own and stalls it for good (the
// fleet lab lost 1-4 of 200 connections so). On a Maglev VIP with the
// second chance on, such a segment goes to the table's choice naming the
// pin: the table's backend delivers a new connection's segments and its
// agent forwards the old connection's to the pin (cmd/fulcrum-decap). The
// entry stays pinned while it is closing (closingChance); a segment that
// makes it established again (data after the FIN, any segment after an
// RST alone: conntrack's closeRule) repins it to the table's choice with
// the pin stored as its second chance (reopened). Without the second
// chance the pin stays, so that a forged close never moves a connection;
// a flow that already has a second chance (it moved here after a table
// change) keeps it and its pin: the entry can name only one other backend.
// Load-based VIPs are left alone: another instance placed the new
// connection by its own loads, which the table does not know either.

// closingChance is the backend to send a segment without SYN on the
// closing entry e of packet i to, and the pin to name, when they differ
// (nil, nil otherwise): the table's choice, or, where the table names the
// pin, the previous table's choice.
//
// The second is for an instance that changed its table before the fleet
// did (a drain or weight change here first, a ramp begun here first): its
// previous table is the one the other instances still use. A connection
// placed here by the new table on the pin ended here; the client reuses the tuple for a new one, whose SYN the routers
// sent to another instance, which placed it by the fleet's table; then
// its segments come here. The table naming the pin, they went there,
// where the old connection's TIME_WAIT answers them with ACKs of its own,
// and the first data settled the entry on the pin for good: the new
// connection stalled, also after this instance's table was the fleet's
// again. Sent to the previous table's choice naming the pin, they reach
// the new connection, and the old connection's are forwarded to the pin
// by that backend's agent, as with the table's choice. (Sent to the pin
// naming the previous table's choice instead, the new connection's FIN
// would find the old connection's TIME_WAIT, which owns FIN segments:
// its close would never reach its backend.)
func (w *Worker) closingChance(svc *Services, v *VIP, i int, e *conntrack.Entry) (tb, pin *Backend) {
	if v.SecondChance <= 0 || v.Sched.IsPicker() {
		return nil, nil
	}
	pin = w.pinned(svc, v, e)
	if pin == nil || pin.Down || entryChance(svc, v, e, pin) != nil || !encap.CanCarry(v.Encap, &pin.Target) {
		return nil, nil // gone or down (the caller moves the flow), or it has a second chance already
	}
	if tb = w.fromTable(svc, v, w.hashes[i]); tb == pin && v.Prev != nil {
		// Not to a backend the checks call down (on_down "keep" leaves
		// it live): the fleet's checks likely eject it too, and the
		// pin's own connection (a half-closed download's ACKs, its data
		// after a forged close) would be sent to a dead backend.
		if tb = w.prevChoice(svc, v, i); tb != nil && tb.Unhealthy {
			tb = nil
		}
	}
	if tb == nil || tb == pin {
		return nil, nil
	}
	return tb, pin
}

// prevChoice is the backend the VIP's previous table names for packet i,
// if it is still a live backend of v (PrevTable.choose), looked up under
// the hash fields the fleet used it with.
func (w *Worker) prevChoice(svc *Services, v *VIP, i int) *Backend {
	h := w.hashes[i]
	if v.Prev.Hash != v.Hash {
		// A reload changed the VIP's hash fields since: the previous
		// table is looked up as the fleet used it, under its own.
		h = w.hasher.HashFields(&w.parsed[i].Tuple, v.Prev.Hash)
	}
	return v.Prev.choose(svc, v, h)
}

// reopened repins e, a closing entry that packet i made established again,
// to closingChance's choice with its pin as its second chance, when they
// differ.
func (w *Worker) reopened(svc *Services, v *VIP, i int, e *conntrack.Entry) {
	if tb, pin := w.closingChance(svc, v, i, e); tb != nil {
		w.ct.Repin(e, tb.ID, tb.Gen)
		e.SetChance(pin.ID)
		w.c.SecondChanceFlows++
	}
}

// entryChance is the second chance stored in the entry of a flow pinned
// to be, if it is still a live backend of v other than be and the VIP
// still has the second chance on.
func entryChance(svc *Services, v *VIP, e *conntrack.Entry, be *Backend) *Backend {
	id, ok := e.Chance()
	if !ok || v.SecondChance <= 0 || int(id) >= len(svc.Backends) {
		return nil
	}
	if ch := svc.Backends[id]; ch != nil && ch != be && ch.VIP == v.ID && !ch.Down {
		return ch
	}
	return nil
}

// chanceTarget is ch's tunnel destination if a tunnel of kind can carry it
// (IPIP cannot; GRE only an IPv4 backend), nil otherwise.
func chanceTarget(kind encap.Kind, ch *Backend) *encap.Backend {
	if ch == nil || !encap.CanCarry(kind, &ch.Target) {
		return nil
	}
	return &ch.Target
}
