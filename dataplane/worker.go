package dataplane

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/flow"
	"github.com/fulcrumlb/fulcrum/header"
	"github.com/fulcrumlb/fulcrum/internal/prefetch"
	"github.com/fulcrumlb/fulcrum/packet"
	"github.com/fulcrumlb/fulcrum/punt"
	"github.com/fulcrumlb/fulcrum/sched"
)

// MaxBurst is the largest burst Process accepts: conntrack's, whose
// per-burst arrays bound it (one definition, package conntrack).
const MaxBurst = conntrack.MaxBurst

// Pkt is one packet of a burst: a frame at Buf[Off:Off+Len] with headroom
// in front of it (a DPDK mbuf's buffer, or a Go slice in tests). Process
// moves Off and Len when it rewrites the frame (encapsulation, ICMP reply).
type Pkt struct {
	Buf []byte
	Off int
	Len int
}

// Verdict is what Process decided for a packet.
type Verdict uint8

const (
	Drop Verdict = iota // free it; counted under a reason
	Tx                  // send out of the wire port (to a backend, or an ICMP reply to the client)
	Punt                // hand to the kernel through the exception port
)

// NextHop holds the next hop's MAC for each outer family, the Ethernet
// destination the worker writes. It travels in the Services snapshot; the
// control plane publishes a copy when the neighbour table changes.
type NextHop struct {
	MAC4, MAC6 [6]byte
	Has4, Has6 bool
}

// mac is the next hop's MAC toward a tunnel of the outer family (IPv6 if
// v6), and whether it is known.
func (nh *NextHop) mac(v6 bool) (*[6]byte, bool) {
	if v6 {
		return &nh.MAC6, nh.Has6
	}
	return &nh.MAC4, nh.Has4
}

// Shared is what every worker reads and the control plane writes: atomic
// pointers loaded once per burst.
type Shared struct {
	Services atomic.Pointer[Services] // tables, encapsulator and next hop
	Loads    atomic.Pointer[Loads]
}

// Worker is one lcore's forwarding state. Everything in it belongs to that
// lcore; the control plane reads its counters through Snapshot.
type Worker struct {
	ID      int
	shared  *Shared
	ct      *conntrack.Table
	hasher  flow.Hasher      // the fleet hash (under each VIP's fields): Maglev, and the tunnel's entropy fields
	local   flow.LocalHasher // conntrack's buckets and signatures
	portMAC [6]byte

	// selfSource: selectBackend refused a new flow from a VIP or the
	// LB's own address (the caller counts it as a martian source).
	selfSource bool
	// untracked: when a datagram flow of a load-based VIP last found no
	// conntrack slot, so that selectBackend places datagram flows by the
	// table for a UDP timeout after it (untrackedRecently).
	untracked windowMark

	// Per-burst scratch, reused.
	parsed   [MaxBurst]packet.Parsed
	keys     [MaxBurst]*flow.Tuple // the flow a packet belongs to: its own tuple, or quoted[i]
	quoted   [MaxBurst]flow.Tuple  // for an ICMP error: the reversed quoted flow
	hashes   [MaxBurst]uint64      // fleet hash
	lhashes  [MaxBurst]uint64      // local hash (not for fragments)
	vips     [MaxBurst]*VIP
	ctIdx    [MaxBurst]uint8 // packets that go through conntrack, in order
	ctHashes [MaxBurst]uint64
	ctKeys   [MaxBurst]*flow.Tuple
	ctOut    [MaxBurst]*conntrack.Entry
	chance   [MaxBurst]*Backend // selectBackend's second chance for packet i (secondchance.go)
	Verdicts [MaxBurst]Verdict

	routed  [MaxBurst]*Backend // QUIC short headers routed by connection ID (quic.go); nil: the usual way
	initial [MaxBurst]bool     // a QUIC client's Initial (quic.go): a new connection, as a SYN is

	c      Counters
	snap   snapshotReq
	snapMu sync.Mutex // one Snapshot reader at a time (slow path)
	op     atomic.Pointer[Op]
	now    conntrack.Time // of the last burst, for Idle

	// Schedulers other than Maglev: a picker per VIP id, rebuilt when the
	// snapshot changes (between bursts), the lcore's own random source,
	// and, by backend id, this lcore's active flows when it first looked
	// after the last published Loads (activeBase, taken in epoch
	// baseEpoch): the published counts and the change since then are the
	// backend's load, so a burst of new flows sees its own choices and a
	// connection that closed stops counting at once, as least connections
	// means it.
	svcSeen    *Services
	pickers    []sched.Picker
	loadBuf    []sched.Load
	loadsSeen  *Loads
	epoch      uint32
	activeBase []int32
	baseEpoch  []uint32
	rng        sched.Rand

	// ICMP replies: token buckets per lcore (RFC 1812 4.3.2.8, RFC 4443
	// 2.4(f): rate-limit ICMP errors), so spoofed packets cannot turn the
	// LB into a reflector. Echo replies have their own budget: a ping
	// flood must not starve the too-big replies path MTU discovery needs.
	tooBig, echo tokenBucket

	// The exception path's budgets, one a class (punt.go).
	puntBudget [punt.NumClasses]tokenBucket

	// burstNew marks, by the top 8 bits of the hash, the flows this burst
	// inserted into conntrack: a later packet of the burst that missed in
	// the batched lookup (done before any insert) looks again only when
	// its bit is set, so it follows its flow's first packet (and its
	// scheduler's choice) instead of choosing anew. 256 bits keep the
	// false look-ups of a burst of new flows rare (one in eight or less
	// with 32 new flows).
	burstNew [4]uint64

	capture atomic.Pointer[captureRing] // capture.go: nil unless a capture runs
	why     [MaxBurst]dropWhy           // a dropped packet's reason (capture.go reads it)

	fast        fastScratch // the fused path's per-burst state (fast.go)
	generalOnly bool        // tests: every packet through the general stages
	noException bool        // no exception path: a packet for the host is a no-exception-path drop (SetExceptionPath)
	fastIdle    int         // bursts to run without trying the fused path
	fastBackoff int         // the next such pause (doubles up to maxFastBackoff)

	// evictedNew is the conntrack's count of live new entries evicted
	// (handshakes in progress) when last read; handshakeEvicted: when
	// it was last seen to grow, so that load-based VIPs place SYNs by
	// the table for a tcp_syn timeout after it (handshakesEvicted).
	evictedNew       uint64
	handshakeEvicted windowMark

	answers atomic.Uint64 // snapshots answered, to any reader (Answers); control side only
}

