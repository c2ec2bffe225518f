package control

// Connection listing and flushing for the admin API: reads and removals of
// conntrack entries, always through worker operations (only the owning
// lcore touches its table), a bounded number of buckets per burst.

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/dataplane"
)

// MaxConnsPage is the most entries one Conns call returns: a page is
// copied into memory the worker's op preallocates, so it is bounded.
const MaxConnsPage = 10000

// bucketEntries is the entries of one conntrack bucket (conntrack's
// bucketSlots): the smallest page.
const bucketEntries = 8

// connsOpTimeout bounds one worker's part of a listing or flush: a stuck
// worker makes the call fail instead of hang.
const connsOpTimeout = 10 * time.Second

// ConnCursor is where a listing continues: a worker and a bucket of its
// table. The zero value starts at the beginning.
type ConnCursor struct {
	Worker, Bucket int
}

// Conn is one tracked connection.
type Conn struct {
	Client, VIPAddr string // address:port
	Proto           string
	VIP, Backend    string // names ("" if no longer configured)
	BackendAddress  string
	State           string
	IdleMs          uint32
	Worker          int
	Stale           bool   // pinned to a backend that is gone or down: the next packet re-selects
	SecondChance    string // the entry's second chance, a backend name
}

// ConnQuery selects connections: of one VIP, or one backend of it (names;
// empty matches any), at most Limit (at most MaxConnsPage), from From.
type ConnQuery struct {
	VIP, Backend string
	Limit        int
	From         ConnCursor
}

// Conns lists live tracked connections, one page (a Limit below one
// bucket, 8 entries, is raised to it): the next page starts at
// next; done is true when every worker's table was visited. Entries
// created or removed during the listing may or may not show.
func (p *Plane) Conns(q ConnQuery) (conns []Conn, next ConnCursor, done bool, err error) {
	svc := p.shared.Services.Load()
	vipID, beID := int64(-1), int64(-1)
	var gen uint32
	if q.VIP != "" {
		v := findVIPByName(svc, q.VIP)
		if v == nil {
			return nil, q.From, false, fmt.Errorf("vip %q: %w", q.VIP, ErrNotFound)
		}
		vipID = int64(v.ID)
		if q.Backend != "" {
			id, ok := findMember(svc, v, q.Backend)
			if !ok {
				return nil, q.From, false, fmt.Errorf("vip %q backend %q: %w", q.VIP, q.Backend, ErrNotFound)
			}
			beID, gen = int64(id), svc.Backends[id].Gen
		}
	}
	// A page ends at a bucket boundary (so the cursor resumes exactly),
	// so it must hold a whole bucket.
	limit := min(max(q.Limit, bucketEntries), MaxConnsPage)
	cur := q.From
	for cur.Worker < len(p.workers) && limit-len(conns) >= bucketEntries {
		op := dataplane.ListOp(cur.Bucket, limit-len(conns), vipID, beID)
		if beID >= 0 {
			op.OfGen(gen) // not a removed backend's entries left on the id
		}
		if err := p.workers[cur.Worker].Run(op, connsOpTimeout); err != nil {
			return conns, cur, false, fmt.Errorf("worker %d: %w", cur.Worker, err)
		}
		for _, e := range op.Conns {
			conns = append(conns, connOf(svc, &e, cur.Worker))
		}
		if !op.Done {
			cur.Bucket = op.Next
			if len(op.Conns) == 0 {
				break // the page cannot take a whole bucket more
			}
			continue
		}
		cur = ConnCursor{Worker: cur.Worker + 1}
	}
	return conns, cur, cur.Worker >= len(p.workers), nil
}

func connOf(svc *dataplane.Services, e *dataplane.ConnEntry, worker int) Conn {
	c := Conn{Client: netip.AddrPortFrom(e.Tuple.SrcAddr(), e.Tuple.SrcPort).String(),
		VIPAddr: netip.AddrPortFrom(e.Tuple.DstAddr(), e.Tuple.DstPort).String(), Proto: protoName(e.Tuple.Proto),
		State: e.State.String(), IdleMs: e.IdleMs, Worker: worker, Stale: true}
	if int(e.VIP) < len(svc.VIPs) && svc.VIPs[e.VIP] != nil {
		c.VIP = svc.VIPs[e.VIP].Name
	}
	if int(e.Backend) < len(svc.Backends) {
		// Named only if the entry is of the backend that holds the id
		// now: a removed backend's entries stay on its id, which a new
		// backend may have been given.
		if b := svc.Backends[e.Backend]; b != nil && b.Gen == e.Gen && b.VIP == e.VIP {
			c.Backend, c.BackendAddress = b.Name, b.Addr.String()
			c.Stale = b.Down
		}
	}
	if e.HasChance {
		c.SecondChance = "?"
		if int(e.Chance) < len(svc.Backends) {
			if b := svc.Backends[e.Chance]; b != nil && b.VIP == e.VIP {
				c.SecondChance = b.Name
			}
		}
	}
	return c
}

// Flush removes every tracked connection of a backend of a VIP on every
// worker, and returns how many. Their next packets are placed by the
// table again (counted as moved: dataplane.FlushOp). The backend keeps its
// place in the table: drain it first to move its flows elsewhere.
func (p *Plane) Flush(vip, backend string) (uint64, error) {
	flush, err := p.FlushOf(vip, backend)
	if err != nil {
		return 0, err
	}
	return flush()
}

// FlushOf looks the backend up now and returns what flushes its
// connections (Flush's work). The look-up is what a caller holds reloads
// off for (HoldReloads); the flush waits for every worker (up to
// connsOpTimeout each) and is called outside the hold: it acts on the
// incarnation found, whatever a reload meanwhile makes of the names.
func (p *Plane) FlushOf(vip, backend string) (func() (uint64, error), error) {
	svc := p.shared.Services.Load()
	v := findVIPByName(svc, vip)
	if v == nil {
		return nil, fmt.Errorf("vip %q: %w", vip, ErrNotFound)
	}
	id, ok := findMember(svc, v, backend)
	if !ok {
		return nil, fmt.Errorf("vip %q backend %q: %w", vip, backend, ErrNotFound)
	}
	// This backend's own entries (its id may have served a removed
	// backend, even of another VIP, whose entries are still there), and
	// the VIP's flows whose second chance names it: the API counts those
	// as its flows, and they reach it through their pin's agent.
	sel := conntrack.ByIncarnation(id, svc.Backends[id].Gen, v.ID)
	if v.SecondChance > 0 {
		sel = sel.AndChances()
	}
	return func() (uint64, error) {
		var n uint64
		for i, w := range p.workers {
			op := dataplane.FlushOp(sel)
			if err := w.Run(op, connsOpTimeout); err != nil {
				return n, fmt.Errorf("worker %d: %w", i, err)
			}
			n += op.Flushed
		}
		p.log.Info("backend connections flushed", "vip", vip, "backend", backend, "flows", n)
		return n, nil
	}, nil
}

func findVIPByName(svc *dataplane.Services, name string) *dataplane.VIP {
	for _, v := range svc.VIPs {
		if v != nil && v.Name == name {
			return v
		}
	}
	return nil
}

func findMember(svc *dataplane.Services, v *dataplane.VIP, name string) (uint32, bool) {
	for _, id := range v.Members {
		if b := svc.Backends[id]; b != nil && b.Name == name {
			return id, true
		}
	}
	return 0, false
}
