package dataplane

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/flow"
)

// Operations the control plane asks a worker to run on its own lcore,
// because only the owning lcore may touch its conntrack table. The control
// plane posts one Op at a time; the worker checks for it once per burst (one
// atomic load) and does a bounded amount of work each time, so a scan of a
// million-entry table never stalls forwarding.

// opBudget is the conntrack buckets an Op may visit per burst or idle poll:
// 256 buckets (2048 slots) cost a few microseconds.
const opBudget = 256

type opKind uint8

const (
	opDrop           opKind = iota // remove every entry a selector matches
	opCountFlows                   // count live entries in use (conntrack.Entry.InUse) by backend id
	opLookup                       // find one flow's entry
	opList                         // copy live entries from a cursor, up to a limit
	opFlush                        // opDrop, counting the removed entries as moved
	opDropRemovedVIP               // opDrop of some VIP ids' entries, sparing those of the VIP that holds an id now
)

// Op is a request to a worker. Fields after the request part are results,
// valid once Wait returned true.
type Op struct {
	kind     opKind
	sel      conntrack.Selector
	dropVIPs *vipSet // opDropRemovedVIP
	tuple    flow.Tuple

	cursor int
	done   atomic.Bool

	// Results.
	Flows   []uint32 // opCountFlows: live entries by backend id
	Found   bool     // opLookup: the flow has an entry
	Backend uint32   // opLookup: its backend id and generation
	Gen     uint32
	VIP     uint16
	State   conntrack.State
	IdleMs  uint32 // opLookup: milliseconds since its last packet

	// opList: the request (a VIP id or backend id to match, or -1) and
	// the page: Conns, and Next, the bucket to continue from (Done: the
	// whole table was visited).
	listVIP, listBackend int64
	listGen              uint32 // with listByGen: only entries of this incarnation
	listByGen            bool
	limit                int
	Conns                []ConnEntry
	Next                 int
	Done                 bool

	// opFlush: the entries removed.
	Flushed uint64

	// VIPFlows (opCountFlows, optional: CountVIPsInto): the same entries
	// as Flows by VIP id, each once. A flow with a second chance counts in
	// Flows for two backends, so their sum is not the VIP's connections.
	VIPFlows []uint32
}

// ConnEntry is one live conntrack entry, as ListOp copies it.
type ConnEntry struct {
	Tuple     flow.Tuple // client to VIP
	VIP       uint16
	Backend   uint32
	Gen       uint32
	State     conntrack.State
	IdleMs    uint32 // since its last packet
	Chance    uint32 // the second chance's backend id, if HasChance
	HasChance bool
}

// ErrBusy is returned when a worker still runs an earlier Op.
var ErrBusy = errors.New("worker busy with another operation")

// ErrTimeout is returned when a worker did not finish an Op in time (it
// is not polling: stopped or stuck).
var ErrTimeout = errors.New("worker did not answer in time")

// DropRemovedVIPOp removes the conntrack entries of removed VIPs, whose
// ids were vips, in one pass over the table (a reload that removes 4,096
// VIPs is one pass, not 4,096 that hold the worker's op slot for
// minutes). The op may run after a later snapshot gave an id to another
// VIP (the removed one put back, or a new one): entries pinned to a
// backend of the VIP that holds the id when the op runs (its id and
// incarnation: Services.Holder) are that VIP's flows, and stay. The
// removed VIPs' backends are gone or other incarnations now, so their own
// entries all go.
func DropRemovedVIPOp(vips ...uint16) *Op {
	set := &vipSet{}
	for _, v := range vips {
		set.add(v)
	}
	return &Op{kind: opDropRemovedVIP, dropVIPs: set}
}

// vipSet is a set of VIP ids (conntrack.MaxVIPs bits).
type vipSet [conntrack.MaxVIPs / 64]uint64

func (s *vipSet) add(v uint16) {
	if int(v) < conntrack.MaxVIPs {
		s[v/64] |= 1 << (v % 64)
	}
}

func (s *vipSet) has(v uint16) bool {
	return int(v) < conntrack.MaxVIPs && s[v/64]&(1<<(v%64)) != 0
}

// DropOp removes a VIP's or a backend's conntrack entries.
func DropOp(sel conntrack.Selector) *Op { return &Op{kind: opDrop, sel: sel} }

// CountFlowsOp counts live conntrack entries per backend id.
func CountFlowsOp() *Op { return &Op{kind: opCountFlows, Flows: make([]uint32, MaxBackends)} }

