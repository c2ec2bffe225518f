package dataplane

import (
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/packet"
	"github.com/fulcrumlb/fulcrum/punt"
)

// DropReason is a drop decided by the dataplane itself (parse failures and
// encapsulation results have their own counters). docs/drop-reasons.md
// lists them all.
type DropReason uint8

const (
	DropNoService       DropReason = iota // to a VIP address, but no VIP serves that port/protocol
	DropNoBackend                         // the VIP's table named no usable backend
	DropNoNextHop                         // the next hop's MAC is not resolved yet
	DropVIPICMP                           // ICMP to a VIP that is not an error (echo etc.)
	DropICMPNotOurs                       // an ICMP error whose quote is not from this VIP
	DropBadBuffer                         // the buffer's offsets are inconsistent (a driver bug)
	DropMultiSeg                          // a multi-segment mbuf (jumbo frames are not supported yet)
	DropNoException                       // non-VIP traffic with the exception path disabled
	DropICMPRateLimited                   // an ICMP too-big reply over the lcore's error budget
	DropEchoRateLimited                   // an echo request to a VIP over the lcore's echo budget
	DropICMPToSelf                        // an ICMP error would go to a VIP or the LB's own address (a spoofed source)
	DropHealthNoSlot                      // a health check from the kernel whose source port names no backend of its VIP (healthpath.go)
	DropHealthNotSent                     // a health check from the kernel that could not be encapsulated (too big)
	DropMartianSource                     // VIP traffic from an address no client has (multicast, loopback, ...) or, for a new flow, from a VIP or the LB's own address
	DropNotForHost                        // non-VIP traffic to a unicast address that is not the LB's own: the kernel would not take it
	DropHealthForgedSYN                   // a SYN to a health check's port on the LB's address: it would break the check (simultaneous open)
	DropPuntRateLimited                   // for the kernel, but over its class's punt budget (package punt)
	DropVIPLinkGroup                      // VIP traffic in a frame to a broadcast or multicast MAC address: every LB of the segment would forward it
	DropReplyToGroup                      // an echo request or a too-big packet from a broadcast or multicast source MAC: the reply would reach every host of the segment
	DropTunnelICMP                        // an ICMP error to the LB's address about one of its own tunnel packets to a backend (tunnelError)
	NumDropReasons
)

var dropNames = [NumDropReasons]string{
	DropNoService:       "no-service",
	DropNoBackend:       "no-backend",
	DropNoNextHop:       "no-next-hop",
	DropVIPICMP:         "vip-icmp-not-error",
	DropICMPNotOurs:     "icmp-error-not-ours",
	DropBadBuffer:       "bad-buffer",
	DropMultiSeg:        "multi-segment",
	DropNoException:     "no-exception-path",
	DropICMPRateLimited: "icmp-rate-limited",
	DropEchoRateLimited: "echo-rate-limited",
	DropICMPToSelf:      "icmp-error-to-self",
	DropHealthNoSlot:    "health-check-unknown-slot",
	DropHealthNotSent:   "health-check-not-encapsulated",
	DropMartianSource:   "martian-source",
	DropNotForHost:      "not-for-host",
	DropHealthForgedSYN: "health-check-forged-syn",
	DropPuntRateLimited: "punt-rate-limited",
	DropVIPLinkGroup:    "vip-link-broadcast",
	DropReplyToGroup:    "reply-to-group-source",
	DropTunnelICMP:      "tunnel-icmp-error",
}

// encapDropNames are the encapsulation drops as drop reasons: encap names
// its results "drop-too-big-no-df" and so on, and a reason label says
// "drop" once, in the metric's name (fulcrum_drops_total), like every
// other reason.
var encapDropNames = func() (n [encap.NumResults]string) {
	for r := range n {
		n[r] = strings.TrimPrefix(encap.Result(r).String(), "drop-")
	}
	return n
}()

// String is the reason's metric label.
func (r DropReason) String() string {
	if r < NumDropReasons {
		return dropNames[r]
	}
	return "unknown"
}

// PacketBytes counts forwarded packets and bytes, and new flows (once per
// flow: its first packet, a conntrack miss, or a SYN opening a new
// connection on a tracked tuple; not the flow's later packets in the same
// burst, nor ICMP errors and fragments, which create no state) that chose
// this VIP or backend. For a backend, Gen is the
// incarnation of its id the counts belong to: a reused id starts from zero.
type PacketBytes struct {
	Packets, Bytes, NewFlows uint64
	Gen                      uint32

	// Backend signals (not used for VIPs). Active is the worker's
	// conntrack entries pinned to the backend and not closing (no FIN or
	// RST seen: conntrack.Table.BackendActive), copied at each snapshot.
	// SYNs counts new flows that began with a SYN; Established, handshakes
	// that completed (the client's first ACK), with HandshakeMs their summed
	// SYN-to-ACK times; SYNRetrans, SYNs the client sent again for a flow
	// still waiting for its handshake.
	Active                  int64
	SYNs, Established       uint64
	SYNRetrans, HandshakeMs uint64
}