// windowMark dates the last time something happened, for a window after
// it. The clock never goes back, so an age that looks negative is 2^31
// ms or more: the window has passed, and the mark is cleared (left set,
// it would come back for 24.8 days in every 49.7 once the clock
// wrapped).
type windowMark struct {
	at  conntrack.Time
	set bool
}

// mark dates the mark at now.
func (m *windowMark) mark(now conntrack.Time) { m.at, m.set = now, true }

// within reports whether the mark was dated at most window before now,
// and clears it once that has passed.
func (m *windowMark) within(now, window conntrack.Time) bool {
	if !m.set {
		return false
	}
	if age := int32(now - m.at); age >= 0 && age <= int32(window) {
		return true
	}
	m.set = false
	return false
}

// NewWorker creates a worker with its own conntrack table.
func NewWorker(id int, shared *Shared, ctCfg conntrack.Config, key flow.Key, portMAC [6]byte) (*Worker, error) {
	ctCfg.Backends = MaxBackends // per-backend flow counts: the load signal
	ct, err := conntrack.New(ctCfg)
	if err != nil {
		return nil, err
	}
	w := &Worker{ID: id, shared: shared, ct: ct, hasher: flow.NewHasher(key), local: flow.NewLocalHasher(key), portMAC: portMAC,
		tooBig: fullBucket(ICMPBurst), echo: fullBucket(EchoBurst), activeBase: make([]int32, MaxBackends), baseEpoch: make([]uint32, MaxBackends),
		rng: sched.NewRand(uint64(time.Now().UnixNano()) ^ uint64(id+1)*0x9e3779b97f4a7c15)}
	for c, r := range defaultPunt {
		w.puntBudget[c] = fullBucket(punt.Burst(r))
	}
	return w, nil
}

// Conntrack is the worker's flow table. Only the worker's own lcore may use
// it while the worker runs.
func (w *Worker) Conntrack() *conntrack.Table { return w.ct }

// Process decides the fate of a burst of at most MaxBurst packets received
// at now, rewriting forwarded frames in place; Verdicts[i] says what to do
// with pkts[i]. It allocates nothing, takes no lock and makes no syscall.
//
// The stages run over the whole burst one after another (parse and classify
// all, then one batched conntrack lookup, then select and encapsulate), so
// the conntrack bucket misses of a burst overlap instead of queueing.
//
// Most packets of a busy LB belong to established flows of exact-port VIPs
// that conntrack knows: those take the fused path (fastBurst), and the
// rest of the burst goes through the general stages (process), with the
// same results, byte for byte, as if the whole burst had.
func (w *Worker) Process(pkts []Pkt, now conntrack.Time) {
	if len(pkts) > MaxBurst {
		pkts = pkts[:MaxBurst]
	}
	svc := w.shared.Services.Load() // with svc nil every packet is punted
	if svc != w.svcSeen {
		w.schedulersFor(svc) // a new snapshot: allocates, once, between bursts
	}
	switch {
	case svc != nil && !w.generalOnly && w.fastIdle == 0:
		w.fastBurst(pkts, svc, now)
	case w.fastIdle > 0:
		// Recent bursts had nothing to fuse (a SYN flood, a cold
		// table): skip the attempt for a few bursts, which would only
		// parse and look up again what the general path will.
		w.fastIdle--
		w.process(pkts, svc, now)
	default:
		w.process(pkts, svc, now)
	}
	w.now = now
	w.serveSnapshot()
	w.serveOp(now)
}