// CountFlowsOpInto is CountFlowsOp counting into flows (cleared first), for
// a reader that reuses it; entries of ids beyond len(flows) are not
// counted. After a timeout the worker may still write flows.
func CountFlowsOpInto(flows []uint32) *Op {
	clear(flows)
	return &Op{kind: opCountFlows, Flows: flows}
}

// CountVIPsInto makes a CountFlowsOp also count the entries by VIP id
// into vips (cleared first): each connection once, under the VIP it is
// pinned in.
func (o *Op) CountVIPsInto(vips []uint32) *Op {
	clear(vips)
	o.VIPFlows = vips
	return o
}

// LookupOp finds the conntrack entry of a flow (the worker hashes it with its
// own local hash, by which its conntrack is bucketed).
func LookupOp(t flow.Tuple) *Op { return &Op{kind: opLookup, tuple: t} }

// maxListEntries bounds a ListOp's page, which is allocated up front:
// a caller's limit (control bounds it lower) never turns into a huge
// allocation.
const maxListEntries = 1 << 16

// ListOp copies up to limit live conntrack entries (of VIP id vip and
// backend id backend; -1 matches any) from bucket from on. The worker
// copies at most opBudget buckets per burst and stops at a bucket boundary
// before the page would overflow, so Next resumes exactly; limit is
// raised to one bucket's slots if smaller and lowered to maxListEntries
// if larger.
func ListOp(from, limit int, vip, backend int64) *Op {
	limit = min(max(limit, 1), maxListEntries)
	return &Op{kind: opList, cursor: from, limit: limit, listVIP: vip, listBackend: backend, Conns: make([]ConnEntry, 0, limit)}
}

// OfGen narrows a ListOp of one backend to the entries of its incarnation
// gen (Entry.Gen): the id may have served a removed backend before.
func (o *Op) OfGen(gen uint32) { o.listGen, o.listByGen = gen, true }

// FlushOp removes a backend's (or VIP's) conntrack entries, like DropOp,
// and counts them in Counters.Moved: their flows are placed again by the
// table at their next packet.
func FlushOp(sel conntrack.Selector) *Op { return &Op{kind: opFlush, sel: sel} }

// Post hands op to the worker. Only one Op runs at a time per worker.
func (w *Worker) Post(op *Op) error {
	if !w.op.CompareAndSwap(nil, op) {
		return ErrBusy
	}
	return nil
}

// Wait polls until op is finished or the timeout passes.
func (op *Op) Wait(timeout time.Duration) error { return op.wait(time.Now().Add(timeout), nil) }

func (op *Op) wait(deadline time.Time, stop <-chan struct{}) error {
	for !op.done.Load() {
		if stopped(stop) {
			return ErrStopped
		}
		if time.Now().After(deadline) {
			return ErrTimeout
		}
		time.Sleep(100 * time.Microsecond)
	}
	return nil
}

// Run posts op to w and waits for it. On a timeout the op stays posted and
// the worker finishes it later; the caller must not reuse it.
func (w *Worker) Run(op *Op, timeout time.Duration) error { return w.RunUntil(op, timeout, nil) }

// RunUntil is Run that also gives up, with ErrStopped, as soon as stop is
// closed (a nil stop never is): once the forwarding loops have stopped
// nobody serves the op, and a caller in the background must not wait out
// its timeout for them.
func (w *Worker) RunUntil(op *Op, timeout time.Duration, stop <-chan struct{}) error {
	deadline := time.Now().Add(timeout)
	for {
		err := w.Post(op)
		if err == nil {
			break
		}
		if stopped(stop) {
			return ErrStopped
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Microsecond)
	}
	return op.wait(deadline, stop)
}

// ErrStopped: RunUntil's stop was closed before the op was done.
var ErrStopped = errors.New("stopped before the worker answered")