// Counters are one worker's counters. The worker writes them with plain
// stores; the control plane reads a consistent copy through Snapshot.
type Counters struct {
	RxPackets, RxBytes uint64
	TxPackets, TxBytes uint64                  // counted by the I/O loop after tx
	TxFull             uint64                  // decided to send (forward, reply, punt), but the port's tx queue refused it
	Punted             uint64                  // handed to the kernel
	PuntLimited        [punt.NumClasses]uint64 // of Drops[DropPuntRateLimited], by class
	FromKernel         uint64                  // sent on the wire from the exception port
	HealthTunnelTx     uint64                  // of which health checks encapsulated to a backend (healthpath.go)
	Fragments          uint64                  // VIP packets that were IP fragments
	ICMPErrors         uint64                  // ICMP errors routed to the backend owning the quoted flow
	EchoReplies        uint64                  // pings to a VIP answered by the LB
	CTHits, CTMisses   uint64                  // every VIP packet but fragments and QUIC Routed is exactly one of them
	Moved              uint64                  // conntrack hits whose backend was removed: re-selected
	SYNKept            uint64                  // SYNs on an established flow that kept its backend (port reuse, or a spoofed SYN)
	SYNsByTable        uint64                  // SYNs of a load-based VIP placed by the Maglev table while the conntrack evicted handshakes in progress
	SecondChance       uint64                  // packets forwarded naming a second-chance backend (docs/second-chance.md)
	SecondChanceFlows  uint64                  // flows (mid-connection, unknown here) given a second chance
	Bursts, IdlePolls  uint64

	Parse [packet.NumReasons]uint64
	Encap [encap.NumResults]uint64 // forward and icmp-reply, and encapsulation drops
	Drops [NumDropReasons]uint64
	QUIC  [NumQUICPaths]uint64 // packets to QUIC VIPs, by the way they took (quic.go)

	VIPs     []PacketBytes // by VIP id (forwarded)
	Backends []PacketBytes // by backend id (forwarded)

	Conntrack conntrack.Counters
	Flows     int // live conntrack entries
}

// Per-VIP and per-backend counters are sized by the ids of the Services
// snapshot, not by MaxVIPs and MaxBackends: at 72 bytes a backend, the
// limits would make every worker's counters, and every copy a snapshot
// takes, 4.7 MB (a GC cycle every few seconds at one snapshot a second).

// ensure grows the worker's per-VIP and per-backend counters to hold
// nVIPs and nBackends ids. The worker calls it when it first sees a new
// Services snapshot, between bursts (the only time it allocates). They
// never shrink: a removed id's counts stay until the id is reused, when
// the backend's Gen resets them.
func (c *Counters) ensure(nVIPs, nBackends int) {
	c.VIPs = growLen(c.VIPs, nVIPs)
	c.Backends = growLen(c.Backends, nBackends)
}

// growLen is s with at least n elements, zero beyond the old length.
func growLen(s []PacketBytes, n int) []PacketBytes {
	if n <= len(s) {
		return s
	}
	if n > cap(s) {
		t := make([]PacketBytes, n)
		copy(t, s)
		return t
	}
	t := s[:n]
	clear(t[len(s):])
	return t
}

// reserve gives a snapshot's destination room for nVIPs and nBackends ids
// without changing its contents, so that the worker's copy into it does
// not allocate (the reader allocates, on its own goroutine, and only when
// a snapshot grew).
func (c *Counters) reserve(nVIPs, nBackends int) {
	// The contents are kept: a worker that does not answer leaves dst as
	// the last reading, which the metrics show again (no counter of a
	// stale worker may go back, also after a reload that grew the ids).
	if cap(c.VIPs) < nVIPs {
		c.VIPs = append(make([]PacketBytes, 0, nVIPs), c.VIPs...)
	}
	if cap(c.Backends) < nBackends {
		c.Backends = append(make([]PacketBytes, 0, nBackends), c.Backends...)
	}
}

// VIP is the counters of VIP id: zero for an id beyond the snapshot (a VIP
// added since the worker's last burst).
func (c *Counters) VIP(id uint16) PacketBytes {
	if int(id) < len(c.VIPs) {
		return c.VIPs[id]
	}
	return PacketBytes{}
}