// process runs the general stages over a burst. With svc nil every packet
// is punted (nh is not read).
func (w *Worker) process(pkts []Pkt, svc *Services, now conntrack.Time) {
	var nh *NextHop
	if svc != nil {
		nh = &svc.NextHop
	}
	c := &w.c
	m := 0
	for i := range pkts {
		w.vips[i] = nil
		w.routed[i] = nil
		if v := w.classify(&pkts[i], i, svc, now); v != nil {
			w.vips[i] = v
			w.hashes[i] = w.fleetHash(v, w.keys[i])
			if w.parsed[i].Fragment || w.routed[i] != nil {
				continue // stateless: fragments carry no flow state (fragment policy); an error about a check's answer names its backend
			}
			if v.QUIC != nil {
				if w.routed[i] = w.routeQUIC(svc, v, &pkts[i], i); w.routed[i] != nil {
					continue // the connection ID names the backend: no conntrack
				}
			}
			lh := w.local.Hash(w.keys[i])
			w.lhashes[i] = lh
			w.ctIdx[m] = uint8(i)
			w.ctHashes[m] = lh
			w.ctKeys[m] = w.keys[i]
			m++
		}
	}
	if m > 0 {
		if w.ct.LookupBurst(w.ctHashes[:m], w.ctKeys[:m], now, w.ctOut[:m]) < m {
			// The misses will insert: start the loads of the entry
			// lines their inserts touch and of the Maglev slots they
			// will read, together.
			var lines [(conntrack.BucketSlots + 1) * MaxBurst]uintptr
			nl := 0
			for j, e := range w.ctOut[:m] {
				if e == nil {
					nl += w.ct.InsertLines(w.ctHashes[j], lines[nl:])
					if i := w.ctIdx[j]; w.vips[i].Table != nil {
						lines[nl] = w.vips[i].Table.SlotLine(w.hashes[i])
						nl++
					}
				}
			}
			prefetch.Lines(lines[:nl])
		}
	}
	j := 0
	w.burstNew = [4]uint64{}
	ev := w.ct.Evictions() // an insert that evicts may give a hit's slot to another flow
	for i := range pkts {
		v := w.vips[i]
		if v == nil {
			continue
		}
		p := &pkts[i]
		ps := &w.parsed[i]
		var e *conntrack.Entry
		if j < m && int(w.ctIdx[j]) == i {
			e = w.ctOut[j]
			if e != nil && w.ct.Evictions() != ev && w.ct.Stale(e, w.keys[i]) {
				e = nil // evicted by an insert earlier in the burst: a miss now
			}
			if h := w.lhashes[i] >> 56; e == nil && w.burstNew[h>>6]&(1<<(h&63)) != 0 {
				// Maybe a later packet of a flow this burst began.
				e = w.ct.LookupAgain(w.lhashes[i], w.keys[i], now)
			}
			j++
		}
		w.chance[i] = nil
		be := w.routed[i]
		if be == nil {
			be = w.selectBackend(svc, v, i, e, now)
		}
		if be == nil {
			r := DropNoBackend
			if w.selfSource {
				r, w.selfSource = DropMartianSource, false
			}
			w.drop(i, r)
			continue
		}
		dst, ok := nh.mac(be.Target.OuterV6())
		if !ok {
			w.drop(i, DropNoNextHop)
			continue
		}
		cht := chanceTarget(v.Encap, w.chance[i])
		fromGroup := groupSource(p) // before encapTo, which writes a reply over the frame
		start, length, res := w.encapTo(svc.Enc, p, ps, entropyHash(e, w.hashes[i]), v.Encap, be, cht, dst)
		if res == encap.ICMPReply {
			// RFC 1812 4.3.2.7: no ICMP error toward an address of our
			// own; such a source is spoofed, and the reply would come
			// back to the LB.
			if isSelf(svc, &ps.Tuple.Src) {
				w.drop(i, DropICMPToSelf)
				continue
			}
			if fromGroup {
				w.drop(i, DropReplyToGroup)
				continue
			}
			if !w.tooBig.take(now, ICMPRate, ICMPBurst) {
				w.drop(i, DropICMPRateLimited)
				continue
			}
		}
		c.Encap[res]++
		if res.Drop() {
			w.Verdicts[i] = Drop
			w.why[i] = whyEncap(res)
			continue
		}
		if res == encap.Forward {
			// Carried, unless the field would have made an IPv4 packet
			// without DF too big (EncapChance leaves it out then).
			if cht != nil && length-int(ps.IPLen) > header.EthernetMinimumSize+encap.Overhead(v.Encap, be.Target.OuterV6()) {
				c.SecondChance++
			}
			countForward(c, v, be, int(ps.L3Off)+int(ps.IPLen))
			if ps.Proto == packet.ProtoICMP || ps.Proto == packet.ProtoICMPv6 {
				c.ICMPErrors++ // the only ICMP a VIP forwards (classify): routed, not merely parsed
			}
		}
		p.Off, p.Len = start, length
		w.Verdicts[i] = Tx
	}
}

// encapTo encapsulates p toward be as EncapChance does, through the
// backend's prepared headers (encap.Header) when they serve: no second
// chance, and the kind, family, MTU and headroom they were prepared for.
// Header.Encap checks those itself (Fits first) and changes nothing when
// it refuses; EncapChance then takes the packet.
func (w *Worker) encapTo(enc *encap.Encapsulator, p *Pkt, ps *packet.Parsed, hash uint64, kind encap.Kind, be *Backend, cht *encap.Backend, dst *[6]byte) (start, length int, res encap.Result) {
	if cht == nil {
		if start, length = be.Hdr.Encap(p.Buf, p.Off, p.Len, ps, kind, hash, dst, &w.portMAC); length != 0 {
			return start, length, encap.Forward
		}
	}
	return enc.EncapChance(p.Buf, p.Off, p.Len, ps, hash, kind, &be.Target, cht, *dst, w.portMAC)
}