func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// serveOp runs a bounded step of the posted Op, if any. Called by the
// worker between bursts and when idle.
func (w *Worker) serveOp(now conntrack.Time) {
	op := w.op.Load()
	if op == nil {
		return
	}
	finished := false
	switch op.kind {
	case opDrop:
		op.cursor, finished = w.ct.Drop(op.sel, op.cursor, opBudget)
	case opDropRemovedVIP:
		svc := w.shared.Services.Load()
		op.cursor, finished = w.ct.DropIf(func(e *conntrack.Entry) bool {
			if !op.dropVIPs.has(e.VIP()) {
				return false
			}
			if svc != nil {
				if be := svc.Holder(e.Backend(), e.Gen()); be != nil && be.VIP == e.VIP() {
					return false // a flow of the VIP that holds the id now
				}
			}
			return true
		}, op.cursor, opBudget)
	case opCountFlows:
		// Only the entries of the id's current incarnation: a removed
		// backend's entries stay until they expire or their next packet,
		// and its id may be given to a new backend meanwhile.
		svc := w.shared.Services.Load()
		op.cursor, finished = w.ct.Scan(op.cursor, opBudget, func(e *conntrack.Entry) {
			// Flows in use: closing ones (FIN or RST seen) are ending,
			// unless the client goes on acknowledging a server that
			// still sends (conntrack.Entry.InUse).
			id := e.Backend()
			if w.ct.Expired(e, now) || !e.InUse(now) {
				return
			}
			if svc == nil || svc.Holder(id, e.Gen()) != nil {
				if int(id) < len(op.Flows) {
					op.Flows[id]++
				}
				if vid := int(e.VIP()); vid < len(op.VIPFlows) {
					op.VIPFlows[vid]++
				}
			}
			// A flow with a second chance counts for the backend it
			// names too: its connection may be there, reached through
			// the pin's agent (docs/second-chance.md), and a drain of
			// that backend must wait for it.
			if ch, ok := e.Chance(); ok && ch != id && int(ch) < len(op.Flows) && chanceOn(svc, e.VIP(), ch) {
				op.Flows[ch]++
			}
		})
	case opList:
		finished = w.listStep(op, now)
	case opFlush:
		before := w.ct.Counters().Dropped
		op.cursor, finished = w.ct.Drop(op.sel, op.cursor, opBudget)
		n := w.ct.Counters().Dropped - before
		op.Flushed += n
		w.c.Moved += n
	case opLookup:
		if e := w.ct.Lookup(w.local.Hash(&op.tuple), &op.tuple, now); e != nil { // conntrack buckets by the local hash
			op.Found, op.Backend, op.Gen, op.VIP, op.State = true, e.Backend(), e.Gen(), e.VIP(), e.State()
			op.IdleMs = uint32(now - e.LastSeen())
		}
		finished = true
	default:
		finished = true
	}
	if finished {
		w.op.Store(nil)
		op.done.Store(true)
	}
}

// listStep copies entries of up to opBudget buckets into op.Conns, bucket
// by bucket, stopping before a bucket that might not fit. It reports
// whether the op is finished (page full or table done).
func (w *Worker) listStep(op *Op, now conntrack.Time) bool {
	perBucket := w.ct.Slots() / max(w.ct.Buckets(), 1)
	if cap(op.Conns) < perBucket {
		op.Conns = make([]ConnEntry, 0, perBucket) // once, on a too-small request
	}
	svc := w.shared.Services.Load()
	copyEntry := func(e *conntrack.Entry) {
		if w.ct.Expired(e, now) || op.listVIP >= 0 && int64(e.VIP()) != op.listVIP {
			return
		}
		if op.listBackend >= 0 && (int64(e.Backend()) != op.listBackend || op.listByGen && e.Gen() != op.listGen) {
			// A flow of the VIP whose second chance names the backend is
			// one of its flows too (counted among them, flushed with them).
			if ch, ok := e.Chance(); !ok || !op.listByGen || int64(ch) != op.listBackend || !chanceOn(svc, e.VIP(), ch) {
				return
			}
		}
		ch, hasCh := e.Chance()
		op.Conns = append(op.Conns, ConnEntry{Tuple: e.Key(), VIP: e.VIP(), Backend: e.Backend(), Gen: e.Gen(), Chance: ch, HasChance: hasCh,
			State: e.State(), IdleMs: uint32(now - e.LastSeen())})
	}
	for range opBudget {
		if len(op.Conns)+perBucket > cap(op.Conns) {
			op.Next = op.cursor
			return true
		}
		var done bool
		op.cursor, done = w.ct.Scan(op.cursor, 1, copyEntry)
		if done {
			op.Next, op.Done = op.cursor, true
			return true
		}
	}
	op.Next = op.cursor
	return false
}

// chanceOn reports whether a second chance naming backend id ch, stored
// in an entry of VIP vid, is acted upon (entryChance, chanceTarget): ch is
// a backend of the VIP, the VIP has the second chance on and its tunnel
// can name the backend. Only then is the flow one of that backend's
// (counted, listed with it).
func chanceOn(svc *Services, vid uint16, ch uint32) bool {
	if svc == nil || int(vid) >= len(svc.VIPs) || int(ch) >= len(svc.Backends) {
		return false
	}
	v, b := svc.VIPs[vid], svc.Backends[ch]
	return v != nil && b != nil && b.VIP == vid && v.SecondChance > 0 && encap.CanCarry(v.Encap, &b.Target)
}