// Backend is the counters of backend id: zero for an id beyond the
// snapshot (a backend added since the worker's last burst). Callers still
// compare Gen with the backend's.
func (c *Counters) Backend(id uint32) PacketBytes {
	if int(id) < len(c.Backends) {
		return c.Backends[id]
	}
	return PacketBytes{}
}

// Dropped is the total of every drop counter.
func (c *Counters) Dropped() uint64 {
	var n uint64
	for _, v := range c.Parse[1:] {
		n += v
	}
	for r, v := range c.Encap {
		if encap.Result(r).Drop() {
			n += v
		}
	}
	for _, v := range c.Drops {
		n += v
	}
	return n
}

// snapshotReq is the hand-off between a reader and the worker: the reader
// stores a destination and raises want; the worker, between bursts, copies
// its counters there and raises done. The atomics give the copy a
// happens-before edge, so nothing is read while it is written, and the
// worker pays one atomic load per burst.
type snapshotReq struct {
	want atomic.Bool
	done atomic.Bool
	dst  *Counters
}

func (w *Worker) serveSnapshot() {
	// Each burst (and idle poll): dates the handshakes its inserts
	// evicted, on either path, at the burst's time (handshakesEvicted).
	w.noteEvictions(w.now)
	// One atomic load per burst when nobody asks; the CAS claims the
	// request so a reader that gives up cannot withdraw it mid-copy.
	if !w.snap.want.Load() || !w.snap.want.CompareAndSwap(true, false) {
		return
	}
	d := w.snap.dst
	vips, backends := d.VIPs, d.Backends
	*d = w.c
	// Only the ids of the current snapshot: the reader reserved room for
	// them, so the copy does not allocate unless a reload grew the
	// snapshot in between.
	nv, nb := len(w.c.VIPs), len(w.c.Backends)
	svc := w.shared.Services.Load()
	if svc != nil {
		nv, nb = min(nv, len(svc.VIPs)), min(nb, svc.NumBackendIDs())
	}
	d.VIPs = append(vips[:0], w.c.VIPs[:nv]...)
	d.Backends = append(backends[:0], w.c.Backends[:nb]...)
	d.Conntrack = w.ct.Counters()
	d.Flows = w.ct.Len()
	for id := range d.Backends {
		// The flows of the id's current backend only: a removed
		// backend's entries outlive it, and its id may be another's now.
		d.Backends[id].Active = 0
		if svc != nil && id < len(svc.Backends) && svc.Backends[id] != nil {
			d.Backends[id].Active = int64(w.ct.BackendActive(uint32(id), svc.Backends[id].Gen))
		}
	}
	w.snap.done.Store(true)
}

// Idle lets the I/O loop serve snapshot requests and operations while no
// packets arrive; now is the current time.
func (w *Worker) Idle(now conntrack.Time) {
	prev := w.now
	w.now = now
	w.untrackedRecently(now) // clears the mark once its window has passed
	w.handshakesEvicted(now) // dates evictions, and clears the mark likewise
	w.serveSnapshot()
	// An idle poll may come after a sleep of up to idle_max_sleep (1 s):
	// a posted operation gets a step for every 256 µs since the last
	// poll or burst, as the idle sweep scales (engine.go idleSweep), so a
	// count or flush of a large table does not take minutes on an idle
	// worker and outlive its caller's timeout.
	steps := 1
	if now > prev {
		steps += int(min(now-prev, 1000)) * 4
	}
	for i := 0; i < steps && w.op.Load() != nil; i++ {
		w.serveOp(now)
	}
}

// Snapshot copies the worker's counters into dst, waiting up to timeout for
// the worker to reach the end of a burst (or an idle poll). It returns
// false if the worker did not answer in time (stopped or stuck). Concurrent
// callers take turns.
//
// dst's VIPs and Backends hold the ids of the current Services snapshot
// (fewer if the worker has not seen it yet: read them with VIP and
// Backend). Their memory is reused: a reader that keeps dst from one call
// to the next allocates nothing once the snapshot stops growing.
func (w *Worker) Snapshot(dst *Counters, timeout time.Duration) bool {
	w.snapMu.Lock()
	defer w.snapMu.Unlock()
	return w.snapshotLocked(dst, timeout)
}

// SnapshotTimed is Snapshot that also returns how long it waited for the
// worker on the clock now, from its turn (another reader's turn before it
// does not count): the stall watch's test of a pause of the process.
func (w *Worker) SnapshotTimed(dst *Counters, timeout time.Duration, now func() time.Time) (answered bool, waited time.Duration) {
	w.snapMu.Lock()
	defer w.snapMu.Unlock()
	start := now()
	answered = w.snapshotLocked(dst, timeout)
	return answered, now().Sub(start)
}