// classify parses packet i, decides whether it is VIP traffic and fills
// keys[i]. It returns the VIP, or nil after setting the verdict (punt or
// drop).
func (w *Worker) classify(p *Pkt, i int, svc *Services, now conntrack.Time) *VIP {
	c := &w.c
	c.RxPackets++
	c.RxBytes += uint64(p.Len)
	ps := &w.parsed[i]
	if p.Off < 0 || p.Len < 0 || p.Off > len(p.Buf) || p.Len > len(p.Buf)-p.Off {
		w.drop(i, DropBadBuffer)
		return nil
	}
	if r := packet.Parse(p.Buf[p.Off:p.Off+p.Len], ps); r != packet.OK {
		c.Parse[r]++
		w.Verdicts[i] = Drop
		w.why[i] = whyParse(r)
		return nil
	}
	if ps.L3 == packet.L3Other {
		if w.otherHostMAC(p) {
			w.drop(i, DropNotForHost)
			return nil
		}
		w.punt(i, svc, puntL2(ps), now)
		return nil
	}
	if svc == nil {
		w.punt(i, nil, puntClass(nil, ps), now)
		return nil
	}
	if p.Buf[p.Off]&1 != 0 && svc.isVIPAddr(&ps.Tuple.Dst) {
		// VIP traffic reaches the LB in frames to its own MAC (a
		// router's next hop). One to a broadcast or multicast MAC
		// reaches every LB of the segment, and each would forward it
		// (RFC 1812 5.3.4: discard). packet.ParseFlow leaves such
		// frames here.
		w.drop(i, DropVIPLinkGroup)
		return nil
	}
	if !ps.Fragment {
		// The common case first: one probe finds the VIP of a TCP/UDP
		// packet for an exact port.
		k := makeVIPKey(&ps.Tuple.Dst, ps.Tuple.DstPort, ps.Proto)
		if v := svc.index.get(&k); v != nil { // VIPs are TCP or UDP: ICMP never matches
			if martian(&ps.Tuple) {
				w.drop(i, DropMartianSource)
				return nil
			}
			w.keys[i] = &ps.Tuple
			return v
		}
	}
	if !svc.isVIPAddr(&ps.Tuple.Dst) {
		// Not VIP traffic: ND, the host's own address (BGP, ping,
		// ssh), broadcasts and multicast: the kernel decides. (ARP and
		// other non-IP frames were punted above.)
		switch {
		case !forHost(svc, &ps.Tuple) || w.otherHostMAC(p):
			// Another host's unicast address: the kernel would only
			// drop it (it forwards nothing from the tap), after the
			// tap's write and its own work on this core.
			w.drop(i, DropNotForHost)
		case svc.health.n > 0 && forgedCheckSYN(ps):
			w.drop(i, DropHealthForgedSYN)
		case ps.IsICMPError() && svc.tunnelError(p, ps):
			w.drop(i, DropTunnelICMP)
		default:
			w.punt(i, svc, puntClass(svc, ps), now)
		}
		return nil
	}
	if martian(&ps.Tuple) {
		w.drop(i, DropMartianSource)
		return nil
	}
	w.keys[i] = &ps.Tuple
	var v *VIP
	switch {
	case ps.Fragment:
		c.Fragments++
		v = svc.fragVIP[makeVIPKey(&ps.Tuple.Dst, 0, ps.Proto)]
		if v != nil && ps.FragOffset == 0 && (ps.Proto == packet.ProtoTCP || ps.Proto == packet.ProtoUDP) &&
			svc.lookup(&ps.Tuple.Dst, firstFragDstPort(p, ps), ps.Proto) == nil {
			// A first fragment carries the ports (the parser checked
			// the header is there, and leaves them out of the tuple so
			// that every fragment hashes alike): one to a port no VIP of
			// the address serves is dropped as the whole packet would
			// be. Sent on, the backend reassembled it and delivered it
			// to whatever listens there (the VIP is on its loopback):
			// every port of the backends reachable by fragmenting. The
			// later fragments, without their first, never reassemble.
			v = nil
		}
	case ps.IsICMPError():
		var q flow.Tuple
		if r := packet.ParseICMPError(p.Buf[p.Off:p.Off+p.Len], ps, &q); r != packet.OK {
			c.Parse[r]++
			w.Verdicts[i] = Drop
			w.why[i] = whyParse(r)
			return nil
		}
		// The quote is a packet the backend sent from the VIP to the
		// client; its reverse is the client's flow, which names the
		// backend that must hear about the error.
		k := q.Reverse()
		if k.Dst != ps.Tuple.Dst || k.V6 != ps.Tuple.V6 {
			w.drop(i, DropICMPNotOurs)
			return nil
		}
		w.quoted[i] = k
		w.keys[i] = &w.quoted[i]
		if be := svc.checkAnswerOwner(&k); be != nil {
			// The quote is a check's answer (VIP -> the LB's address
			// and a check port): only the backend the port names has
			// that connection (healthpath.go).
			w.routed[i] = be
			return svc.VIPs[be.VIP]
		}
		v = svc.lookup(&k.Dst, k.DstPort, k.Proto)
	case ps.Proto == packet.ProtoICMP || ps.Proto == packet.ProtoICMPv6:
		switch {
		case !isEchoRequest(ps):
			w.drop(i, DropVIPICMP)
		case isSelf(svc, &ps.Tuple.Src):
			// From a VIP or the LB's own address: spoofed, and the
			// reply would come back to the LB (RFC 1812 4.3.2.7).
			w.drop(i, DropICMPToSelf)
		case groupSource(p):
			w.drop(i, DropReplyToGroup)
		case !w.echo.take(now, EchoRate, EchoBurst):
			w.drop(i, DropEchoRateLimited)
		default:
			echoReply(p.Buf[p.Off:p.Off+p.Len], ps, w.portMAC)
			c.EchoReplies++
			w.Verdicts[i] = Tx
		}
		return nil
	default:
		v = svc.lookup(&ps.Tuple.Dst, ps.Tuple.DstPort, ps.Proto)
	}
	if v == nil {
		w.drop(i, DropNoService)
		return nil
	}
	return v
}

// selectBackend returns the backend for packet i of VIP v: the conntrack
// entry's pin when it is still valid, otherwise the scheduler's choice
// (pinned in conntrack for a new flow). Each packet that went through
// conntrack (all but fragments) counts once, as a hit or a miss.
func (w *Worker) selectBackend(svc *Services, v *VIP, i int, e *conntrack.Entry, now conntrack.Time) *Backend {
	c := &w.c
	ps := &w.parsed[i]
	icmp := ps.Proto == packet.ProtoICMP || ps.Proto == packet.ProtoICMPv6
	syn := ps.TCPFlags&(packet.TCPSyn|packet.TCPAck) == packet.TCPSyn
	if e != nil {
		c.CTHits++
		if !icmp {
			was, lastSeen := e.State(), e.LastSeen()
			if syn && e.Live() {
				// A SYN on a live connection (established, or closed by an
				// RST alone: conntrack.Entry.Live) keeps its backend while
				// that backend serves: the LB sees no sequence numbers, so a
				// blind spoofer with the connection's 5-tuple could move
				// it otherwise (and every connection, under a load-based
				// scheduler or once a drain or a table change has left
				// pins that differ from the table). A real new connection
				// on the reused tuple reaches the backend that has the
				// old one, which accepts it (RFC 6191) or answers with a
				// challenge ACK that the client's RST settles (RFC 5961).
				// Not to a backend its checks call down, though on_down
				// "keep" leaves its flows on it: it may be dead, and a
				// new connection must not follow a dead connection's pin.
				// The entry keeps its state too (conntrack.Table.Keep): a
				// kept SYN that reopened it would leave a new entry, on
				// which a second forged SYN would be taken for the
				// retransmission of a new connection's and rechosen.
				// A flow with a second chance is pinned to the table's
				// choice while its connection may be on the chance, which
				// its agent forwards to: a SYN kept on the pin would reach
				// a backend without the connection, whose listener would
				// open a half-open one on the tuple, and its agent would
				// then deliver the flow's segments there instead of
				// forwarding them. So it goes to the chance, whose socket
				// answers with a challenge ACK (where the connection is
				// in fact on the pin, the chance's half-open socket only
				// answers the client with a SYN-ACK it ignores).
				if be := w.pinned(svc, v, e); be != nil && !be.Down && !be.Unhealthy {
					if ch := entryChance(svc, v, e, be); ch != nil && !ch.Unhealthy {
						be = ch
					}
					w.ct.Keep(e, now)
					// No new flow (the entry, its pin and its state
					// stay: SYNKept counts it), and no handshake the
					// passive checks can judge: its ACK never counts one
					// completed, so counted as tried every kept SYN (a
					// spoofer's, on one tuple, all on one backend) was a
					// failure of the pinned backend; counted as a new
					// flow, a drained backend showed new flows.
					c.SYNKept++
					return be
				}
			}
			w.ct.TouchSegment(e, now, ps.TCPFlags, hasData(ps))
			if v.QUIC != nil && w.initial[i] {
				// A QUIC client's Initial starts a connection, as a SYN
				// does (a client's one UDP socket carries many): not on
				// a pin to a backend its checks call down, which on_down
				// "keep" leaves there, and which may be dead. Its
				// retransmissions would refresh the pin for ever.
				if old := w.pinned(svc, v, e); old != nil && old.Unhealthy && !old.Down {
					if be := w.choose(svc, v, i); be != nil && be != old {
						w.ct.Repin(e, be.ID, be.Gen)
						w.countNew(c, v, be, false) // a new flow, not a SYN: passive checks judge TCP handshakes only
						return be
					}
				}
			}
			if syn && v.Sched.IsPicker() && was == conntrack.StateNew {
				// A retransmitted SYN under a load-based scheduler keeps
				// its first choice (choosing again would pick afresh),
				// unless its checks call that backend down: no SYN-ACK
				// came back, and it may be dead (on_down "keep" leaves
				// only connections on it, and this one has not begun).
				if be := w.pinned(svc, v, e); be != nil && !be.Down && !be.Unhealthy {
					backendCounters(c, be).SYNRetrans++
					return be
				}
			}
			if syn {
				// Any other SYN starts a connection: a retransmission of
				// the first SYN, a new connection reusing the 5-tuple of
				// one whose FIN the LB saw, or a connection
				// whose backend left or is down. It takes the current
				// choice, like any new flow, so that every instance of the
				// fleet agrees on it; an old pin may come from a table the
				// fleet no longer uses. While the table is unchanged this
				// is the same backend.
				be := w.choose(svc, v, i)
				if be == nil {
					return nil
				}
				if e.FlowHash() != w.hashes[i] {
					e.SetFlowHash(w.hashes[i]) // the VIP's hash setting changed (hashfields.go)
				}
				if was == conntrack.StateNew {
					backendCounters(c, be).SYNRetrans++ // no SYN-ACK reached the client
				} else {
					// A new connection on a reused tuple; a handshake
					// tried unless one tried before never completed
					// (conntrack.Entry.TryHandshake).
					w.countNew(c, v, be, e.TryHandshake())
				}
				if old := w.pinned(svc, v, e); old != be {
					w.ct.Repin(e, be.ID, be.Gen)
				}
				e.ClearChance() // a new connection: no second chance
				return be
			}
			if was == conntrack.StateNew && e.State() == conntrack.StateEstablished && e.SYNSeen() {
				// The handshake completed: the client's ACK came back one
				// client round trip after the backend's SYN-ACK. (A flow
				// picked up mid-stream completes none: the gap between
				// its first two packets here is no handshake.)
				e.HandshakeDone()
				if be := w.pinned(svc, v, e); be != nil {
					bc := backendCounters(c, be)
					bc.Established++
					bc.HandshakeMs += uint64(now - lastSeen)
				}
			}
			switch st := e.State(); {
			case st == conntrack.StateClosing && was == conntrack.StateClosing:
				// secondchance.go: the old connection's, or a new one's on
				// the reused tuple. Not the segment that closes an
				// established entry (the client's FIN or RST): that is
				// its connection's, which the pin has, and the fused
				// path sends it there too.
				if tb, pin := w.closingChance(svc, v, i, e); tb != nil {
					w.chance[i] = pin
					return tb
				}
			case was == conntrack.StateClosing && st == conntrack.StateEstablished:
				w.reopened(svc, v, i, e) // secondchance.go: a forged close, or a reused tuple
			}
		}
		if be := w.pinned(svc, v, e); be != nil && !be.Down {
			if !icmp {
				w.chance[i] = entryChance(svc, v, e, be)
			}
			return be
		}
		// The pinned backend was removed or is down: re-select and count
		// the move.
		be := w.choose(svc, v, i)
		if be != nil {
			w.ct.Repin(e, be.ID, be.Gen)
			c.Moved++
			if !icmp {
				w.chance[i] = entryChance(svc, v, e, be)
			}
		}
		return be
	}
	if !ps.Fragment {
		c.CTMisses++
	}
	if !icmp && isSelf(svc, &ps.Tuple.Src) {
		// A new flow from a VIP or from the LB itself: spoofed (the
		// backend's answer would come to the LB), or a loop.
		w.selfSource = true
		return nil
	}
	if ps.Fragment || icmp {
		// Fragments and ICMP errors for a flow this instance has not
		// seen never create state and are not new flows: the VIP's
		// Maglev table places them, under every scheduler (a
		// load-based one would pick afresh for each fragment of a
		// datagram, and count each in its load). An untracked
		// segment's flow follows the table too, so an error about it
		// reaches the same backend.
		return w.fromTable(svc, v, w.hashes[i])
	}
	picker := v.Sched.IsPicker()
	var be *Backend
	if picker && ps.Proto == packet.ProtoTCP && ps.TCPFlags&packet.TCPSyn == 0 {
		// A load-based scheduler places connections, at their SYN. A
		// segment of a connection this instance does not know (ECMP
		// moved it here, its entry expired, or its SYN found no slot)
		// is placed by the VIP's Maglev table: the same answer for each
		// of its packets, and on every instance.
		be = w.fromTable(svc, v, w.hashes[i])
	} else if picker && ps.Proto == packet.ProtoTCP && w.handshakesEvicted(now) {
		// The table is evicting handshakes in progress (a SYN flood
		// fills it): a connection placed by the scheduler whose entry
		// goes before the client's ACK comes would have that ACK placed
		// by the table (above), most likely elsewhere, and reset. For a
		// tcp_syn timeout after the last such eviction, SYNs are placed
		// by the table too, whose answer the ACK gets with or without
		// the entry.
		be = w.fromTable(svc, v, w.hashes[i])
		c.SYNsByTable++
	} else if picker && ps.Proto != packet.ProtoTCP && w.untrackedRecently(now) {
		// A datagram has no SYN to tell a new flow from one this worker
		// forwarded untracked while the table was full (placed by the
		// table, below): for a UDP timeout after the last such flow,
		// datagram flows are placed by the table too, so that a stream
		// that gets a slot at last keeps its backend.
		be = w.fromTable(svc, v, w.hashes[i])
	}
	if be == nil {
		be = w.choose(svc, v, i)
	}
	if be == nil {
		return nil
	}
	e = w.ct.Insert(w.lhashes[i], w.keys[i], conntrack.Initial(ps.Proto, ps.TCPFlags), v.ID, be.ID, be.Gen, now)
	if e != nil && syn {
		e.MarkSYN()
	}
	if e == nil && picker {
		// No slot (a full table under a flood): an untracked flow's
		// later packets would choose again, and go elsewhere. The
		// table's answer is the one they will all get.
		if ps.Proto != packet.ProtoTCP {
			w.untracked.mark(now)
		}
		if tb := w.fromTable(svc, v, w.hashes[i]); tb != nil && tb != be {
			be = tb
		}
	}
	w.countNew(c, v, be, syn)
	if e != nil {
		e.SetFlowHash(w.hashes[i]) // the fused path's hits read it instead of hashing again
		h := w.lhashes[i] >> 56
		w.burstNew[h>>6] |= 1 << (h & 63)
	}
	if v.Prev != nil && ps.Proto == packet.ProtoTCP && ps.TCPFlags&packet.TCPSyn == 0 {
		w.firstChance(svc, v, i, be, e) // a flow this instance never saw, mid-connection
	}
	return be
}