func (w *Worker) snapshotLocked(dst *Counters, timeout time.Duration) bool {
	if svc := w.shared.Services.Load(); svc != nil {
		dst.reserve(len(svc.VIPs), svc.NumBackendIDs())
	}
	w.snap.dst = dst
	w.snap.done.Store(false)
	w.snap.want.Store(true)
	deadline := time.Now().Add(timeout)
	for !w.snap.done.Load() {
		if time.Now().After(deadline) {
			// Withdraw the request; if the worker took it meanwhile, wait
			// for it to finish writing.
			if w.snap.want.CompareAndSwap(true, false) {
				return false
			}
			for !w.snap.done.Load() {
				time.Sleep(10 * time.Microsecond)
			}
			w.answers.Add(1)
			return true
		}
		time.Sleep(50 * time.Microsecond)
	}
	w.answers.Add(1)
	return true
}

// Answers is how many snapshots the worker has answered, to any reader:
// an answer to the stats path or the admin API is proof of polling too
// (readers take turns, and the one behind another waits from just after
// a poll: with idle_max_sleep at 1 s, longer than its timeout).
func (w *Worker) Answers() uint64 { return w.answers.Load() }

// Local gives the I/O loop (same lcore) direct access to the counters it
// maintains itself: tx, idle polls, drops after tx.
func (w *Worker) Local() *Counters { return &w.c }

// DropSummary names every non-zero drop counter, for logs:
// "no-service=3 truncated-tcp=1".
func DropSummary(c *Counters) string {
	var b []byte
	ForEachDrop(c, func(name string, v uint64) {
		if v == 0 {
			return
		}
		if len(b) > 0 {
			b = append(b, ' ')
		}
		b = append(b, name...)
		b = append(b, '=')
		b = strconv.AppendUint(b, v, 10)
	})
	return string(b)
}

// ForEachDrop calls f with every drop counter of c and its reason's name
// (the names dataplane.DropSummary logs and docs/drop-reasons.md lists):
// parse failures, encapsulation drops, then the dataplane's own reasons.
// Zero counters are included so metrics exist from the start.
func ForEachDrop(c *Counters, f func(reason string, n uint64)) {
	for r := 1; r < len(c.Parse); r++ { // Parse[0] is "ok"
		f(packet.Reason(r).String(), c.Parse[r])
	}
	for r, n := range c.Encap {
		if encap.Result(r).Drop() {
			f(encapDropNames[r], n)
		}
	}
	for r, n := range c.Drops {
		f(DropReason(r).String(), n)
	}
}

// Add adds the worker-wide counters of c to sum (not the per-VIP and
// per-backend ones: the control plane's Status sums those).
func (sum *Counters) Add(c *Counters) {
	sum.RxPackets += c.RxPackets
	sum.RxBytes += c.RxBytes
	sum.TxPackets += c.TxPackets
	sum.TxBytes += c.TxBytes
	sum.TxFull += c.TxFull
	sum.Punted += c.Punted
	sum.FromKernel += c.FromKernel
	sum.HealthTunnelTx += c.HealthTunnelTx
	sum.Fragments += c.Fragments
	sum.ICMPErrors += c.ICMPErrors
	sum.EchoReplies += c.EchoReplies
	sum.CTHits += c.CTHits
	sum.CTMisses += c.CTMisses
	sum.Moved += c.Moved
	sum.SYNKept += c.SYNKept
	sum.SYNsByTable += c.SYNsByTable
	sum.SecondChance += c.SecondChance
	sum.SecondChanceFlows += c.SecondChanceFlows
	sum.Bursts += c.Bursts
	sum.IdlePolls += c.IdlePolls
	for i, n := range c.Parse {
		sum.Parse[i] += n
	}
	for i, n := range c.Encap {
		sum.Encap[i] += n
	}
	for i, n := range c.Drops {
		sum.Drops[i] += n
	}
	for i, n := range c.QUIC {
		sum.QUIC[i] += n
	}
	for i, n := range c.PuntLimited {
		sum.PuntLimited[i] += n
	}
	ct, s := &c.Conntrack, &sum.Conntrack
	s.Hits += ct.Hits
	s.Misses += ct.Misses
	s.Inserts += ct.Inserts
	s.InsertFailed += ct.InsertFailed
	s.Expired += ct.Expired
	s.Deleted += ct.Deleted
	s.Dropped += ct.Dropped
	s.Reopened += ct.Reopened
	for i, n := range ct.Evicted {
		s.Evicted[i] += n
	}
	sum.Flows += c.Flows
}