// handshakesEvicted reports whether the conntrack evicted a live new
// entry (a handshake in progress) within a tcp_syn timeout of now. The
// count is read here and at the end of each burst and idle poll
// (noteEvictions, from serveSnapshot), so an eviction is dated at the
// time of its burst on either path.
func (w *Worker) handshakesEvicted(now conntrack.Time) bool {
	w.noteEvictions(now)
	return w.handshakeEvicted.within(now, w.ct.Timeout(conntrack.StateNew))
}

// noteEvictions dates a growth of the count of handshakes evicted since
// it was last read at now.
func (w *Worker) noteEvictions(now conntrack.Time) {
	if n := w.ct.EvictedLive(conntrack.StateNew); n != w.evictedNew {
		w.evictedNew = n
		w.handshakeEvicted.mark(now)
	}
}

// untrackedRecently reports whether a datagram flow of a load-based VIP
// found no conntrack slot within a UDP timeout (conntrack's other) of now.
func (w *Worker) untrackedRecently(now conntrack.Time) bool {
	return w.untracked.within(now, w.ct.Timeout(conntrack.StateOther))
}

// pinned is e's backend if it is still the same backend of this VIP.
func (w *Worker) pinned(svc *Services, v *VIP, e *conntrack.Entry) *Backend {
	// Services.Holder and the VIP, written out: through Holder the
	// forwarding path counted up to 8 instructions a packet more (make
	// icount), within what two builds differ by; kept written out.
	id := e.Backend()
	if int(id) >= len(svc.Backends) {
		return nil
	}
	if be := svc.Backends[id]; be != nil && be.Gen == e.Gen() && be.VIP == v.ID {
		return be
	}
	return nil
}

// countNew counts a new flow for v on be.
func (w *Worker) countNew(c *Counters, v *VIP, be *Backend, syn bool) {
	bc := backendCounters(c, be)
	bc.NewFlows++
	if syn {
		bc.SYNs++
	}
	vipCounters(c, v).NewFlows++
}

// choose picks the backend of a new flow: by default the VIP's Maglev
// table, the same answer on every instance; otherwise the VIP's scheduler
// over its backends' loads.
func (w *Worker) choose(svc *Services, v *VIP, i int) *Backend {
	if !v.Sched.IsPicker() || int(v.ID) >= len(w.pickers) || w.pickers[v.ID] == nil {
		return w.fromTable(svc, v, w.hashes[i])
	}
	loads := w.shared.Loads.Load()
	if loads != w.loadsSeen {
		w.epoch++ // the published counts now include our flows: count anew from here
		w.loadsSeen = loads
	}
	lb := w.loadBuf[:len(v.Members)]
	for k, id := range v.Members {
		be := svc.Backends[id]
		var l sched.Load
		if be != nil {
			if !be.Down {
				l.Weight = uint32(be.Weight)
			}
			l.Active = w.localLoad(id, be)
		}
		if loads != nil && loads.For(id, be) {
			l.Active += loads.Active[id]
			l.EWMA = loads.Latency[id]
		}
		l.Active = max(l.Active, 0)
		lb[k] = l
	}
	k := w.pickers[v.ID].Pick(lb, &w.rng)
	if k < 0 {
		return nil
	}
	return svc.Backends[v.Members[k]]
}

// localLoad is the change in this lcore's active flows of be (id) since
// it first looked after the last published Loads: the flows it gave be
// since (its conntrack insert counts at once), less those that closed (a
// FIN or RST seen) or ended. Published counts lag up to a second, and
// with short connections a load-based scheduler that counted only the
// picks since spread them as round robin does.
func (w *Worker) localLoad(id uint32, be *Backend) int64 {
	now := w.ct.BackendActive(id, be.Gen)
	if w.baseEpoch[id] != w.epoch {
		w.baseEpoch[id], w.activeBase[id] = w.epoch, now
	}
	return int64(now - w.activeBase[id])
}

// schedulersFor makes the pickers of a new snapshot's VIPs. A VIP whose
// scheduler and members the snapshot leaves alone keeps its picker (and
// its round-robin turn): the control plane publishes a snapshot every
// second while any backend slow-starts, and at every health verdict, and
// a fresh round robin starts at the first backend each time.
func (w *Worker) schedulersFor(svc *Services) {
	prev, old := w.svcSeen, w.pickers
	w.svcSeen = svc
	if svc == nil {
		return
	}
	w.c.ensure(len(svc.VIPs), svc.NumBackendIDs())
	for id, b := range svc.Backends {
		// An id handed to a new incarnation: the old one's flows are not
		// its load, and it has none yet (BackendActive counts by
		// incarnation).
		if b != nil && (prev == nil || id >= len(prev.Backends) || prev.Backends[id] == nil || prev.Backends[id].Gen != b.Gen) {
			w.activeBase[id], w.baseEpoch[id] = 0, w.epoch
		}
	}
	w.pickers = make([]sched.Picker, len(svc.VIPs))
	most := 0
	for _, v := range svc.VIPs {
		if v == nil || !v.Sched.IsPicker() {
			continue
		}
		most = max(most, len(v.Members))
		if prev != nil && int(v.ID) < len(prev.VIPs) && int(v.ID) < len(old) && old[v.ID] != nil {
			if o := prev.VIPs[v.ID]; o != nil && o.Key == v.Key && o.Gen == v.Gen && o.Sched == v.Sched &&
				o.SchedOpt == v.SchedOpt && slices.Equal(o.Members, v.Members) {
				w.pickers[v.ID] = old[v.ID]
				continue
			}
		}
		if p, err := sched.New(v.Sched, v.SchedOpt); err == nil { // validated with the config
			w.pickers[v.ID] = p
		}
	}
	if len(w.loadBuf) < most {
		w.loadBuf = make([]sched.Load, most)
	}
}

func (w *Worker) fromTable(svc *Services, v *VIP, hash uint64) *Backend {
	if v.Table == nil {
		return nil
	}
	idx := v.Table.Lookup(hash)
	if idx < 0 || idx >= len(v.Backends) {
		return nil
	}
	id := v.Backends[idx]
	if int(id) >= len(svc.Backends) {
		return nil
	}
	return svc.Backends[id]
}

func (w *Worker) drop(i int, r DropReason) {
	w.c.Drops[r]++
	w.Verdicts[i] = Drop
	w.why[i] = dropWhy(r)
}

// backendCounters is be's counter slot, reset when its id was handed to a
// new backend since the last packet.
// countForward counts a forwarded packet of length bytes on its VIP and
// backend.
func countForward(c *Counters, v *VIP, be *Backend, length int) {
	vc := vipCounters(c, v)
	vc.Packets++
	vc.Bytes += uint64(length)
	bc := backendCounters(c, be)
	bc.Packets++
	bc.Bytes += uint64(length)
}

// vipCounters is v's counters, started again when v's id belonged to
// another VIP before (a removed VIP's id goes to a later one).
func vipCounters(c *Counters, v *VIP) *PacketBytes {
	vc := &c.VIPs[v.ID]
	if vc.Gen != v.Gen {
		*vc = PacketBytes{Gen: v.Gen}
	}
	return vc
}

func backendCounters(c *Counters, be *Backend) *PacketBytes {
	bc := &c.Backends[be.ID]
	if bc.Gen != be.Gen {
		*bc = PacketBytes{Gen: be.Gen}
	}
	return bc
}

// ICMP reply budgets per lcore, one for errors (too-big) and one for echo
// replies: Rate per second, bursts of Burst (Linux's icmp_msgs_per_sec and
// icmp_msgs_burst defaults).
const (
	ICMPRate  = 1000
	ICMPBurst = 50
	EchoRate  = 1000
	EchoBurst = 50
)

// tokenBucket is one budget of packets a second (ICMP replies, punts),
// kept in thousandths of a token so that a rate below one a millisecond
// (the clock's resolution) still refills.
type tokenBucket struct {
	milli int64 // tokens x 1000
	last  conntrack.Time
}

// fullBucket is a budget holding burst tokens.
func fullBucket(burst int) tokenBucket { return tokenBucket{milli: int64(burst) * 1000} }

// take takes one token, first refilling rate per second (now is in
// milliseconds) since the last refill, up to burst. The clock is
// milliseconds in 32 bits and never goes back: a difference that looks
// negative is a budget idle for 2^31 ms (24.8 days) or more, which is full
// (left alone, it would refill nothing for another 24.8 days: a too-big
// budget unused that long would answer 50 and then fall silent).
func (b *tokenBucket) take(now conntrack.Time, rate, burst int) bool {
	switch el := int64(int32(now - b.last)); {
	case el > 0:
		b.milli = min(int64(burst)*1000, b.milli+el*int64(rate))
		b.last = now
	case el < 0:
		b.milli, b.last = int64(burst)*1000, now
	}
	if b.milli < 1000 {
		return false
	}
	b.milli -= 1000
	return true
}

// martian reports whether t's source is an address no client has:
// unspecified, loopback, multicast, 0.0.0.0/8 or 240.0.0.0/4 (with the
// broadcast address); for IPv6 ::, ::1 and ff00::/8; link-local in
// either family, which no router forwards (encap.Routed4). A few compares
// of the first bytes: the fused path makes them on every packet.
func martian(t *flow.Tuple) bool {
	if !t.V6 {
		return !encap.Routed4([4]byte(t.Src[12:]))
	}
	return !encap.Routed6(t.Src)
}

// isSelf reports whether a is a VIP address or one of the LB's own (the
// encapsulator's outer sources).
func isSelf(svc *Services, a *[16]byte) bool {
	return *a == svc.self4 || *a == svc.self6 || svc.isVIPAddr(a)
}

// hasData reports whether the parsed segment carries transport payload:
// after a closing entry's FIN, data shows that FIN to be forged
// (conntrack.Table.TouchSegment).
func hasData(ps *packet.Parsed) bool {
	return int(ps.L3Off)+int(ps.IPLen) > int(ps.PayloadOff)
}

// forHost reports whether the kernel may take an IP packet of flow t that
// is not VIP traffic: one to the LB's own address, or to one that is no
// other host's unicast address (IPv4 multicast, broadcast and link-local;
// IPv6 multicast and link-local: ND, router advertisements, DHCP). The
// kernel's side of the tap has the LB's addresses only, and forwards
// nothing (package exception), so anything else would cost the forwarding
// core a write to the tap and the kernel's work to drop it: a flood of
// packets to random addresses would starve the loop.
func forHost(svc *Services, t *flow.Tuple) bool {
	a := &t.Dst
	if *a == svc.self4 || *a == svc.self6 {
		return true
	}
	if !t.V6 {
		return a[12] >= 224 || a[12] == 169 && a[13] == 254
	}
	return a[0] == 0xff || a[0] == 0xfe && a[1]&0xc0 == 0x80
}

// forgedCheckSYN reports whether ps, a packet to the LB itself, is a SYN
// without ACK to a port of the health checks through the tunnel
// (HealthPortBase...): nothing opens a connection to those ports, which
// the kernel's checks use as their source ports, and a SYN that reaches
// the check's socket in SYN-SENT (the ports and addresses are predictable)
// makes the kernel take it for a simultaneous open, so that the backend's
// real SYN-ACK no longer matches and the check fails.
func forgedCheckSYN(ps *packet.Parsed) bool {
	return ps.Proto == packet.ProtoTCP && ps.TCPFlags&(packet.TCPSyn|packet.TCPAck) == packet.TCPSyn &&
		isHealthPort(ps.Tuple.DstPort)
}

// firstFragDstPort is the destination port in the transport header of a
// first fragment of TCP or UDP (parsed: the header is there; both carry the
// port at offset 2).
func firstFragDstPort(p *Pkt, ps *packet.Parsed) uint16 {
	f := p.Buf[p.Off : p.Off+p.Len]
	if o := int(ps.L4Off); o+4 <= len(f) {
		_, dst := header.Ports(f[o:])
		return dst
	}
	return 0
}

// groupSource reports whether the frame's source MAC address is a group
// (broadcast or multicast) address, which no station sends from (IEEE
// 802: the individual/group bit of a source address is 0): a reply to it
// (echo, too-big) would go to every host of the segment.
func groupSource(p *Pkt) bool { return p.Len >= 12 && p.Buf[p.Off+6]&1 != 0 }

// otherHostMAC reports whether the frame is to another station's unicast
// MAC address (the port runs promiscuous; a switch floods frames for
// addresses it has not learnt): the kernel behind the exception tap,
// which has the port's MAC, would only drop it, after the tap's write and
// a token of its class's punt budget (a flood of other hosts' ARP replies
// starved the LB's own ARP). VIP traffic is not judged by it (README,
// "Status and known limits").
func (w *Worker) otherHostMAC(p *Pkt) bool {
	if p.Len < 6 || w.portMAC == ([6]byte{}) {
		return false
	}
	d := p.Buf[p.Off : p.Off+6]
	return d[0]&1 == 0 && [6]byte(d) != w.portMAC
}
